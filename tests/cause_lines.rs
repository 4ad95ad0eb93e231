//! The first root cause names the statement that was changed. For every buggy spec with a fixed
//! twin (`X.phase` and `X_fixed.phase` in `specs/`, and each planted bug of the ping-pong GEMM
//! in `benches/realshape/` against its correct file), the lines that differ are computed here
//! from the two files, and the line the first cause names must be one of them, or inside a
//! block whose header changed (an `if` whose body was rewritten). A statement moved past others
//! changes the order of everything it jumped over, so those lines count as changed too.
//! Twins whose first cause does not name the change yet are listed in `NOT_YET` with the
//! reason, and the test fails when one of them starts passing, so that the list only shrinks.

use phasecheck_model::rt::Model;
use phasecheck_model::spec::{expand, load};
use phasecheck_verifier::cause::{root_causes, Rule};
use phasecheck_verifier::{check, CheckOptions};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Buggy twins whose first cause names another line than the change, and why (docs/known-debts.md).
const NOT_YET: &[(&str, &str)] = &[
    (
        "specs/blackwell/tcgen05_commit_multicast_own_cta.phase",
        "the first cause is the leader's wait on peer_full in the cycle of blocked waits; the missing arrival on the peer's `empty` is what the commit's multicast mask leaves out, which the cause analysis does not follow yet",
    ),
    (
        "specs/blackwell/tmem_exit_without_dealloc.phase",
        "tensor memory still allocated at exit is a state violation without a statement; the cause does not point at the tmem_alloc of the region yet",
    ),
];

/// The code lines of a spec (1-based number, text with spaces squeezed): no comments, blank
/// lines, `protocol` or `expect` lines, and no `param` lines when
/// `params` is false (the GEMM's bugs run at a smaller shape).
fn code(src: &str, params: bool) -> Vec<(usize, String)> {
    src.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let c = l.split("//").next().unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
            let skip = c.is_empty() || c.starts_with("protocol ") || c.starts_with("expect ") || (!params && c.starts_with("param "));
            (!skip).then_some((i + 1, c))
        })
        .collect()
}

/// The lines of `bug` that differ from `fixed` (a longest-common-subsequence diff).
fn changed_lines(bug: &str, fixed: &str, params: bool) -> BTreeSet<usize> {
    let (a, b) = (code(bug, params), code(fixed, params));
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i].1 == b[j].1 {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut changed = BTreeSet::new();
    // Lines of `a` removed, and the positions in `a` where lines of `b` were inserted.
    let mut removed: Vec<usize> = Vec::new();
    let mut inserted: Vec<(usize, String)> = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i].1 == b[j].1 {
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            inserted.push((i, b[j].1.clone()));
            j += 1;
        } else {
            removed.push(i);
            changed.insert(a[i].0);
            i += 1;
        }
    }
    for (at, text) in &inserted {
        // An insertion changes the statements on either side of it, unless it replaces a
        // removed one there (an edited line).
        let replaces = removed.iter().any(|&r| r == *at || r + 1 == *at);
        for k in [at.wrapping_sub(1), *at].into_iter().filter(|_| !replaces) {
            if let Some(l) = a.get(k) {
                changed.insert(l.0);
            }
        }
        // A move: the removed copy and the inserted one, and everything in between.
        if let Some(&r) = removed.iter().find(|&&r| &a[r].1 == text) {
            let (lo, hi) = if r < *at { (r, *at) } else { (*at, r) };
            for l in &a[lo..hi.min(n)] {
                changed.insert(l.0);
            }
        }
    }
    changed
}

/// `line` is a changed line, or inside the block of a changed line that opens one.
fn names_change(src: &str, changed: &BTreeSet<usize>, line: usize) -> bool {
    if changed.contains(&line) {
        return true;
    }
    let lines: Vec<&str> = src.lines().collect();
    changed.iter().any(|&c| {
        let head = lines[c - 1].split("//").next().unwrap().trim_end();
        if !head.ends_with('{') || line <= c {
            return false;
        }
        let mut depth = 0i32;
        for (k, l) in lines.iter().enumerate().skip(c - 1) {
            let l = l.split("//").next().unwrap();
            depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
            if k + 1 == line {
                return depth > 0 || l.contains('}');
            }
            if depth <= 0 {
                return false;
            }
        }
        false
    })
}

/// The options of `phasecheck check` (past a violation, about 10x the states stored when it
/// was found are explored): the first cause is the one a user sees there, and the GEMM's bugs
/// explored to the end of every violating execution take far longer than a test may.
fn options() -> CheckOptions {
    CheckOptions {
        past_violation_factor: Some(10.0),
        ..CheckOptions::default()
    }
}

