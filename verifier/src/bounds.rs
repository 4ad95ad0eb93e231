//! Resource bounds that hold: memory is what the process really holds (its resident set, as the
//! OS counts it), not an estimate from the size of a state; time covers everything the process
//! does, a long run of local statements inside one model step included.
//!
//! The search polls [`resident_bytes`] itself. A step that never returns (a local loop of 2^62
//! iterations) or a single state larger than the bound cannot be stopped from inside the search,
//! so the CLI also runs a [`watchdog`]: a thread that samples the resident set every 2 ms and the
//! clock, first asks the search to stop ([`requested`], polled at every expanded state) and, when
//! the search does not answer in time, calls the CLI's `on_overrun`, which reports `incomplete`
//! and exits 3. Peak resident memory stays below 1.25 x the bound plus one sampling interval of
//! allocation.
//!
//! Measured (BENCHMARKS.md): reading `/proc/self/statm` costs about 3 us; the search reads it once
//! every 256 expanded states, the watchdog 500 times a second.

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Why a search stopped before it had seen every reachable state: the bound it reached. The
/// engine stops at it, the watchdog asks for it ([`requested`]), reports name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    MaxStates,
    MaxSeconds,
    MaxMemory,
    /// One step ran more local instructions than `phasecheck_model::rt::STEP_BUDGET`.
    StepBudget,
    /// States past a violation were set aside when their allowance ran out
    /// (`CheckOptions::past_violation_factor`): the kinds reachable only through them are open.
    PastViolation,
}

impl Bound {
    pub fn describe(self) -> &'static str {
        match self {
            Bound::MaxStates => "--max-states",
            Bound::MaxSeconds => "--max-seconds",
            Bound::MaxMemory => "--max-memory",
            Bound::StepBudget => "the step budget (16,777,216 local instructions in one step)",
            Bound::PastViolation => "--past-violation-factor",
        }
    }
}

/// Bytes of one page (the unit of `/proc/self/statm`).
fn page_bytes() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

/// Resident set of this process in bytes (`/proc/self/statm`, second field); None where the OS
/// does not say.
pub fn resident_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_bytes())
}

/// A `kB` field of a `/proc` status file (`VmHWM`, `MemAvailable`, ...) in bytes.
pub fn proc_kb_field(text: &str, field: &str) -> Option<usize> {
    let line = text.lines().find(|l| l.split(':').next() == Some(field))?;
    let kb: usize = line.split(':').nth(1)?.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// Peak resident set of this process (`VmHWM`).
pub fn peak_resident_bytes() -> Option<usize> {
    proc_kb_field(&std::fs::read_to_string("/proc/self/status").ok()?, "VmHWM")
}

/// Memory the machine can give without swapping (`MemAvailable` of `/proc/meminfo`).
pub fn available_bytes() -> Option<usize> {
    proc_kb_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemAvailable")
}

/// The memory bound when none is given: half of the memory available at start.
pub fn default_memory_bytes() -> (usize, String) {
    match available_bytes() {
        Some(a) => (a / 2, format!("default: half of the {} MiB available", a >> 20)),
        None => (8 << 30, "default: 8192 MiB (available memory unknown)".to_string()),
    }
}

const NONE: u8 = 0;
static STOP: AtomicU8 = AtomicU8::new(NONE);
/// Nanoseconds since `epoch()` when the stop was first requested (0: not requested).
static STOP_AT: AtomicU64 = AtomicU64::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Deadline in nanoseconds since `epoch()`; u64::MAX: none.
static DEADLINE: AtomicU64 = AtomicU64::new(u64::MAX);
/// What the process is doing: the watchdog's patience depends on it.
static PHASE: AtomicU8 = AtomicU8::new(Phase::Idle as u8);

/// What the process is doing, for the watchdog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Rendering, writing files: only the hard ceiling (1.25 x the memory bound) applies.
    Idle = 0,
    /// A search that polls [`requested`]: it gets [`GRACE`] to answer a stop request.
    Search = 1,
    /// Reading, parsing and lowering inputs: nothing polls, a passed bound ends the process.
    Load = 2,
}

fn epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

fn code(b: Bound) -> u8 {
    match b {
        Bound::MaxStates => 1,
        Bound::MaxSeconds => 2,
        Bound::MaxMemory => 3,
        Bound::StepBudget => 4,
        Bound::PastViolation => 5,
    }
}

