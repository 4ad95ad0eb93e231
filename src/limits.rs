//! The CLI side of the resource bounds (`phasecheck_verifier::bounds`): which memory bound applies
//! and why, the watchdog, and what is printed when the watchdog has to end the process because a
//! bound passed where nothing polls it (parsing, lowering, one model step that does not return).

use crate::SearchArgs;
use phasecheck_verifier::bounds::{self, Phase};
use phasecheck_verifier::Bound;
use serde_json::{json, Value};
use std::io::Write as _;
use std::sync::{Mutex, OnceLock};

/// The memory bound in bytes and where it comes from.
pub fn memory(a: &SearchArgs) -> (usize, String) {
    static DEFAULT: OnceLock<(usize, String)> = OnceLock::new();
    match a.max_memory {
        Some(m) => (m.saturating_mul(1 << 20), "--max-memory".to_string()),
        None => DEFAULT.get_or_init(bounds::default_memory_bytes).clone(),
    }
}

/// `memory 1024 MiB resident (--max-memory), time 5 s (--max-seconds)`.
pub fn describe(a: &SearchArgs) -> String {
    let (m, from) = memory(a);
    let time = match a.max_seconds {
        Some(s) => format!("{s} s (--max-seconds)"),
        None => "none".to_string(),
    };
    format!("memory {} MiB resident ({from}), time {time}", m >> 20)
}

pub fn json(a: &SearchArgs) -> Value {
    let (m, from) = memory(a);
    json!({"max_memory_mib": m >> 20, "memory_bound_from": from, "max_seconds": a.max_seconds})
}

struct Current {
    json: bool,
    /// The file being loaded or searched.
    file: String,
    phase: &'static str,
}

static CURRENT: Mutex<Current> = Mutex::new(Current {
    json: false,
    file: String::new(),
    phase: "",
});

fn set_current(file: &str, phase: &'static str) {
    if let Ok(mut c) = CURRENT.lock() {
        c.file = file.to_string();
        c.phase = phase;
    }
}

/// The watchdog found a bound passed where nothing answers: report `incomplete` and exit 3.
fn overrun(b: Bound) {
    let (json, file, phase) = match CURRENT.try_lock() {
        Ok(c) => (c.json, c.file.clone(), c.phase),
        Err(_) => (false, String::new(), "running"),
    };
    let why = format!("bound {} reached {phase}; the process stopped there", b.describe());
    let mut out = std::io::stdout().lock();
    let _ = if json {
        writeln!(
            out,
            "{}",
            json!({"file": file, "verdict": "incomplete", "bound": b.describe(), "stopped": why})
        )
    } else {
        writeln!(out, "== {file}\nverdict: incomplete ({why})")
    };
    let _ = out.flush();
    std::process::exit(3);
}

/// Start the bounds for a `check` or `test` run: the watchdog, and the time bound over loading.
pub fn start(a: &SearchArgs, json: bool) {
    if let Ok(mut c) = CURRENT.lock() {
        c.json = json;
    }
    set_current("(inputs)", "while reading, parsing and lowering the inputs");
    bounds::watchdog(memory(a).0, overrun);
    bounds::set_deadline(a.max_seconds);
    bounds::set_phase(Phase::Load);
}

/// Loading is done: the time bound restarts for each search.
pub fn loaded(file: Option<&str>) {
    match file {
        Some(f) => set_current(f, "while reading, parsing and lowering it"),
        None => {
            bounds::set_phase(Phase::Idle);
            bounds::set_deadline(None);
        }
    }
}

/// Run one search under the watchdog. The search stops itself at `--max-seconds`; the watchdog
/// ends the process only when a step has not returned half a second after that.
pub fn search<R>(a: &SearchArgs, file: &str, f: impl FnOnce() -> R) -> R {
    set_current(
        file,
        "inside one model step (a long run of local statements, or a state larger than the bound)",
    );
    bounds::set_deadline(a.max_seconds);
    bounds::set_phase(Phase::Search);
    let r = f();
    bounds::set_deadline(None);
    bounds::set_phase(Phase::Idle);
    r
}