/// The fixed twin a spec's header names ("Fixed twin: NAME"), looked up beside it first and
/// then anywhere in the library: the header is where a spec whose twin is not `X_fixed` says
/// which one it is.
fn named_twin(src: &str, dir: &Path, library: &[PathBuf]) -> Option<PathBuf> {
    let header: String = src
        .lines()
        .take_while(|l| l.trim().is_empty() || l.trim_start().starts_with("//"))
        .map(|l| l.trim_start().trim_start_matches('/').trim())
        .collect::<Vec<_>>()
        .join(" ");
    let at = header.to_ascii_lowercase().find("fixed twin:")? + "fixed twin:".len();
    let name: String = header[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let file = format!("{name}.phase");
    let beside = dir.join(&file);
    if beside.exists() {
        return Some(beside);
    }
    library
        .iter()
        .find(|f| f.file_name().is_some_and(|n| n.to_string_lossy() == file))
        .cloned()
}

fn twins(root: &Path) -> Vec<(PathBuf, PathBuf, bool)> {
    let mut out = Vec::new();
    let library = expand(&[root.join("specs")]).unwrap();
    for f in &library {
        let name = f.to_string_lossy().to_string();
        if name.ends_with("_fixed.phase") {
            continue;
        }
        let twin = PathBuf::from(name.replace(".phase", "_fixed.phase"));
        let src = std::fs::read_to_string(f).unwrap();
        let named = named_twin(&src, f.parent().unwrap(), &library);
        if twin.exists() {
            out.push((f.clone(), twin, true));
        } else if let Some(t) = named.filter(|t| t != f && buggy(f)) {
            out.push((f.clone(), t, true));
        }
    }
    let gemm = root.join("benches/realshape");
    for f in expand(&[gemm.clone()]).unwrap() {
        if f.file_name().unwrap().to_string_lossy().starts_with("pingpong_gemm_bug_") {
            out.push((f, gemm.join("pingpong_gemm.phase"), false));
        }
    }
    out
}

#[test]
fn first_cause_names_the_changed_statement() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let pairs = twins(&root);
    assert!(pairs.len() >= 60, "only {} twins", pairs.len());
    let mut wrong = Vec::new();
    let mut fixed_now = Vec::new();
    for (bug, fixed, params) in &pairs {
        let rel = bug.strip_prefix(&root).unwrap().display().to_string();
        let spec = load(bug, &[]).unwrap();
        let model = Model::new(spec.proto.clone());
        let r = check(&model, &options());
        let (causes, _) = root_causes(&model, &spec.source, &r.violations);
        let first = causes.first().unwrap_or_else(|| panic!("{rel}: no cause"));
        let changed = changed_lines(&spec.source, &std::fs::read_to_string(fixed).unwrap(), *params);
        let ok = names_change(&spec.source, &changed, first.line);
        let pinned = NOT_YET.iter().any(|(f, _)| *f == rel);
        match (ok, pinned) {
            (false, false) => wrong.push(format!(
                "{rel}: line {} `{}` not in {changed:?}: {}",
                first.line, first.statement, first.summary
            )),
            (true, true) => fixed_now.push(rel),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "first cause names another line:\n{}", wrong.join("\n"));
    assert!(fixed_now.is_empty(), "now name their change; take them off NOT_YET: {fixed_now:?}");
}

/// A spec that expects a violation.
fn buggy(f: &Path) -> bool {
    load(f, &[]).unwrap().proto.expect.is_some_and(|k| !k.is_empty())
}

/// The lines a `// BUG` comment marks (any case of "bug" followed by `:`): the statement it
/// ends, or, on a line of its own, the next statement.
fn marked_lines(src: &str) -> BTreeSet<usize> {
    let is_marker = |c: &str| {
        let c = c.trim_start().to_ascii_lowercase();
        c.starts_with("bug:") || c.starts_with("bug ")
    };
    let lines: Vec<&str> = src.lines().collect();
    let mut marked = BTreeSet::new();
    for (i, l) in lines.iter().enumerate() {
        let Some((code, c)) = l.split_once("//") else { continue };
        if !is_marker(c) {
            continue;
        }
        if !code.trim().is_empty() {
            marked.insert(i + 1);
        } else if let Some(k) = (i + 1..lines.len()).find(|&k| {
            let code = lines[k].split("//").next().unwrap().trim();
            !code.is_empty() && code != "}"
        }) {
            marked.insert(k + 1);
        }
    }
    marked
}

/// Every buggy library spec is held to a line by one of the two tests above: it has a fixed
/// twin (by name or named in its header) or a `// BUG` marker.
#[test]
fn every_buggy_spec_is_held_to_a_line() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let paired: BTreeSet<PathBuf> = twins(&root).into_iter().flat_map(|(a, b, _)| [a, b]).collect();
    let loose: Vec<String> = expand(&[root.join("specs")])
        .unwrap()
        .into_iter()
        .filter(|f| !paired.contains(f) && buggy(f))
        .filter(|f| marked_lines(&std::fs::read_to_string(f).unwrap()).is_empty())
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(
        loose.is_empty(),
        "buggy specs with neither a fixed twin nor a `// BUG` line: {loose:?}"
    );
}