/// The bound the watchdog asks the running search to stop at, if any (`CheckOptions::stop`).
pub fn requested() -> Option<Bound> {
    match STOP.load(Ordering::Relaxed) {
        1 => Some(Bound::MaxStates),
        2 => Some(Bound::MaxSeconds),
        3 => Some(Bound::MaxMemory),
        4 => Some(Bound::StepBudget),
        5 => Some(Bound::PastViolation),
        _ => None,
    }
}

fn request(b: Bound) {
    if STOP.compare_exchange(NONE, code(b), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
        STOP_AT.store(now_ns().max(1), Ordering::Relaxed);
    }
}

/// Arm the time bound: `seconds` from now (None: no time bound).
pub fn set_deadline(seconds: Option<f64>) {
    let d = match seconds {
        Some(s) if s.is_finite() && s >= 0.0 => now_ns().saturating_add((s * 1e9).min(u64::MAX as f64 / 2.0) as u64),
        _ => u64::MAX,
    };
    DEADLINE.store(d, Ordering::Relaxed);
}

/// Enter a phase. Leaving a search clears its stop request (the search has answered it).
pub fn set_phase(p: Phase) {
    PHASE.store(p as u8, Ordering::Relaxed);
    if p != Phase::Search {
        STOP.store(NONE, Ordering::Relaxed);
        STOP_AT.store(0, Ordering::Relaxed);
    }
}

/// How long a running search has to answer a stop request before the process ends anyway.
const GRACE: Duration = Duration::from_millis(500);
const SAMPLE: Duration = Duration::from_millis(2);

/// Start the watchdog thread (once per process). `on_overrun` reports the bound and ends the
/// process; it is called when the resident set passes 1.25 x `limit_bytes`, or a bound was passed
/// and nothing answered within [`GRACE`] (a step that does not return, parsing, lowering).
pub fn watchdog(limit_bytes: usize, on_overrun: fn(Bound)) {
    static STARTED: OnceLock<()> = OnceLock::new();
    LIMIT.store(limit_bytes, Ordering::Relaxed);
    let _ = epoch();
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("phasecheck-bounds".into())
            .spawn(move || loop {
                std::thread::sleep(SAMPLE);
                let phase = PHASE.load(Ordering::Relaxed);
                let limit = LIMIT.load(Ordering::Relaxed);
                let rss = resident_bytes().unwrap_or(0);
                if rss >= limit / 4 * 5 {
                    on_overrun(Bound::MaxMemory);
                }
                if phase == Phase::Idle as u8 {
                    continue;
                }
                let now = now_ns();
                if rss >= limit {
                    request(Bound::MaxMemory);
                } else if now >= DEADLINE.load(Ordering::Relaxed) {
                    request(Bound::MaxSeconds);
                }
                let Some(b) = requested() else { continue };
                let waited = now.saturating_sub(STOP_AT.load(Ordering::Relaxed));
                if phase == Phase::Load as u8 || waited >= GRACE.as_nanos() as u64 {
                    // Still in the same phase? (It may have ended while we sampled.)
                    if PHASE.load(Ordering::Relaxed) == phase && requested() == Some(b) {
                        on_overrun(b);
                    }
                }
            })
            .expect("spawn the bounds watchdog");
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_read_in_bytes() {
        let t = "Name:\tx\nVmHWM:\t  1234 kB\nVmRSS:\t 99 kB\n";
        assert_eq!(proc_kb_field(t, "VmHWM"), Some(1234 * 1024));
        assert_eq!(proc_kb_field(t, "VmRSS"), Some(99 * 1024));
        assert_eq!(proc_kb_field(t, "Vm"), None);
    }

    #[test]
    fn the_resident_set_grows_with_touched_memory() {
        // Other tests of this process allocate and free meanwhile: only absolute facts hold.
        let v = vec![1u8; 64 << 20];
        let during = resident_bytes().expect("/proc/self/statm");
        assert!(during >= 64 << 20, "{during}");
        assert!(peak_resident_bytes().unwrap() >= 64 << 20);
        assert_eq!(v.iter().map(|b| *b as usize).sum::<usize>(), 64 << 20);
    }
}
