//! `phasecheck fmt` keeps comments: on every spec of the library the canonical form parses back
//! to the same program, holds the same comments in the same order, and is a fixed point; and
//! each placement rule is pinned on a small example.

use phasecheck_model::lang::comments::comments;
use phasecheck_model::lang::{parse, pretty_with_comments, same_program};
use std::path::{Path, PathBuf};

fn specs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            specs(&p, out);
        } else if p.extension().is_some_and(|x| x == "phase") {
            out.push(p);
        }
    }
}

fn fmt(src: &str) -> String {
    pretty_with_comments(&parse(src).unwrap(), src)
}

fn texts(src: &str) -> Vec<String> {
    comments(src).into_iter().map(|c| c.text).collect()
}

#[test]
fn every_library_spec_round_trips_with_its_comments() {
    let mut files = Vec::new();
    specs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs"), &mut files);
    assert!(files.len() >= 77, "found only {} specs", files.len());
    let mut with_comments = 0;
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let out = fmt(&src);
        let back = parse(&out).unwrap_or_else(|d| panic!("{}: fmt output does not parse: {d:?}\n{out}", f.display()));
        assert!(
            same_program(&back, &parse(&src).unwrap()),
            "{}: fmt changed the program",
            f.display()
        );
        assert_eq!(texts(&out), texts(&src), "{}: fmt changed the comments\n{out}", f.display());
        assert_eq!(fmt(&out), out, "{}: fmt is not idempotent", f.display());
        with_comments += !texts(&src).is_empty() as usize;
    }
    // Every library spec opens with a comment saying what it models.
    assert_eq!(with_comments, files.len());
}

#[test]
fn placement_of_comments() {
    let src = "\
// what this is

protocol demo   // the name
expect holds
param N = 2 // rounds

/* the barrier */
barrier b count 1
role t[1] { // one thread
  for i in 0..N { work }  // a one-line loop
  // before the arrival

  let k = arrive(b)    // token
  wait(b, k)
  // at the end of the body
}
// the end
";
    let want = "\
// what this is
protocol demo   // the name
expect holds

param N = 2 // rounds

/* the barrier */
barrier b count 1

role t[1] { // one thread
  for i in 0..N { // a one-line loop
    work
  }
  // before the arrival
  let k = arrive(b)    // token
  wait(b, k)
  // at the end of the body
}
// the end
";
    let out = fmt(src);
    assert_eq!(out, want, "got:\n{out}");
    assert_eq!(fmt(&out), out);
}

#[test]
fn odd_places_keep_every_comment_once() {
    let src = "protocol p\nbarrier b count 1\nrole t[1] {\n  for i in 0..2 {}   // empty loop\n  if tid == 0 { work } else { work } // both\n  arrive(b) /* a\n  b */ wait_parity(b, 0)\n  let x = (1 +\n    2) // split\n}\n";
    let out = fmt(src);
    assert_eq!(texts(&out), texts(src), "{out}");
    assert!(same_program(&parse(&out).unwrap(), &parse(src).unwrap()), "{out}");
    assert_eq!(fmt(&out), out);
}

#[test]
fn an_empty_block_keeps_its_comment() {
    let src = "protocol p\nbarrier b count 1\nrole t[1] {\n  // nothing yet\n}\ncompletion c {}\n";
    let out = fmt(src);
    assert!(out.contains("role t[1] {\n  // nothing yet\n}"), "{out}");
    assert!(out.contains("completion c {}"), "{out}");
}

/// A comment on the line after a one-line `if` or `for` is not that statement's trailer: it
/// stays on a line of its own before the next statement, and the statement's brace gets none.
#[test]
fn a_comment_on_the_line_after_a_one_line_block_stays_on_its_own_line() {
    let src = "protocol p\nbarrier b count 1\nrole t[1] {\n  if tid == 0 { work }\n  // about the arrival\n  arrive(b)\n  for i in 0..2 { work }\n  // about the wait\n  wait_parity(b, 0)\n}\n";
    let out = fmt(src);
    assert!(
        out.contains("  if tid == 0 {\n    work\n  }\n  // about the arrival\n  arrive(b)\n"),
        "got:\n{out}"
    );
    assert!(
        out.contains("  for i in 0..2 {\n    work\n  }\n  // about the wait\n  wait_parity(b, 0)\n"),
        "got:\n{out}"
    );
    assert_eq!(fmt(&out), out);
}
