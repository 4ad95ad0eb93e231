//! The command-level fuzz campaign (`phasecheck fuzz-commands`, hidden; docs/fuzzing.md): mutated
//! specs through every command, each command in a process of its own so that a panic, an abort,
//! a bound overrun or a hang is seen from outside, as a user would see it.
//!
//! A fresh `exec` per command costs more than the commands themselves on most mutated inputs
//! (most do not parse), so the campaign forks: the driver stays single-threaded (no watchdog,
//! no search threads), and each child leaves the driver's loop with the argument list of one
//! command and runs `main`'s ordinary path with it, bounds and exit statuses included. The driver
//! reads the child's exit status, wall time and peak resident memory (`wait4`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `phasecheck fuzz-commands`: the campaign's parameters.
#[derive(clap::Args, Debug)]
pub struct FuzzArgs {
    /// How many mutated specs.
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Scratch folder (inputs, outputs, and `crashes/` with every finding).
    #[arg(long)]
    pub scratch: PathBuf,
    /// Seed corpus folders.
    #[arg(long = "corpus", default_values = ["specs", "tests/malformed"])]
    pub corpus: Vec<PathBuf>,
    /// Trace folder the fix-loop commands replay from.
    #[arg(long, default_value = "counterexamples")]
    pub traces: PathBuf,
    /// The time bound every exploring command gets; past it plus one second is an overrun.
    #[arg(long, default_value_t = 2.0)]
    pub bound_seconds: f64,
    /// The memory bound every exploring command gets (MiB); past 1.5 x it is an overrun.
    #[arg(long, default_value_t = 256)]
    pub bound_mib: u64,
}

/// What the driver hands back to `main`: a child's command line to run, or the campaign's end.
pub enum Drive {
    Child(Vec<String>),
    Done(std::process::ExitCode),
}

/// The commands each input goes through. `{F}` is the mutated spec, `{C}` a copy of it for
/// `fmt --write`, `{T}` a stored trace, `{O}` an output path; `B` marks the commands under the
/// campaign's bounds (`{S}` seconds, `{M}` MiB).
const COMMANDS: &[(&str, bool)] = &[
    ("check {F} --max-seconds {S} --max-memory {M} --max-states 20000 --threads 1", true),
    ("test {F} --max-seconds {S} --max-memory {M} --max-states 20000 --threads 1", true),
    ("fmt {F}", false),
    ("fmt --check {F}", false),
    ("fmt --write {C}", false),
    ("emit-cuda {F} --backend ptx", false),
    ("emit-cuda {F} --backend libcu", false),
    (
        "replay {T} --spec {F} --max-seconds {S} --max-memory {M} --max-states 20000 --threads 1",
        true,
    ),
    (
        "check {F} --against {T} --max-seconds {S} --max-memory {M} --max-states 20000 --threads 1",
        true,
    ),
    ("prove {F} --max-seconds {S} --max-memory {M} --timeout-ms 500", true),
    ("repair {F} --max-seconds {S} --max-memory {M}", true),
    ("run {F} --cpu --runs 4 --max-seconds {S} --max-memory {M}", true),
    (
        "gpu run {F} --plan-only --out {O} --max-seconds {S} --max-memory {M} --outcome-limit 20000 --outcome-seconds 1 --check-seconds 1",
        true,
    ),
];

#[derive(Default)]
struct Tally {
    runs: u64,
    by_status: std::collections::BTreeMap<String, u64>,
    panics: u64,
    overruns: u64,
    internal: u64,
    lost_files: u64,
    disagreements: u64,
    worst_wall: f64,
    worst_rss_mib: f64,
}

