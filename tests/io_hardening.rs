//! The I/O layer every command goes through (model/src/io.rs, src/out.rs): output that cannot be
//! written ends a command with exit 6 and no panic; a FIFO where a file is expected is refused at
//! once; a trace cannot make the CLI open a file outside its own folder or print control
//! sequences; `fmt --write` never leaves a file half written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("phasecheck-io-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cli(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).current_dir(ROOT);
    c
}

/// Run with stdout on /dev/full; returns (exit code, stderr).
fn to_dev_full(args: &[&str]) -> (i32, String) {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let o = cli(args).stdout(Stdio::from(full)).stderr(Stdio::piped()).output().unwrap();
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn every_command_ends_with_exit_6_when_stdout_is_full() {
    let db = "specs/guide/double_buffer.phase";
    let bug = "specs/mistakes/consumer_wrong_parity.phase";
    let trace = "counterexamples/consumer_wrong_parity.stale-read.json";
    let report = scratch("full").join("plan.json");
    let cases: Vec<Vec<&str>> = vec![
        vec!["check", bug],
        vec!["check", db, "--format", "json"],
        vec!["test", "specs/guide"],
        vec!["fmt", db],
        vec!["emit-cuda", db],
        vec!["replay", trace],
        vec!["prove", db],
        vec!["run", "--cpu", db, "--runs", "2"],
        vec!["gpu", "run", db, "--plan-only", "--out", report.to_str().unwrap()],
    ];
    for args in cases {
        let (code, err) = to_dev_full(&args);
        assert_eq!(code, 6, "{args:?}: exit {code}\n{err}");
        assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    }
}

#[test]
fn a_reader_that_closes_the_pipe_never_makes_a_command_panic() {
    for _ in 0..10 {
        let mut child = cli(&["check", "specs/mistakes/consumer_wrong_parity.phase"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Read ten bytes, then close the pipe, as `| head -c 10` does.
        let mut out = child.stdout.take().unwrap();
        let mut ten = [0u8; 10];
        std::io::Read::read_exact(&mut out, &mut ten).unwrap();
        drop(out);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "{err}");
        assert!(matches!(o.status.code(), Some(1) | Some(6)), "{:?}", o.status);
    }
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a plain libc call on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Runs under a 5 s guard: a command that blocks on the FIFO is killed and the test fails.
fn bounded(args: &[&str]) -> (i32, String, f64) {
    let t0 = Instant::now();
    let mut child = cli(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err, t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("{args:?} blocked for 5 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_fifo_where_a_file_is_expected_is_bad_input_not_a_hang() {
    let d = scratch("fifo");
    let spec = d.join("a.phase");
    mkfifo(&spec);
    std::fs::copy(Path::new(ROOT).join("specs/guide/double_buffer.phase"), d.join("b.phase")).unwrap();
    let traces = d.join("traces");
    std::fs::create_dir(&traces).unwrap();
    mkfifo(&traces.join("t.json"));
    let s = spec.to_str().unwrap();
    let folder = d.to_str().unwrap();
    let t = traces.join("t.json");
    for args in [
        vec!["check", s],
        vec!["test", folder],
        vec!["fmt", s],
        vec!["replay", t.to_str().unwrap()],
        vec![
            "check",
            "specs/guide/double_buffer.phase",
            "--against",
            traces.to_str().unwrap(),
            "--max-seconds",
            "2",
        ],
        vec!["gpu", "rejudge", t.to_str().unwrap()],
    ] {
        let (code, err, _) = bounded(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
    }
}

/// A copy of a committed trace, edited, in a folder of its own beside a copy of its spec.
fn edited_trace(name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let d = scratch(name);
    let t = Path::new(ROOT).join("counterexamples/consumer_wrong_parity.stale-read.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(t).unwrap()).unwrap();
    edit(&mut v);
    let p = d.join("t.json");
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    p
}

#[test]
fn a_trace_cannot_name_a_spec_outside_its_folder_or_of_another_kind() {
    for (name, path) in [("abs", "/etc/passwd"), ("kind", "../../etc/passwd"), ("abs-phase", "/tmp/x.phase")] {
        let p = edited_trace(name, |v| v["spec"]["path"] = serde_json::json!(path));
        let o = cli(&["replay", p.to_str().unwrap()]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{path}: {err}");
        assert!(err.contains("pass --spec"), "{path}: {err}");
        assert!(!err.contains("root:"), "{path}: the file was read: {err}");
    }
}

#[test]
fn control_sequences_from_a_trace_never_reach_the_terminal() {
    let p = edited_trace("esc", |v| {
        v["violation"]["message"] = serde_json::json!("\u{1b}]0;owned\u{7}\u{1b}[2J");
        v["spec"]["path"] = serde_json::json!("\u{1b}[2J.phase");
    });
    let o = cli(&["replay", p.to_str().unwrap()]).output().unwrap();
    for s in [&o.stdout, &o.stderr] {
        assert!(!s.contains(&0x1b), "{}", String::from_utf8_lossy(s));
    }
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn fmt_write_refuses_a_canonical_form_past_the_size_cap_and_keeps_the_file() {
    let d = scratch("fmt-cap");
    // Just under 1 MiB of text whose canonical form is longer (every statement re-indented).
    let mut body = String::from("protocol big\nbarrier b count 1\nrole r[1] {\n");
    while body.len() < (1 << 20) - 64 {
        body.push_str("arrive(b)\n");
    }
    body.push_str("}\n");
    let p = d.join("big.phase");
    std::fs::write(&p, &body).unwrap();
    let o = cli(&["fmt", "--write", p.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("canonical form is") && err.contains("left as it was"), "{err}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), body, "the original is kept");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary file is left");
}

#[test]
fn fmt_write_replaces_the_file_whole() {
    let d = scratch("fmt-ok");
    let p = d.join("a.phase");
    std::fs::write(&p, "protocol a\nbarrier b count 1\nrole r[1] {\n      arrive(b)\n}\n").unwrap();
    let o = cli(&["fmt", "--write", p.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let now = std::fs::read_to_string(&p).unwrap();
    assert!(now.contains("\n  arrive(b)\n"), "{now}");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
}

/// A disk that fills while `fmt --write` writes: the file-size limit (`ulimit -f`, with SIGXFSZ
/// ignored so the write fails with EFBIG instead of killing the process) stops the temporary file
/// part-way, as ENOSPC would. The command is exit 2 naming the file, the spec keeps every byte of
/// its original text, and no temporary is left beside it.
#[cfg(unix)]
#[test]
fn fmt_write_cut_off_mid_write_keeps_the_original_whole() {
    let d = scratch("fmt-efbig");
    let p = d.join("a.phase");
    let mut body = String::from("protocol a\nbarrier b count 1\nrole r[1] {\n");
    for _ in 0..60 {
        body.push_str(&format!("      arrive(b)    // {}\n", "x".repeat(60)));
    }
    body.push_str("}\n");
    assert!(body.len() > 4096, "the canonical form must outgrow the 2 KiB limit");
    std::fs::write(&p, &body).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 2; trap '' XFSZ; exec \"$0\" fmt --write \"$1\"")
        .arg(BIN)
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("a.phase") && err.contains("left as it was"), "{err}");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), body, "the original is kept whole");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no temporary file is left");
}

/// A folder below the one given that cannot be read is named itself, not its parent, and ends the
/// command as bad input. Root reads any folder, so as root the command runs without the two
/// capabilities that let it (`setpriv` drops them from the bounding set; uid stays 0).
#[test]
fn an_unreadable_subfolder_is_named_itself() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("unreadable");
    let deep = d.join("b").join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::create_dir_all(d.join("a")).unwrap();
    for f in [d.join("a/one.phase"), deep.join("two.phase")] {
        std::fs::copy(Path::new(ROOT).join("specs/guide/double_buffer.phase"), f).unwrap();
    }
    std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o000)).unwrap();
    let root = unsafe { libc::geteuid() } == 0;
    let unreadable_here = std::fs::read_dir(&deep).is_err();
    for cmd in ["test", "check", "fmt"] {
        let mut c = if root {
            let mut c = Command::new("setpriv");
            c.args(["--bounding-set", "-dac_override,-dac_read_search", BIN]);
            c
        } else {
            Command::new(BIN)
        };
        c.args([cmd, d.to_str().unwrap()]).current_dir(ROOT);
        let o = match c.output() {
            Ok(o) => o,
            Err(e) if root && !unreadable_here => {
                eprintln!("skipped: root without setpriv ({e}) reads every folder");
                break;
            }
            Err(e) => panic!("{e}"),
        };
        let err = String::from_utf8_lossy(&o.stderr);
        if root && err.starts_with("setpriv:") {
            eprintln!("skipped: setpriv cannot drop capabilities here: {err}");
            break;
        }
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains(&format!("cannot read folder {}", deep.display())),
            "{cmd} must name the unreadable subfolder: {err}"
        );
    }
    std::fs::set_permissions(&deep, std::fs::Permissions::from_mode(0o755)).unwrap();
    let _ = std::fs::remove_dir_all(&d);
}
