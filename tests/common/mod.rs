//! What the CLI tests share: running the built binary from the repository root.
#![allow(dead_code)]

/// The allocator the `phasecheck` binary searches with (src/main.rs), so that the searches of
/// these tests cost what they cost users (the system allocator made them slower).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::{Command, Output};

/// `phasecheck ARGS...` from the repository root, output captured.
pub fn phasecheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs")
}

/// The exit status; a signal is a test failure.
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally (no signal)")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `source` written to a fresh file named after `tag` and `name` (in a directory of its own,
/// which the caller may remove).
pub fn spec_file(tag: &str, name: &str, source: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("phasecheck-{tag}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join(format!("{name}.phase"));
    std::fs::write(&f, source).unwrap();
    f
}

/// `phasecheck check` of `source` written to a fresh file named after `tag` and `name`:
/// (exit status, stdout + stderr).
pub fn check_source(tag: &str, name: &str, source: &str) -> (i32, String) {
    let f = spec_file(tag, name, source);
    let o = phasecheck(&["check", f.to_str().unwrap()]);
    let out = format!("{}{}", text(&o.stdout), text(&o.stderr));
    let _ = std::fs::remove_dir_all(f.parent().unwrap());
    (code(&o), out)
}