/// Run the campaign. Returns `Drive::Child` inside each forked child, `Drive::Done` in the driver.
pub fn drive(a: &FuzzArgs) -> Drive {
    use phasecheck_gpu::fuzz;
    let crashes = a.scratch.join("crashes");
    if let Err(e) = std::fs::create_dir_all(&crashes) {
        noteln!("error: cannot make {}: {e}", crashes.display());
        return Drive::Done(std::process::ExitCode::from(2));
    }
    let seeds = fuzz::seeds(&a.corpus);
    let traces: Vec<PathBuf> = std::fs::read_dir(&a.traces)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    if seeds.is_empty() || traces.is_empty() {
        noteln!("error: no seed specs in the corpus folders or no traces in {}", a.traces.display());
        return Drive::Done(std::process::ExitCode::from(2));
    }
    let mut traces = traces;
    traces.sort();
    let dict = fuzz::dictionary();
    let mut rng = fuzz::Rng::new(a.seed);
    let (input, copy, out) = (
        a.scratch.join("input.phase"),
        a.scratch.join("copy.phase"),
        a.scratch.join("plan.json"),
    );
    let mut t = Tally::default();
    let (mut parsed, mut unparsed) = (0u64, 0u64);
    let t0 = Instant::now();
    for n in 0..a.count {
        let seed = &seeds[rng.below(seeds.len())];
        let bytes = fuzz::mutate(seed, &mut rng, &dict, &seeds, 6);
        if std::fs::write(&input, &bytes).is_err() {
            noteln!("error: cannot write {}", input.display());
            return Drive::Done(std::process::ExitCode::from(2));
        }
        // Inputs that do not parse stop in the loader every command shares: one command (in
        // turn) is enough for them; inputs that parse go through every command.
        let parses = std::str::from_utf8(&bytes).is_ok_and(|s| phasecheck_model::lang::parse(s).is_ok());
        let chosen: Vec<usize> = if parses {
            parsed += 1;
            (0..COMMANDS.len()).collect()
        } else {
            unparsed += 1;
            vec![(n as usize) % COMMANDS.len()]
        };
        for i in chosen {
            let (template, bounded) = COMMANDS[i];
            let trace = traces[rng.below(traces.len())].display().to_string();
            let line = template
                .replace("{F}", &input.display().to_string())
                .replace("{C}", &copy.display().to_string())
                .replace("{T}", &trace)
                .replace("{O}", &out.display().to_string())
                .replace("{S}", &a.bound_seconds.to_string())
                .replace("{M}", &a.bound_mib.to_string());
            if template.contains("{C}") && std::fs::write(&copy, &bytes).is_err() {
                continue;
            }
            let argv: Vec<String> = std::iter::once("phasecheck".to_string())
                .chain(line.split(' ').map(str::to_string))
                .collect();
            let started = Instant::now();
            let Some((status, rss)) = (match fork_child() {
                Forked::Child => return Drive::Child(argv),
                Forked::Parent(pid) => wait(pid),
                Forked::Failed => None,
            }) else {
                noteln!("error: fork or wait failed");
                return Drive::Done(std::process::ExitCode::from(2));
            };
            let wall = started.elapsed().as_secs_f64();
            t.runs += 1;
            t.worst_wall = t.worst_wall.max(wall);
            let rss_mib = rss as f64 / 1024.0;
            t.worst_rss_mib = t.worst_rss_mib.max(rss_mib);
            let label = match status {
                Status::Exit(c) => format!("exit {c}"),
                Status::Signal(s) => format!("signal {s}"),
            };
            *t.by_status
                .entry(format!("{} {label}", template.split(" {").next().unwrap_or(template)))
                .or_default() += 1;
            let mut finding = None;
            if matches!(status, Status::Exit(101) | Status::Signal(_)) {
                t.panics += 1;
                finding = Some("panic");
            } else if status == Status::Exit(5) {
                t.internal += 1;
                finding = Some("internal");
            } else if template.starts_with("run ") && status == Status::Exit(1) {
                // The reference runtime showed an outcome the model does not allow: one of the
                // two is wrong, whatever the input.
                t.disagreements += 1;
                finding = Some("disagreement");
            }
            if bounded && (wall > a.bound_seconds + 1.0 || rss_mib > 1.5 * a.bound_mib as f64) {
                t.overruns += 1;
                finding = Some("overrun");
            }
            // fmt --write keeps the original unless it wrote a canonical form that loads.
            if template.contains("{C}") {
                let now = std::fs::read(&copy).unwrap_or_default();
                let whole = now == bytes
                    || (status == Status::Exit(0) && std::str::from_utf8(&now).is_ok_and(|s| phasecheck_model::lang::parse(s).is_ok()));
                if !whole {
                    t.lost_files += 1;
                    finding = Some("lost-file");
                }
            }
            if let Some(f) = finding {
                let name = crashes.join(format!("{n}-{f}-{i}"));
                let _ = std::fs::write(name.with_extension("phase"), &bytes);
                let _ = std::fs::write(
                    name.with_extension("txt"),
                    format!("{line}\n{label}, {wall:.2} s, {rss_mib:.0} MiB\n"),
                );
            }
        }
        if (n + 1) % 1000 == 0 {
            summary(&mut std::io::stderr(), a, &t, n + 1, parsed, unparsed, t0.elapsed().as_secs_f64());
        }
    }
    let mut s = Vec::new();
    summary(&mut s, a, &t, a.count, parsed, unparsed, t0.elapsed().as_secs_f64());
    let _ = std::fs::write(a.scratch.join("summary.txt"), &s);
    let _ = std::io::stderr().write_all(&s);
    let clean = t.panics == 0 && t.overruns == 0 && t.internal == 0 && t.lost_files == 0 && t.disagreements == 0;
    Drive::Done(std::process::ExitCode::from(if clean { 0 } else { 1 }))
}

