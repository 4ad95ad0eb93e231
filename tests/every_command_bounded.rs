//! Every command that explores or enumerates holds `--max-seconds` and `--max-memory` over the
//! whole process (wall <= bound + 1 s, peak resident <= 1.5 x the memory bound, exit 3 with the
//! bound named), inputs of any size are refused before they are read, and `gpu rejudge` refuses
//! observations its spec could not have produced (exit 2 naming the case) instead of judging
//! them OUTSIDE.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("phasecheck-bounded-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Ran {
    code: i32,
    out: String,
    wall: f64,
    peak_mib: f64,
}

/// Run the CLI and measure it from outside: exit status, wall time, peak resident set (wait4).
fn ran(args: &[&str]) -> Ran {
    // One folder per run: the tests of this file run in parallel.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let d = scratch(&format!("run-{}", RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    let (o, e) = (d.join("out"), d.join("err"));
    let t0 = Instant::now();
    let child = Command::new(BIN)
        .args(args)
        .current_dir(ROOT)
        .stdout(Stdio::from(std::fs::File::create(&o).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&e).unwrap()))
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain data; we wait for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    let wall = t0.elapsed().as_secs_f64();
    assert!(libc::WIFEXITED(status), "{args:?} died of signal {}", libc::WTERMSIG(status));
    let out = std::fs::read_to_string(&o).unwrap() + &std::fs::read_to_string(&e).unwrap();
    assert!(!out.contains("panicked"), "{args:?} panicked:\n{out}");
    Ran {
        code: libc::WEXITSTATUS(status),
        out,
        wall,
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
    }
}

/// A copy of the guide's double buffer with ITERS = 2^62: no enumeration of it ever finishes.
fn endless_double_buffer(d: &Path) -> PathBuf {
    let src = std::fs::read_to_string(Path::new(ROOT).join("specs/guide/double_buffer.phase")).unwrap();
    let p = d.join("endless.phase");
    std::fs::write(&p, src.replace("param ITERS = 4", "param ITERS = 4611686018427387904")).unwrap();
    p
}

/// The bound held: wall within a second of it, memory within 1.5 x, incomplete named.
fn held(r: &Ran, what: &str, seconds: f64, mib: f64) {
    assert!(
        r.wall <= seconds + 1.0,
        "{what}: {:.2} s for a {seconds} s bound\n{}",
        r.wall,
        r.out
    );
    assert!(
        r.peak_mib <= 1.5 * mib,
        "{what}: {:.0} MiB for a {mib} MiB bound\n{}",
        r.peak_mib,
        r.out
    );
}

#[test]
fn gpu_plan_on_an_endless_spec_stops_at_its_bounds() {
    let d = scratch("plan");
    let spec = endless_double_buffer(&d);
    let out = d.join("plan.json");
    let r = ran(&[
        "gpu",
        "run",
        spec.to_str().unwrap(),
        "--plan-only",
        "--out",
        out.to_str().unwrap(),
        "--outcome-seconds",
        "5",
        "--check-seconds",
        "5",
        "--max-seconds",
        "2",
        "--max-memory",
        "256",
    ]);
    held(&r, "gpu run --plan-only", 2.0, 256.0);
    assert_eq!(r.code, 3, "{}", r.out);
    assert!(r.out.contains("verdict: incomplete") && r.out.contains("--max-"), "{}", r.out);
    // The bounds are the plan stage's: on the GPU they would orphan the kernel children.
    let r = ran(&["gpu", "run", spec.to_str().unwrap(), "--max-seconds", "2"]);
    assert_eq!(r.code, 2, "{}", r.out);
}

#[test]
fn prove_over_a_wide_range_stops_at_its_time_bound() {
    let r = ran(&[
        "prove",
        "specs/guide/double_buffer.phase",
        "--range",
        "STAGES=1..=4096",
        "--range",
        "ITERS=1..=4096",
        "--max-seconds",
        "1",
        "--max-memory",
        "512",
    ]);
    held(&r, "prove", 1.0, 512.0);
    assert!(matches!(r.code, 0 | 3), "{}", r.out);
    if r.code == 3 {
        assert!(r.out.contains("bound --max-seconds reached while proving"), "{}", r.out);
    }
}

#[test]
fn run_cpu_on_many_threads_holds_both_bounds() {
    let d = scratch("cpu");
    let p = d.join("wide.phase");
    std::fs::write(
        &p,
        "protocol wide\nexpect holds\nbarrier bar count worker.count\nrole worker[64] {\n  for r in 0..4 {\n    arrive_and_wait(bar)\n  }\n}\n",
    )
    .unwrap();
    let r = ran(&[
        "run",
        p.to_str().unwrap(),
        "--cpu",
        "--runs",
        "4",
        "--max-seconds",
        "2",
        "--max-memory",
        "256",
    ]);
    held(&r, "run --cpu", 2.0, 256.0);
    assert!(matches!(r.code, 0 | 3), "{}", r.out);
}

