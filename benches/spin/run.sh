#!/usr/bin/env bash
# phasecheck vs SPIN 6.5.2 on the K-stage TMA ring ring(K, C, N) (1 producer, C consumers,
# N iterations) and three bug variants of it. See benches/spin/README.md.
#
# Usage (from anywhere; on a shared machine run it under `nice -n 10`):
#   benches/spin/run.sh [--quick] [--timeout S] [--memory MIB] [--phasecheck PATH]
#                       [--out FILE] [--instances "K,C,N K,C,N ..."] [--keep]
#
#   --quick          only small instances: a smoke test (under a minute, nearly all of it gcc)
#   --timeout S      wall-clock bound of each run, SPIN and phasecheck alike (default 120)
#   --memory MIB     memory bound of each run (default 4096): SPIN -DMEMLIM, phasecheck --max-memory
#   --phasecheck P   the binary to measure (default: target/release/phasecheck)
#   --out FILE       where the Markdown table is also written (default benches/spin/results.md)
#   --instances L    the ok instances to run instead of the default list (the bugs still run)
#   --keep           keep the work directory (Promela, pan.c, raw outputs) and print its path
#
# Environment:
#   PC_REDUCTIONS_ON   phasecheck flags of the "reductions on" rows (default: none, the defaults)
#   PC_REDUCTIONS_OFF  phasecheck flags of the "reductions off" rows (default: --no-symmetry --no-por
#                      when `phasecheck check --help` lists them; otherwise those rows say n/a)
#   PC_EXTRA           flags added to every phasecheck run (e.g. "--threads 2" on a binary that has it)
#
# Each ok instance gets five rows: SPIN coarse with partial-order reduction (default pan) and
# without it (-DNOREDUCE), SPIN fine (reduction on; a reference for the step granularity),
# phasecheck with its reductions on and off. The bug rows stop at the first error on both sides
# (pan stops at its first error; phasecheck runs with --stop-at-first).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cmdline="benches/spin/run.sh"
for a in "$@"; do case $a in *[!A-Za-z0-9_,./=:+-]*|'') cmdline+=" '$a'" ;; *) cmdline+=" $a" ;; esac; done

quick=0
timeout_s=120
memory_mib=4096
pc="$repo/target/release/phasecheck"
out="$here/results.md"
instances=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --timeout) timeout_s=$2; shift ;;
    --memory) memory_mib=$2; shift ;;
    --phasecheck) pc=$2; shift ;;
    --out) out=$2; shift ;;
    --instances) instances=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

for tool in spin gcc python3 timeout /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 2; }
done
[ -x "$pc" ] || { echo "run.sh: no phasecheck binary at $pc (cargo build --release, or --phasecheck PATH)" >&2; exit 2; }
pc=$(cd "$(dirname "$pc")" && pwd)/$(basename "$pc")

if [ -z "$instances" ]; then
  if [ $quick = 1 ]; then
    instances="2,1,4 2,2,8"
  else
    instances=""
    for k in 2 4; do for c in 1 2 3 4 5 6 7 8; do instances+="$k,$c,$((4 * c)) "; done; done
  fi
fi
bugs="wrong_parity missing_arrive tx_overcount"
bug_size="2,2,8"

PC_REDUCTIONS_ON=${PC_REDUCTIONS_ON:-}
if "$pc" check --help 2>/dev/null | grep -q -- --no-symmetry; then
  # Every reduction flag the binary has (--no-por since the partial-order reduction: docs/model.md).
  off="--no-symmetry"
  if "$pc" check --help 2>/dev/null | grep -q -- --no-por; then off="$off --no-por"; fi
  PC_REDUCTIONS_OFF=${PC_REDUCTIONS_OFF-$off}
  pc_off_supported=1
else
  PC_REDUCTIONS_OFF=${PC_REDUCTIONS_OFF-}
  pc_off_supported=0
