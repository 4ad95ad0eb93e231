#!/usr/bin/env python3
"""A seeded, stratified random sample of mutants of model/, run in shards (docs/mutants.md).

A full run of every mutant of model/ is ~17 hours on a 2-core machine (each mutant costs a
release rebuild), so the mutation score is estimated on a sample: sites are found in every
non-test source file of model/src, each file gets a share of the sample in proportion to its
sites, and a seeded generator draws the sites within a file. The sample is cut into shards that
separate runs (or CI jobs) execute; results accumulate in one JSON-lines file and `--summary`
turns them into the estimate and its 95 % (Wilson) interval.

Mutation operators (what cargo-mutants calls operator swaps, condition negation, constant
changes, early returns):
  swap       == <-> !=, < <-> <=, > <-> >=, && <-> ||, + <-> -, * -> /
  negate     `if COND {` -> `if !(COND) {`
  constant   an integer literal N -> N + 1 (0 -> 1, 1 -> 0)
  return     a `-> bool` function returns true / false at once

Each mutant is applied to the file in place, the crate and the chosen tests are built (a build
failure is `unviable`, not counted), the tests run under a timeout (a failure or a timeout is
`caught`, a pass is `missed`), and the file is restored from its saved text whatever happens.
The unmutated tree must pass the same tests first (`--baseline`), so a kill is a kill.

  fuzz/mutants-sample.py --list                 # the sample (site, operator, line) and its shards
  fuzz/mutants-sample.py --baseline --shard 0/100 --out mutants.jsonl
  fuzz/mutants-sample.py --summary mutants.jsonl
"""

import argparse
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "model", "src")
# Test helpers, not semantics: generated-protocol strategies (a proptest feature).
EXCLUDE = {"strategies.rs"}
# The model crate's own tests, and the library record (every spec's verdict, exact counts and
# messages with the self-check on): a model mutant that keeps every verdict still moves a count.
def tests_for(profile):
    return [
        ["cargo", "test", "--profile", profile, "-q", "-p", "phasecheck-model"],
        ["cargo", "test", "--profile", profile, "-q", "-p", "phasecheck-verifier", "--test", "library"],
    ]

SWAPS = [
    (" == ", " != "),
    (" != ", " == "),
    (" <= ", " < "),
    (" < ", " <= "),
    (" >= ", " > "),
    (" > ", " >= "),
    (" && ", " || "),
    (" || ", " && "),
    (" + ", " - "),
    (" - ", " + "),
    (" * ", " / "),
]


def code_part(line):
    """The line without its comment and with string literals blanked (no mutants inside)."""
    out, in_str, i = [], False, 0
    while i < len(line):
        c = line[i]
        if not in_str and line.startswith("//", i):
            break
        if c == '"' and (i == 0 or line[i - 1] != "\\"):
            in_str = not in_str
            out.append(c)
        elif in_str:
            out.append("\0")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def sites_of(path):
    """Every (line number, column, operator, old, new) of a file, test modules left out."""
    rel = os.path.relpath(path, ROOT)
    found = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines):
        if line.strip().startswith("#[cfg(test)]"):
            break
        code = code_part(line)
        if code.strip().startswith(("use ", "pub use ", "#[", "///", "//!")):
            continue
        for old, new in SWAPS:
            for m in re.finditer(re.escape(old), code):
                # `<`/`>` with spaces around are comparisons; generics are written without.
                found.append((rel, n + 1, m.start(), "swap", old, new))
        m = re.search(r"\bif (.+) \{\s*$", code)
        if m and not m.group(1).startswith("let "):
            cond = line[m.start(1) : m.end(1)]  # the real text: string literals were blanked
            found.append((rel, n + 1, m.start(1), "negate", cond, "!(" + cond + ")"))
        for m in re.finditer(r"(?<![\w.])(\d+)(?![\w.])", code):
            v = int(m.group(1))
            found.append((rel, n + 1, m.start(1), "constant", m.group(1), str(1 if v == 0 else (0 if v == 1 else v + 1))))
        m = re.search(r"\bfn \w+[^{;]*-> bool \{\s*$", code)
        if m:
            for b in ("true", "false"):
                found.append((rel, n + 1, len(line.rstrip()), "return", "", " return " + b + ";"))
    return found


def all_sites():
    by_file = {}
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".rs") and f not in EXCLUDE:
                p = os.path.join(d, f)
                by_file[os.path.relpath(p, ROOT)] = sites_of(p)
    return dict(sorted(by_file.items()))


