//! `phasecheck fmt --check` and `--write`: a file out of canonical form is named with its first
//! differing line (exit 1); `--write` fixes it in place, comments kept, after which `--check`
//! passes.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

#[test]
fn check_then_write_then_check() {
    let d = std::env::temp_dir().join(format!("phasecheck-fmt-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("p.phase");
    let src = "// a protocol\nprotocol p\nbarrier b count 1\nrole t[1] { arrive(b); wait_parity(b, 0) }   // one round\n";
    std::fs::write(&f, src).unwrap();
    let run = |args: &[&str]| Command::new(BIN).arg("fmt").args(args).arg(&f).output().unwrap();

    let o = run(&["--check"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("p.phase:3: not in canonical form"), "{out}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), src, "--check must not write");

    let o = run(&["--write"]);
    assert_eq!(o.status.code(), Some(0));
    let now = std::fs::read_to_string(&f).unwrap();
    assert!(now.starts_with("// a protocol\nprotocol p\n"), "{now}");
    assert!(now.contains("}   // one round"), "{now}");

    let o = run(&["--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    let o = run(&[]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), now);
}