fi
PC_EXTRA=${PC_EXTRA:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/phasecheck-spin.XXXXXX")
if [ $keep = 0 ]; then trap 'rm -rf "$work"' EXIT; fi
rows="$work/rows.tsv"   # one line per run, tab-separated, formatted by the Python at the end
: >"$rows"

# Fields of a row: instance, tool, config, verdict, states, seconds_tool, wall, compile, rss_kib, note
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$rows"; }

rss_of() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
wall_of() { # "Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02.03" -> seconds
  sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$1" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }'
}

# run_spin INSTANCE VARIANT GRANULARITY CONFIG GCCFLAGS
run_spin() {
  local inst=$1 variant=$2 gran=$3 config=$4 flags=$5
  local k c n
  IFS=, read -r k c n <<<"$inst"
  local label="$inst"; [ "$variant" = ok ] || label="$inst $variant"
  local d="$work/spin.$k.$c.$n.$variant.$gran.${config// /_}"
  mkdir -p "$d"
  python3 "$here/gen.py" "$k" "$c" "$n" --variant "$variant" --granularity "$gran" -o "$d/model.pml"
  # Depth bound: far above any path (at most ~10 steps per thread iteration plus the landings).
  local depth=$((20 * n * (c + 2) + 10000))
  local t0 t1
  t0=$(date +%s.%N)
  (cd "$d" && spin -a model.pml >spin.out 2>&1 &&
    gcc -O2 -DSAFETY $flags -DMEMLIM="$memory_mib" -o pan pan.c >gcc.out 2>&1) ||
    { row "$label" "SPIN $gran" "$config" "compile error" "" "" "" "" "" "see $d"; return; }
  t1=$(date +%s.%N)
  local compile
  compile=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  # SIGINT makes pan print its statistics ("Interrupted") before it exits.
  (cd "$d" && /usr/bin/time -v -o time.out timeout -s INT -k 10 "$timeout_s" ./pan -m"$depth" >pan.out 2>&1) || true
  local verdict note="" states secs errors
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$d/pan.out" | head -1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$d/pan.out" | head -1)
  errors=$(sed -n 's/.*, errors: \([0-9]*\)$/\1/p' "$d/pan.out" | head -1)
  if [ -n "$errors" ] && [ "$errors" != 0 ]; then
    verdict="violated"
    # The first error: "pan:1: assertion violated (ver[s]==i) (at depth 16)", "pan:1: invalid end state (at depth 17)"
    note=$(sed -n 's/^pan:1: \(.*\) (at depth [0-9]*)$/\1/p' "$d/pan.out" | head -1)
    [ "$note" = "invalid end state" ] && note="invalid end state (deadlock)"
  elif grep -q -e 'reached -DMEMLIM bound' -e 'out of memory' "$d/pan.out"; then
    verdict="out of memory"
  elif grep -q 'Interrupted' "$d/pan.out" || [ "$(sed -n 's/.*Exit status: //p' "$d/time.out")" = 124 ]; then
    verdict="out of time"
  elif [ "$errors" = 0 ]; then
    verdict="holds"
  else
    verdict="error"; note="see $d/pan.out"
  fi
  if grep -q 'max search depth too small' "$d/pan.out"; then note="${note:+$note; }depth bound -m$depth too small"; fi
  row "$label" "SPIN $gran" "$config" "$verdict" "$states" "$secs" "$(wall_of "$d/time.out")" "$compile" "$(rss_of "$d/time.out")" "$note"
}

