//! Laws of loading spec files (model/src/spec.rs): the size cap, UTF-8 with a position, `--param`
//! overrides reaching only the params a file declares, and folder walks that skip symlinked
//! folders and say so.

use phasecheck_model::spec::{expand_noting_skipped, load, read_source, MAX_SPEC_BYTES};
use std::path::PathBuf;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("phasecheck-model-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SPEC: &str = "protocol p\nparam N = 2\nbarrier b count 1\nrole w[1] { for i in 0..N { arrive_and_wait(b) } }\n";

#[test]
fn the_size_cap_is_exactly_max_spec_bytes() {
    let d = dir("cap");
    let at = d.join("at.phase");
    let mut s = SPEC.to_string();
    s.push_str(&" ".repeat(MAX_SPEC_BYTES - s.len()));
    std::fs::write(&at, &s).unwrap();
    assert_eq!(read_source(&at, "at").unwrap().len(), MAX_SPEC_BYTES);
    assert!(load(&at, &[]).is_ok());
    s.push(' ');
    let over = d.join("over.phase");
    std::fs::write(&over, &s).unwrap();
    let e = read_source(&over, "over.phase").unwrap_err();
    assert!(e.contains("over.phase is larger than 1 MiB"), "{e}");
}

#[test]
fn bytes_that_are_not_utf8_are_placed_by_line_and_column() {
    let d = dir("utf8");
    let f = d.join("x.phase");
    std::fs::write(&f, b"protocol p\n  ab\xff\n").unwrap();
    let e = read_source(&f, "x.phase").unwrap_err();
    assert!(e.starts_with("error[E001]: the byte 0xFF is not UTF-8"), "{e}");
    assert!(e.contains("--> x.phase:2:5"), "{e}");
    let e = read_source(&d.join("missing.phase"), "missing.phase").unwrap_err();
    assert!(e.starts_with("error: cannot read missing.phase"), "{e}");
}

#[test]
fn overrides_reach_only_the_params_a_file_declares() {
    let d = dir("params");
    let f = d.join("p.phase");
    std::fs::write(&f, SPEC).unwrap();
    let s = load(&f, &[("N".into(), 5), ("OTHER".into(), 7)]).unwrap();
    assert_eq!(s.proto.params, vec![("N".to_string(), 5)]);
    let s = load(&f, &[]).unwrap();
    assert_eq!(s.proto.params, vec![("N".to_string(), 2)]);
    assert_eq!(s.source, SPEC);
    assert_eq!(s.display, f.display().to_string());
}

#[cfg(unix)]
#[test]
fn folder_walks_skip_symlinked_folders_and_name_them() {
    let d = dir("walk");
    std::fs::create_dir_all(d.join("a/b")).unwrap();
    std::fs::write(d.join("a/one.phase"), SPEC).unwrap();
    std::fs::write(d.join("a/b/two.phase"), SPEC).unwrap();
    std::fs::write(d.join("a/b/notes.txt"), "x").unwrap();
    std::os::unix::fs::symlink(".", d.join("a/b/z_self")).unwrap();
    std::os::unix::fs::symlink("..", d.join("a/b/y_up")).unwrap();
    std::os::unix::fs::symlink("one.phase", d.join("a/linked.phase")).unwrap();
    let (files, skipped) = expand_noting_skipped(&[d.join("a")]).unwrap();
    let names: Vec<String> = files.iter().map(|p| p.strip_prefix(&d).unwrap().display().to_string()).collect();
    assert_eq!(names, ["a/b/two.phase", "a/linked.phase", "a/one.phase"]);
    assert_eq!(skipped, [d.join("a/b/y_up"), d.join("a/b/z_self")]);
    // A file named directly is taken as it is; a missing one and an empty folder are errors.
    let (files, skipped) = expand_noting_skipped(&[d.join("a/b/notes.txt")]).unwrap();
    assert_eq!((files, skipped.len()), (vec![d.join("a/b/notes.txt")], 0));
    assert!(expand_noting_skipped(&[d.join("nope")])
        .unwrap_err()
        .contains("no such file or folder"));
    std::fs::create_dir_all(d.join("empty")).unwrap();
    assert!(expand_noting_skipped(&[d.join("empty")])
        .unwrap_err()
        .contains("no *.phase files under"));
    assert_eq!(phasecheck_model::spec::expand(&[d.join("a")]).unwrap().len(), 3);
}
