//! The CLI side of the resource bounds (`phasecheck_verifier::bounds`): which memory bound applies
//! and why, the watchdog, and what is printed when the watchdog has to end the process because a
//! bound passed where nothing polls it (parsing, lowering, one model step that does not return).

use crate::SearchArgs;
use phasecheck_verifier::bounds::{self, Phase};
use phasecheck_verifier::Bound;
use serde_json::{json, Value};
use std::io::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The memory bound in bytes and where it comes from.
pub fn memory(a: &SearchArgs) -> (usize, String) {
    memory_of(a.max_memory)
}

/// [`memory`] for any command's `--max-memory`.
pub fn memory_of(max_memory: Option<usize>) -> (usize, String) {
    static DEFAULT: OnceLock<(usize, String)> = OnceLock::new();
    match max_memory {
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
    // `_exit`, not `exit`: this runs on the watchdog thread while the main thread may be inside
    // Z3 or a search, and `exit` would run the C++ static destructors (Z3's) under it; the
    // command-level fuzz campaign caught a `repair` ending by SIGSEGV that way at its bound.
    // SAFETY: ends the process at once; stdout was flushed above, stderr is unbuffered.
    unsafe { libc::_exit(3) }
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

/// Loading is done: the time bound restarts for each search. A command armed by
/// [`start_backstop`] keeps its one bound over the whole process instead.
pub fn loaded(file: Option<&str>) {
    match file {
        Some(f) => set_current(f, "while reading, parsing and lowering it"),
        None => match UNPOLLED.lock().ok().and_then(|u| *u) {
            Some((deadline, what_doing)) => {
                set_current(&what_doing.0, what_doing.1);
                bounds::set_deadline(deadline.map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64()));
                bounds::set_phase(Phase::Load);
            }
            None => {
                bounds::set_phase(Phase::Idle);
                bounds::set_deadline(None);
            }
        },
    }
}

/// The whole-process bound of a command armed by [`start_unpolled`]/[`start_backstop`]: its
/// deadline and what it runs, restored when loading the inputs is done.
#[allow(clippy::type_complexity)]
static UNPOLLED: Mutex<Option<(Option<Instant>, (&'static str, &'static str))>> = Mutex::new(None);

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

/// `--max-seconds` and `--max-memory` of a command whose work does not poll the bounds: Z3's
/// queries (`prove`, `repair`), the GPU plan's enumerations (`gpu run --plan-only`), a re-judge.
/// Nothing there can be asked to stop, so a passed bound ends the process at once with
/// `incomplete` and exit 3, as a passed bound does while `check` loads its inputs.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ProcessBounds {
    /// Stop (verdict incomplete, exit 3) after this many seconds of the whole command.
    #[arg(long, value_name = "S")]
    pub max_seconds: Option<f64>,
    /// Stop (verdict incomplete, exit 3) when the process holds this many MiB (resident, as the
    /// OS counts it). Default: half of the memory available at start.
    #[arg(long, value_name = "MIB")]
    pub max_memory: Option<usize>,
}

/// Arm the watchdog over the rest of the process for a command that does not poll it. `what`
/// names what runs (`prove specs/x.phase`), `doing` ends the sentence that says where the bound
/// was passed.
pub fn start_unpolled(b: &ProcessBounds, json: bool, what: &str, doing: &'static str) {
    backstop(b.max_seconds, b.max_memory, json, what, doing)
}

/// [`start_unpolled`] for a command that does stop itself at `max_seconds` (`run --cpu`): the
/// watchdog is the backstop a second later, should one step of it not return.
pub fn start_backstop(max_seconds: Option<f64>, max_memory: Option<usize>, what: &str, doing: &'static str) {
    backstop(max_seconds.map(|s| s + BACKSTOP_SECONDS), max_memory, false, what, doing)
}

/// How long after its own time bound a self-stopping command is ended by the watchdog.
const BACKSTOP_SECONDS: f64 = 0.75;

fn backstop(max_seconds: Option<f64>, max_memory: Option<usize>, json: bool, what: &str, doing: &'static str) {
    if let Ok(mut c) = CURRENT.lock() {
        c.json = json;
    }
    set_current(what, doing);
    let deadline = max_seconds
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Instant::now() + Duration::from_secs_f64(s.min(1e9)));
    if let Ok(mut u) = UNPOLLED.lock() {
        *u = Some((deadline, (Box::leak(what.to_string().into_boxed_str()), doing)));
    }
    bounds::watchdog(memory_of(max_memory).0, overrun);
    bounds::set_deadline(max_seconds);
    bounds::set_phase(Phase::Load);
}