# run_pc INSTANCE VARIANT SPEC CONFIG FLAGS...
run_pc() {
  local inst=$1 variant=$2 spec=$3 config=$4; shift 4
  local k c n
  IFS=, read -r k c n <<<"$inst"
  local label="$inst"; [ "$variant" = ok ] || label="$inst $variant"
  local d="$work/pc.$k.$c.$n.$(basename "$spec" .phase).${config// /_}"
  mkdir -p "$d"
  # --max-seconds bounds the search; the outer timeout only catches a run that ignores it.
  # shellcheck disable=SC2086
  /usr/bin/time -v -o "$d/time.out" timeout -k 10 $((timeout_s + 60)) "$pc" check "$repo/$spec" \
    --param STAGES="$k" --param CONSUMERS="$c" --param ITERS="$n" --format json \
    --max-seconds "$timeout_s" --max-memory "$memory_mib" $PC_EXTRA "$@" >"$d/out.json" 2>"$d/err.txt" || true
  local parsed
  parsed=$(python3 - "$d/out.json" "$d/err.txt" <<'PY'
import json, re, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    r = {"verdict": "error"}
v, s, note = r.get("verdict", "error"), r.get("stats") or {}, ""
bound = r.get("bound")
if v == "incomplete":
    v = {"--max-seconds": "out of time", "--max-memory": "out of memory"}.get(bound, f"incomplete ({bound})")
if not s:
    # Stopped inside a step (the JSON then has no stats): take the last progress line of stderr,
    # "progress: 819914 states, 24061 states/s, ...".
    last = None
    for line in open(sys.argv[2], errors="replace"):
        m = re.match(r"progress: (\d+) states, (\d+) states/s", line)
        if m:
            last = m
    if last:
        n, rate = int(last.group(1)), int(last.group(2))
        s = {"states": n, "seconds": n / rate if rate else ""}
        note = "states and rate from the last progress line"
    elif v == "error":
        note = "no JSON output"
kinds = sorted({x.get("kind", "?") for x in r.get("violations", [])})
note = "; ".join(x for x in (", ".join(kinds), note) if x)
print(f"{v}\t{s.get('states', '')}\t{s.get('seconds', '')}\t{note}")
PY
)
  local verdict states secs note
  IFS=$'\t' read -r verdict states secs note <<<"$parsed"
  [ "$(sed -n 's/.*Exit status: //p' "$d/time.out")" = 124 ] && verdict="out of time" && note="killed by the outer timeout"
  row "$label" "phasecheck" "$config" "$verdict" "$states" "$secs" "$(wall_of "$d/time.out")" "" "$(rss_of "$d/time.out")" "$note"
}

progress() { echo "[$(date +%H:%M:%S)] $*" >&2; }

for inst in $instances; do
  progress "ring($inst)"
  run_spin "$inst" ok coarse "reductions on" ""
  run_spin "$inst" ok coarse "reductions off" "-DNOREDUCE"
  run_spin "$inst" ok fine "reductions on" ""
  # shellcheck disable=SC2086
  run_pc "$inst" ok benches/double_buffer_scaling.phase "reductions on" $PC_REDUCTIONS_ON
  if [ $pc_off_supported = 1 ]; then
    # shellcheck disable=SC2086
    run_pc "$inst" ok benches/double_buffer_scaling.phase "reductions off" $PC_REDUCTIONS_OFF
  else
    row "$inst" "phasecheck" "reductions off" "n/a" "" "" "" "" "" "binary has no --no-symmetry/--no-por"
  fi
done
for bug in $bugs; do
  progress "bug $bug ($bug_size)"
  run_spin "$bug_size" "$bug" coarse "reductions on" ""
  run_spin "$bug_size" "$bug" fine "reductions on" ""
  # shellcheck disable=SC2086
  run_pc "$bug_size" "$bug" "benches/spin/ring_bug_$bug.phase" "reductions on, stop at first" --stop-at-first $PC_REDUCTIONS_ON
  # shellcheck disable=SC2086
  run_pc "$bug_size" "$bug" "benches/spin/ring_bug_$bug.phase" "reductions on, every kind (default)" $PC_REDUCTIONS_ON
done