/// Buggy specs without a fixed twin whose first cause names another line than the one their
/// `// BUG` comment marks, and why (docs/known-debts.md).
const NOT_YET_MARKED: &[(&str, &str)] = &[
    (
        "specs/blackwell/cutlass_sm100_gemm_commit_before_mma.phase",
        "the shortest trace's first violation is the MMA reading a stage already being refilled (the commit issued before it arrived at once, tracking no MMA); the cause does not blame that commit yet",
    ),
    (
        "specs/blackwell/fa4_fwd_sm100_p_overwrite.phase",
        "the first cause is the missing-wait of a commit's arrive on p_empty (which the bug leaves unwaited), found before the data race at the write of P",
    ),
];

/// A buggy library spec without a fixed twin: its first cause names the statement its `// BUG`
/// comment marks (or a line inside the block that statement opens), where it has one.
#[test]
fn first_cause_names_the_marked_statement_without_a_twin() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let paired: BTreeSet<PathBuf> = twins(&root).into_iter().flat_map(|(a, b, _)| [a, b]).collect();
    let (mut wrong, mut fixed_now, mut seen) = (Vec::new(), Vec::new(), 0);
    for f in expand(&[root.join("specs")]).unwrap() {
        if paired.contains(&f) {
            continue;
        }
        let spec = load(&f, &[]).unwrap();
        let marked = marked_lines(&spec.source);
        if spec.proto.expect.is_none() || marked.is_empty() {
            continue;
        }
        seen += 1;
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        let model = Model::new(spec.proto.clone());
        let r = check(&model, &options());
        let (causes, _) = root_causes(&model, &spec.source, &r.violations);
        let first = causes.first().unwrap_or_else(|| panic!("{rel}: no cause"));
        let ok = names_change(&spec.source, &marked, first.line);
        match (ok, NOT_YET_MARKED.iter().any(|(x, _)| *x == rel)) {
            (false, false) => wrong.push(format!(
                "{rel}: line {} `{}` not in {marked:?}: {}",
                first.line, first.statement, first.summary
            )),
            (true, true) => fixed_now.push(rel),
            _ => {}
        }
    }
    assert!(seen >= 10, "only {seen} marked specs without a twin");
    assert!(wrong.is_empty(), "first cause names another line:\n{}", wrong.join("\n"));
    assert!(
        fixed_now.is_empty(),
        "now name their BUG line; take them off NOT_YET_MARKED: {fixed_now:?}"
    );
}

/// A count mismatch only where the count and the arrivals disagree: on every buggy library
/// spec and every GEMM bug, each count-mismatch cause names its barrier's declared count and an
/// inferred number of arrivals per phase that differs from it. On the GEMM, where `empty`
/// counts the one warpgroup that consumes each stage, no bug but the warp whose 32 lanes
/// arrive is a count mismatch, and that one is 1 counted against 32 arriving.
#[test]
fn no_count_mismatch_where_the_count_is_right() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = expand(&[root.join("specs")]).unwrap();
    files.extend(twins(&root).into_iter().filter(|t| !t.2).map(|t| t.0));
    let mut seen = 0;
    for f in files {
        let spec = load(&f, &[]).unwrap();
        if spec.proto.expect.is_none() {
            continue;
        }
        let model = Model::new(spec.proto.clone());
        let r = check(&model, &options());
        let (causes, _) = root_causes(&model, &spec.source, &r.violations);
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for c in causes.iter().filter(|c| c.rule == Rule::CountMismatch) {
            seen += 1;
            let m = c
                .mismatch
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: a count mismatch without its numbers"));
            let b = c.barrier.as_deref().unwrap();
            let declared = spec.proto.barriers.iter().find(|x| x.name == b).unwrap().count;
            assert_eq!((c.init_count, m.expected), (Some(declared), declared), "{name}: {}", c.summary);
            assert_ne!(m.actual, m.expected, "{name}: the count matches the arrivals: {}", c.summary);
            if name.starts_with("pingpong_gemm_bug_") {
                assert_eq!(name, "pingpong_gemm_bug_warp_arrives.phase", "{}", c.summary);
                assert_eq!((m.expected, m.actual), (1, 32), "{}", c.summary);
            }
        }
    }
    assert!(seen >= 5, "only {seen} count mismatches: the test no longer sees the rule");
}

#[test]
fn the_line_diff_sees_edits_insertions_and_moves() {
    let fixed = "role r[1] {\n  a()\n  b()\n  c()\n}\n";
    assert_eq!(
        changed_lines("role r[1] {\n  a()\n  x()\n  c()\n}\n", fixed, true),
        BTreeSet::from([3])
    );
    // b() deleted: the statements around the gap changed.
    assert_eq!(changed_lines("role r[1] {\n  a()\n  c()\n}\n", fixed, true), BTreeSet::from([2, 3]));
    // c() moved before b(): both, and nothing else.
    assert_eq!(
        changed_lines("role r[1] {\n  a()\n  c()\n  b()\n}\n", fixed, true),
        BTreeSet::from([2, 3, 4])
    );
    let src = "role r[1] {\n  if e == 1 {\n    x()\n  }\n  y()\n}\n";
    assert!(names_change(src, &BTreeSet::from([2]), 3));
    assert!(!names_change(src, &BTreeSet::from([2]), 5));
}