#[test]
fn check_with_its_shrink_hints_ends_within_the_time_bound() {
    let d = scratch("hints");
    let spec = endless_double_buffer(&d);
    let r = ran(&["check", spec.to_str().unwrap(), "--max-seconds", "2", "--max-memory", "256"]);
    held(&r, "check", 2.0, 256.0);
    assert_eq!(r.code, 3, "{}", r.out);
}

#[test]
fn rejudge_stops_at_its_time_bound() {
    let r = ran(&[
        "gpu",
        "rejudge",
        "gpu-conformance/results/2026-12-01-h200.json",
        "--max-seconds",
        "1",
        "--max-memory",
        "512",
    ]);
    held(&r, "gpu rejudge", 1.0, 512.0);
    assert!(matches!(r.code, 0 | 3), "{}", r.out);
}

/// A 600 MB trace (sparse: it takes no disk) is refused by its size before a byte is read.
#[test]
fn a_600_mb_trace_is_refused_before_it_is_read() {
    let d = scratch("huge");
    let p = d.join("huge.json");
    std::fs::File::create(&p).unwrap().set_len(600 << 20).unwrap();
    for args in [
        vec!["replay", p.to_str().unwrap()],
        vec![
            "check",
            "specs/mistakes/consumer_wrong_parity.phase",
            "--against",
            p.to_str().unwrap(),
        ],
        vec!["gpu", "rejudge", p.to_str().unwrap()],
    ] {
        let r = ran(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.out);
        assert!(r.out.contains("larger than"), "{args:?}: {}", r.out);
        assert!(
            r.peak_mib < 100.0 && r.wall < 5.0,
            "{args:?}: {:.0} MiB, {:.1} s",
            r.peak_mib,
            r.wall
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A copy of one judged stress case of the committed H200 results, edited, as a results file.
fn results_with(name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let text = std::fs::read_to_string(Path::new(ROOT).join("gpu-conformance/results/2026-12-01-h200.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut case = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["mode"] == "stress" && c["spec"] == "specs/guide/double_buffer.phase" && !c["observed_within_model"].is_null())
        .unwrap()
        .clone();
    edit(&mut case);
    let mut r = v.clone();
    r["cases"] = serde_json::json!([case]);
    let p = scratch(name).join("results.json");
    std::fs::write(&p, r.to_string()).unwrap();
    p
}

#[test]
fn rejudge_refuses_observations_the_spec_cannot_produce() {
    // The unedited case re-judges (the validation accepts what gpu run writes).
    let ok = results_with("ok", |_| {});
    let r = ran(&["gpu", "rejudge", ok.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.out);
    let cases: [(&str, Box<dyn Fn(&mut serde_json::Value)>, &str); 5] = [
        (
            "empty",
            Box::new(|c| c["observed"] = serde_json::json!({"": 4096})),
            "an empty outcome string",
        ),
        (
            "one-thread",
            Box::new(|c| c["observed"] = serde_json::json!({"t0 done": 4096})),
            "names 1 thread(s), the spec has 3",
        ),
        (
            "beyond",
            Box::new(|c| c["observed"] = serde_json::json!({"t0 done | t1 done | t2 done | t3 done | phases=[0,0,0,0]": 4096})),
            "names 4 thread(s), the spec has 3",
        ),
        (
            "backend",
            Box::new(|c| c["backend"] = serde_json::json!("cuda-graph")),
            "unknown backend `cuda-graph`",
        ),
        (
            "grammar",
            Box::new(|c| c["observed"] = serde_json::json!({"t0 finished": 1})),
            "expected done or HUNG",
        ),
    ];
    for (name, edit, says) in cases {
        let p = results_with(name, edit);
        let r = ran(&["gpu", "rejudge", p.to_str().unwrap()]);
        assert_eq!(r.code, 2, "{name}: {}", r.out);
        assert!(r.out.contains("case 1 (specs/guide/double_buffer.phase"), "{name}: {}", r.out);
        assert!(r.out.contains(says), "{name}: {}", r.out);
        assert!(!r.out.contains("OUTSIDE"), "{name}: {}", r.out);
    }
}

#[test]
fn control_sequences_in_a_results_file_never_reach_the_terminal() {
    let p = results_with("esc", |c| {
        c["backend"] = serde_json::json!("\u{1b}]0;owned\u{7}\u{1b}[2J");
        c["observed"] = serde_json::json!({"\u{1b}[31mt0 done": 1});
    });
    let r = ran(&["gpu", "rejudge", p.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.out);
    assert!(!r.out.contains('\u{1b}') && !r.out.contains('\u{7}'), "{:?}", r.out);
    assert!(r.out.contains("unknown backend"), "{}", r.out);
}