def sample(size, seed):
    """Stratified: each file's share in proportion to its sites (largest remainders), drawn by a
    generator seeded with the seed and the file's name."""
    by_file = all_sites()
    total = sum(len(s) for s in by_file.values())
    quotas = {f: size * len(s) / total for f, s in by_file.items()}
    counts = {f: int(q) for f, q in quotas.items()}
    rest = size - sum(counts.values())
    for f in sorted(quotas, key=lambda f: (counts[f] - quotas[f], f))[:rest]:
        counts[f] += 1
    chosen = []
    for f, s in by_file.items():
        rng = random.Random(f"{seed}:{f}")
        chosen += rng.sample(s, min(counts[f], len(s)))
    rng = random.Random(seed)
    rng.shuffle(chosen)
    return chosen, total, len(by_file)


def apply(site):
    rel, line, col, op, old, new = site
    path = os.path.join(ROOT, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    l = lines[line - 1]
    if op == "return":
        lines[line - 1] = l.rstrip() + new
    else:
        assert l[col : col + len(old)] == old, (site, l)
        lines[line - 1] = l[:col] + new + l[col + len(old) :]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return path, text


def run_tests(tests, timeout):
    """(built, passed, seconds): build every test first (a failure there is unviable)."""
    t0 = time.time()
    for t in tests:
        b = subprocess.run(t + ["--no-run"], cwd=ROOT, capture_output=True, text=True)
        if b.returncode != 0:
            return False, False, time.time() - t0
    for t in tests:
        # A session of its own, so that a timeout ends the test binary too, not only cargo (an
        # orphaned binary of a hanging mutant would run on beside the next mutants).
        p = subprocess.Popen(t, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return True, False, time.time() - t0
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if code != 0:
            return True, False, time.time() - t0
    return True, True, time.time() - t0


def wilson(k, n, z=1.96):
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


EQUIVALENT = os.path.join(ROOT, "fuzz", "mutants-equivalent.jsonl")


def equivalents():
    """Sites (at a commit) argued equivalent: no input can tell the mutant from the original.
    Each row says why; they are counted apart, never as caught."""
    if not os.path.exists(EQUIVALENT):
        return {}
    rows = [json.loads(l) for l in open(EQUIVALENT) if l.strip()]
    return {(r["commit"], tuple(r["site"])): r["why"] for r in rows}


def latest(path, commit=None):
    """The last row per (commit, site): a re-judged row replaces the first judgement."""
    seen = {}
    for l in open(path):
        if l.strip():
            r = json.loads(l)
            if commit is None or r["commit"] == commit:
                seen[(r["commit"], tuple(r["site"]))] = r
    return seen


def summary(path, commit=None):
    seen = latest(path, commit)
    eq = equivalents()
    rows = [r for k, r in seen.items() if not (r["outcome"] == "missed" and k in eq)]
    equivalent = len(seen) - len(rows)
    caught = sum(r["outcome"] == "caught" for r in rows)
    missed = [r for r in rows if r["outcome"] == "missed"]
    unviable = sum(r["outcome"] == "unviable" for r in rows)
    viable = caught + len(missed)
    lo, hi = wilson(caught, viable)
    rejudged = sum(bool(r.get("tests_commit")) and r["outcome"] == "caught" for r in rows)
    print(
        f"{len(seen)} mutants run: {caught} caught ({rejudged} of them judged with tests later than the sample's tree), "
        f"{len(missed)} missed, {unviable} unviable, {equivalent} equivalent (fuzz/mutants-equivalent.jsonl)"
    )
    if viable:
        print(f"score {caught}/{viable} = {100 * caught / viable:.1f} % (95 % Wilson interval {100 * lo:.1f} % to {100 * hi:.1f} %)")
    for r in missed:
        rel, line, col, op, old, new = r["site"]
        print(f"MISSED {rel}:{line}:{col + 1}: {op} `{old.strip()}` -> `{new.strip()}`")


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def rejudge(path, commit, profile, timeout, out):
    """Judge again, with the tests of this tree, every mutant of `commit` that was missed. The
    semantics must be those the sample was drawn from (model/src as at `commit`), so that each
    site is the same mutant; the tests may be newer (their commit is recorded)."""
    if git("diff", "--quiet", commit, "--", "model/src").returncode != 0:
        print(f"model/src differs from {commit}: its sites would not be the same mutants", file=sys.stderr)
        return 2
    # The tests may be checked out from a later commit over the sample's tree: say which.
    tests_commit = os.environ.get("MUTANTS_TESTS_COMMIT") or git("rev-parse", "HEAD").stdout.strip()
    if not os.environ.get("MUTANTS_TESTS_COMMIT") and git("diff", "--quiet", "HEAD").returncode != 0:
        tests_commit += "+uncommitted"
    eq = equivalents()
    todo = [r for k, r in latest(path, commit).items() if r["outcome"] == "missed" and k not in eq]
    for r in todo:
        s = tuple(r["site"])
        p, saved = apply(s)
        try:
            built, passed, secs = run_tests(tests_for(profile), timeout)
        finally:
            with open(p, "w", encoding="utf-8") as f:
                f.write(saved)
        outcome = "unviable" if not built else ("missed" if passed else "caught")
        row = dict(r, outcome=outcome, seconds=round(secs), tests_commit=tests_commit)
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{outcome:8} {s[0]}:{s[1]}:{s[2] + 1} {s[3]} `{s[4].strip()}` -> `{s[5].strip()}` ({secs:.0f} s, re-judged)", flush=True)
    return 0


def stop(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    # A background job of a non-interactive shell starts with SIGINT ignored, and SIGTERM would
    # end the run without restoring the mutated file: both raise, so `finally` restores it.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=300, help="mutants in the sample")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--shard", help="K/N: run the K-th of N shards (N must equal --shards)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--baseline", action="store_true", help="run the tests on the unmutated tree first")
    ap.add_argument("--out", default="mutants.jsonl")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per test command")
    ap.add_argument("--summary", metavar="JSONL")
    ap.add_argument("--commit", help="with --summary or --rejudge: only the rows of this commit (the sample of one tree)")
    ap.add_argument("--rejudge", metavar="JSONL", help="judge again the missed mutants of --commit with this tree's tests (rows go to --out)")
    ap.add_argument("--fail-on-missed", action="store_true", help="exit 1 when a mutant of this shard survives (CI)")
    ap.add_argument("--profile", default="mutants", help="cargo profile (Cargo.toml's [profile.mutants]: cheap rebuilds; release where its cache is warm)")
    a = ap.parse_args()
    if a.summary:
        summary(a.summary, a.commit)
        return 0
    if a.rejudge:
        assert a.commit, "--rejudge needs --commit (the tree the sample was drawn from)"
        return rejudge(a.rejudge, a.commit, a.profile, a.timeout, a.out)
    chosen, total, files = sample(a.size, a.seed)
    if a.list:
        print(f"{total} sites in {files} files of model/src; sample of {len(chosen)} (seed {a.seed}), {a.shards} shards")
        for i, s in enumerate(chosen):
            print(f"shard {i % a.shards:>2}  {s[0]}:{s[1]}:{s[2] + 1}  {s[3]}  `{s[4].strip()}` -> `{s[5].strip()}`")
        return 0
    k, n = (int(x) for x in a.shard.split("/"))
    assert n == a.shards, "--shard K/N with N = --shards"
    mine = [s for i, s in enumerate(chosen) if i % n == k]
    # The sample is a function of the tree: the commit makes a row reproducible.
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if a.baseline:
        built, passed, secs = run_tests(tests_for(a.profile), a.timeout)
        if not (built and passed):
            print("the unmutated tree does not pass the tests: no mutant can be judged", file=sys.stderr)
            return 2
        print(f"baseline passes ({secs:.0f} s)", flush=True)
    missed = 0
    for s in mine:
        path, saved = apply(s)
        try:
            built, passed, secs = run_tests(tests_for(a.profile), a.timeout)
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(saved)
        outcome = "unviable" if not built else ("missed" if passed else "caught")
        missed += outcome == "missed"
        row = {"site": list(s), "outcome": outcome, "seconds": round(secs), "seed": a.seed, "shard": f"{k}/{n}", "commit": commit}
        # Tests checked out over the sample's tree (see rejudge) are named, so the row says which judged it.
        if os.environ.get("MUTANTS_TESTS_COMMIT"):
            row["tests_commit"] = os.environ["MUTANTS_TESTS_COMMIT"]
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{outcome:8} {s[0]}:{s[1]}:{s[2] + 1} {s[3]} `{s[4].strip()}` -> `{s[5].strip()}` ({secs:.0f} s)", flush=True)
    return 1 if a.fail_on_missed and missed else 0


if __name__ == "__main__":
    sys.exit(main())