# Header: machine, versions, date, command.
pc_commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
pc_version=$("$pc" --version 2>/dev/null || echo unknown)
pc_sum=$(sha256sum "$pc" | cut -c1-12)
{
  echo "# phasecheck vs SPIN on the TMA ring"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- command: \`$cmdline\`"
  echo "- machine: $(nproc) cores (nproc); memory (free -g): $(free -g | awk '/^Mem:/ { print $2 " GiB total, " $7 " GiB available" }'); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- SPIN: $(spin -V 2>&1 | head -1); C compiler: $(gcc --version | head -1); pan built with \`gcc -O2 -DSAFETY [-DNOREDUCE] -DMEMLIM=$memory_mib\`, run as \`pan -m<depth>\` (exact state storage, default -w24 hash table)"
  echo "- phasecheck: $pc_version, binary \`${pc#"$repo"/}\` (sha256 $pc_sum), repository commit $pc_commit (\`git rev-parse --short HEAD\`; the binary may be a build of another commit); reductions on = \`${PC_REDUCTIONS_ON:-(default flags)}\`, reductions off = $([ $pc_off_supported = 1 ] && echo "\`$PC_REDUCTIONS_OFF\`" || echo "n/a (this binary has no --no-symmetry/--no-por)")${PC_EXTRA:+, every run with \`$PC_EXTRA\`}"
  echo "- bounds per run: $timeout_s s wall (SPIN: \`timeout -s INT\`; phasecheck: \`--max-seconds\`), $memory_mib MiB (SPIN: \`-DMEMLIM\`; phasecheck: \`--max-memory\`)"
  echo "- ring(K,C,N) = benches/double_buffer_scaling.phase --param STAGES=K --param CONSUMERS=C --param ITERS=N; Promela from benches/spin/gen.py (coarse = phasecheck's steps; fine = every Promela statement a step)"
  echo
} >"$work/header.md"

python3 - "$rows" >"$work/table.md" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]

def num(x):
    try:
        return float(x)
    except ValueError:
        return None

def fmt_int(x):
    v = num(x)
    return f"{int(v):,}" if v is not None else ""

def fmt_s(x):
    v = num(x)
    return f"{v:.2f}" if v is not None else ""

# SPIN coarse rows by (instance, config) for the ratios.
spin = {(r[0], r[2]): r for r in rows if r[1] == "SPIN coarse"}
bounded = ("out of time", "out of memory")
print("| instance | tool | config | verdict | unique states | states/s | peak RSS MiB | compile s | wall s | phasecheck/SPIN wall (incl. SPIN compile) | phasecheck/SPIN states | note |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for inst, tool, config, verdict, states, secs, wall, compile_, rss, note in rows:
    size, _, variant = inst.partition(" ")
    k, c, n = size.split(",")
    name = f"ring({k},{c},{n})" + (f" bug {variant}" if variant else "")
    st, sc = num(states), num(secs)
    rate = f"{st / sc:,.0f}" if st is not None and sc else ""
    shown = fmt_int(states)
    if verdict in bounded and shown:
        shown = ">= " + shown
    ratio_w = ratio_s = ""
    if tool == "phasecheck" and verdict not in bounded + ("n/a", "error"):
        cfg = "reductions off" if config.startswith("reductions off") else "reductions on"
        s = spin.get((inst, cfg))
        if s and s[3] not in bounded + ("error", "compile error"):
            w, sw, scomp = num(wall), num(s[6]), num(s[7]) or 0.0
            if w is not None and sw:
                ratio_w = f"{w / sw:.2f} ({w / (sw + scomp):.2f})"
            if st is not None and num(s[4]):
                ratio_s = f"{st / num(s[4]):.3f}"
    rss_mib = f"{num(rss) / 1024:.0f}" if num(rss) is not None else ""
    print(f"| {name} | {tool} | {config} | {verdict} | {shown} | {rate} | {rss_mib} | {fmt_s(compile_)} | {fmt_s(wall)} | {ratio_w} | {ratio_s} | {note} |")
print()
print("States: SPIN's \"states, stored\"; phasecheck's `stats.states`. states/s: states over the tool's own search time")
print("(`pan: elapsed time`, `stats.seconds`). wall s: the process, from `/usr/bin/time -v` (SPIN: `./pan` alone;")
print("its `spin -a` + `gcc` time is the compile column). Ratios compare each phasecheck row with the SPIN coarse row")
print("of the same instance and reduction setting. Rows that hit a bound show the states stored when they stopped.")
print("Bug rows stop at the first error on both sides, so their states depend on the search order (pan: depth-first;")
print("phasecheck: breadth-first, for a shortest trace) and their states ratio says little.")
PY

mkdir -p "$(dirname "$out")"
cat "$work/header.md" "$work/table.md" | tee "$out"
if [ $keep = 1 ]; then echo "work directory kept: $work" >&2; fi