fn summary(w: &mut dyn std::io::Write, a: &FuzzArgs, t: &Tally, inputs: u64, parsed: u64, unparsed: u64, secs: f64) {
    let _ = writeln!(
        w,
        "fuzz-commands: {inputs} mutated specs (seed {}; {parsed} parse and went through all {} commands, {unparsed} do not and went through one each), {} command runs in {secs:.0} s: {} panics, {} bound overruns (bounds {} s, {} MiB), {} internal errors, {} lost files, {} runtime disagreements; slowest run {:.2} s, largest {:.0} MiB",
        a.seed,
        COMMANDS.len(),
        t.runs,
        t.panics,
        t.overruns,
        a.bound_seconds,
        a.bound_mib,
        t.internal,
        t.lost_files,
        t.disagreements,
        t.worst_wall,
        t.worst_rss_mib
    );
    for (k, v) in &t.by_status {
        let _ = writeln!(w, "  {v:>8}  {k}");
    }
}

enum Forked {
    Child,
    Parent(libc::pid_t),
    Failed,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Exit(i32),
    Signal(i32),
}

/// Fork; in the child, stdout and stderr go to /dev/null (the commands' output is not the
/// finding, how they end is).
fn fork_child() -> Forked {
    // SAFETY: the driver is single-threaded (it starts no thread before or during the loop), so
    // the child may go on running ordinary Rust code.
    match unsafe { libc::fork() } {
        0 => {
            if let Ok(null) = std::fs::OpenOptions::new().write(true).open(Path::new("/dev/null")) {
                use std::os::fd::AsRawFd as _;
                // SAFETY: dup2 onto the standard descriptors of this process.
                unsafe {
                    libc::dup2(null.as_raw_fd(), 1);
                    libc::dup2(null.as_raw_fd(), 2);
                }
            }
            Forked::Child
        }
        pid if pid > 0 => Forked::Parent(pid),
        _ => Forked::Failed,
    }
}

/// Wait for the child: its status and its peak resident set in KiB.
fn wait(pid: libc::pid_t) -> Option<(Status, i64)> {
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waiting for our own child.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        return None;
    }
    let s = if libc::WIFEXITED(status) {
        Status::Exit(libc::WEXITSTATUS(status))
    } else {
        Status::Signal(libc::WTERMSIG(status))
    };
    Some((s, usage.ru_maxrss))
}
