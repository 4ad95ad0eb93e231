//! The child-process protocol: the parent writes a job file (one NVRTC module's PTX and its
//! launches) and starts `phasecheck gpu child JOBS` (hidden); the child runs the jobs from `start`
//! and reports each on stdout: `ready 0` once the module is loaded, `launch ID` just before a
//! launch, then `done ID` (results in `job-ID.bin`) or `fault ID MESSAGE`. A sticky
//! CUDA error (CUDA_ERROR_LAUNCH_FAILED) ends the child; the parent records that job's outcome as
//! `fault` and starts a new child at the next job, so the suite goes on. A spec whose jobs run past
//! their wall-clock budget has its child ended the same way.

use crate::{codegen, sys};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One launch for a child process.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Job {
    pub id: usize,
    pub symbol: String,
    pub grid: u32,
    pub block: u32,
    pub out_words: usize,
    pub src_words: i32,
    pub sched: Vec<i32>,
    pub timeout_ns: u64,
    pub seed: u32,
    pub max_delay: u32,
    /// The spec the job belongs to (its index in the run): the kernel budget is per spec.
    #[serde(default)]
    pub spec: usize,
    /// A launch on the hardware's own barriers cannot be bounded from inside: past this many
    /// milliseconds without returning the host ends the child and records the launch as hung
    /// ([`JobResult::Hung`]). 0: every wait of the kernel is bounded, no such limit.
    #[serde(default)]
    pub hang_ms: u64,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct JobFile {
    pub ptx: String,
    pub results_dir: PathBuf,
    pub jobs: Vec<Job>,
    pub start: usize,
}

/// Copy source: row v (0..SRC_VERSIONS) stamped v, then a row stamped -2 (out-of-range versions).
fn copy_source(words: usize) -> Vec<i32> {
    let mut v = Vec::with_capacity((codegen::SRC_VERSIONS + 1) * words);
    for row in 0..=codegen::SRC_VERSIONS {
        let stamp = if row == codegen::SRC_VERSIONS { -2 } else { row as i32 };
        v.extend(std::iter::repeat_n(stamp, words));
    }
    v
}

/// Child side: run jobs from `start`, print `done ID` / `fault ID MESSAGE` lines.
pub fn child_main(path: &Path) -> u8 {
    let jf: JobFile = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(j) => j,
        Err(e) => {
            eprintln!("child: bad job file {}: {e}", path.display());
            return 2;
        }
    };
    let out = std::io::stdout();
    let say = |s: String| {
        let mut o = out.lock();
        let _ = writeln!(o, "{s}");
        let _ = o.flush();
    };
    // A failure before the first launch is the first pending job's fault.
    let setup_fault = |e: String| {
        say(format!(
            "fault {} {}",
            jf.jobs.get(jf.start).map(|j| j.id).unwrap_or(0),
            e.replace('\n', " ")
        ));
        3
    };
    let gpu = match sys::Gpu::open() {
        Ok(g) => g,
        Err(e) => return setup_fault(e),
    };
    let module = match gpu.load(&jf.ptx) {
        Ok(m) => m,
        Err(e) => return setup_fault(e),
    };
    let max_words = jf.jobs.iter().map(|j| j.src_words).max().unwrap_or(4).max(4) as usize;
    let src = copy_source(max_words);
    // The module is loaded (the driver's compile is behind us): launch times count from here.
    say("ready 0".into());
    for job in &jf.jobs[jf.start..] {
        let l = sys::Launch {
            symbol: &job.symbol,
            grid: job.grid,
            block: job.block,
            out_words: job.out_words,
            src: &src,
            src_words: max_words as i32,
            sched: &job.sched,
            timeout_ns: job.timeout_ns,
            seed: job.seed,
            max_delay: job.max_delay,
        };
        match gpu.run(&module, &l, &|| say(format!("launch {}", job.id))) {
            Ok(words) => {
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                let f = jf.results_dir.join(format!("job-{}.bin", job.id));
                if let Err(e) = std::fs::write(&f, bytes) {
                    eprintln!("child: cannot write {}: {e}", f.display());
                }
                say(format!("done {}", job.id));
            }
            Err(e) => {
                say(format!("fault {} {}", job.id, e.replace('\n', " ")));
                return 3;
            }
        }
    }
    0
}

/// What a job produced in the parent's view.
#[derive(Clone, Debug)]
pub enum JobResult {
    /// The launch's records, and how long the launch took from the child's `launch` word to its
    /// `done` (the kernel's own time, seen from the host).
    Words(Vec<i32>, Option<Duration>),
    Fault(String),
    /// The job did not finish within the kernel budget: its child was ended, nothing judged.
    OverBudget(String),
    /// A launch on hardware barriers did not return within its hang limit: its child was ended,
    /// no block's record came back (the launch as a whole hung).
    Hung(String),
}

/// What the parent hears while a job file runs.
pub enum ChildEvent<'a> {
    /// A job's result came in (its words, its fault, or its budget ran out).
    Result(&'a Job, JobResult),
    /// Nothing came in for a while: the job in progress, and how long its spec has run.
    Waiting(&'a Job, Duration),
    /// A child loaded its module: how long from its start (the process, the context, the driver's
    /// compile of every kernel of the module). What the stage spends outside the launches.
    Ready(Duration),
}

/// How often the parent speaks up while a child is silent.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// Run a job file's jobs in children, restarting after each fault; each result goes to `on` as it
/// comes in, and while nothing comes in `on` hears every [`HEARTBEAT`] which job is running.
/// `budget`: wall-clock seconds the jobs of one spec may take together (launches included); past
/// it the child is ended, the spec's remaining jobs are [`JobResult::OverBudget`], and a new child
/// goes on with the next spec's first job.
pub fn run_jobs(jf: &mut JobFile, tag: &str, dir: &Path, budget: Duration, on: &mut dyn FnMut(ChildEvent)) {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("phasecheck"));
    let mut start = 0;
    let n = jf.jobs.len();
    let mut restarts = 0;
    // When the spec of the job in progress began its first job.
    let mut spec_began: Option<(usize, Instant)> = None;
    while start < n && restarts <= n {
        jf.start = start;
        let path = dir.join(format!("jobs-{tag}.json"));
        if let Err(e) = std::fs::write(&path, serde_json::to_vec(&*jf).unwrap()) {
            for j in &jf.jobs[start..] {
                on(ChildEvent::Result(j, JobResult::Fault(format!("cannot write job file: {e}"))));
            }
            break;
        }
        let child = std::process::Command::new(&exe)
            .args(["gpu", "child"])
            // Every kernel of the module loaded (and its PTX compiled by the driver) before the
            // child says `ready`: with the driver's default lazy loading a kernel is loaded at its
            // first use, inside the first launch's time. On the H200 run of 2026-12-02 the first
            // hardware-barrier launch of a fresh child over a 35-kernel module passed the 4 s hang
            // limit that way, twice, while alone it returned in time 12 runs of 12.
            .env("CUDA_MODULE_LOADING", "EAGER")
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                for j in &jf.jobs[start..] {
                    on(ChildEvent::Result(j, JobResult::Fault(format!("cannot start child: {e}"))));
                }
                break;
            }
        };
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut next = start;
        let mut faulted = false;
        let mut over = false;
        // When the job in progress began: each of the child's words restarts it.
        let mut job_began = Instant::now();
        // The module is loaded (the child said `ready`): only from then on does a launch's hang
        // limit run. Loading a module eagerly took over 5 s in a fresh child on the H200
        // (2026-12-03, the first job of the suite), which a limit counted from the spawn took for
        // a hung launch (the false OUTSIDE of 2026-12-02); the spec's budget bounds the load.
        let mut loaded = false;
        let mut hung = false;
        // Whether the child's last word was `launch` (so that a `done` after it times the launch).
        let mut launch_said = false;
        loop {
            let Some(job) = jf.jobs.get(next) else { break };
            let began = match spec_began {
                Some((sp, t)) if sp == job.spec => t,
                _ => {
                    let t = Instant::now();
                    spec_began = Some((job.spec, t));
                    t
                }
            };
            let left = budget.saturating_sub(began.elapsed());
            let hang = Duration::from_millis(job.hang_ms);
            let timed = job.hang_ms > 0 && loaded;
            let hang_left = if timed {
                hang.saturating_sub(job_began.elapsed())
            } else {
                HEARTBEAT
            };
            let line = match rx.recv_timeout(left.min(HEARTBEAT).min(hang_left)) {
                Ok(l) => l,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if timed && job_began.elapsed() >= hang => {
                    // A hardware barrier that never completes: only ending the process ends it.
                    let _ = child.kill();
                    on(ChildEvent::Result(
                        job,
                        JobResult::Hung(format!(
                            "the launch did not return within {:.1} s (a hardware barrier never completed); the host ended it",
                            hang.as_secs_f64()
                        )),
                    ));
                    next += 1;
                    hung = true;
                    break;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if began.elapsed() < budget => {
                    on(ChildEvent::Waiting(job, began.elapsed()));
                    continue;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    // The spec's jobs ran past their budget: end this child, skip the spec's rest.
                    let _ = child.kill();
                    let spec = job.spec;
                    while let Some(j) = jf.jobs.get(next).filter(|j| j.spec == spec) {
                        on(ChildEvent::Result(
                            j,
                            JobResult::OverBudget(format!("kernels {:.0} s", budget.as_secs_f64())),
                        ));
                        next += 1;
                    }
                    over = true;
                    break;
                }
            };
            let mut it = line.splitn(3, ' ');
            let (what, id) = (it.next().unwrap_or(""), it.next().and_then(|s| s.parse::<usize>().ok()));
            let Some(id) = id else { continue };
            let idx = jf.jobs.iter().position(|j| j.id == id).unwrap_or(next);
            // The hang limit counts from the child's last word: `ready` (the module is loaded),
            // `launch ID` (the kernel is loaded and its buffers are in place) or a result.
            let since_last_word = job_began.elapsed();
            job_began = Instant::now();
            let launched = std::mem::replace(&mut launch_said, what == "launch");
            match what {
                "ready" => {
                    loaded = true;
                    on(ChildEvent::Ready(since_last_word));
                }
                "launch" => {}
                "done" => {
                    let f = jf.results_dir.join(format!("job-{id}.bin"));
                    let r = match std::fs::read(&f) {
                        Ok(b) => JobResult::Words(
                            b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
                            launched.then_some(since_last_word),
                        ),
                        Err(e) => JobResult::Fault(format!("results lost: {e}")),
                    };
                    let _ = std::fs::remove_file(&f);
                    on(ChildEvent::Result(&jf.jobs[idx], r));
                    next = idx + 1;
                }
                "fault" => {
                    on(ChildEvent::Result(
                        &jf.jobs[idx],
                        JobResult::Fault(it.next().unwrap_or("").to_string()),
                    ));
                    next = idx + 1;
                    faulted = true;
                }
                _ => {}
            }
        }
        let st = child.wait();
        let _ = reader.join();
        if next == start && !faulted && !over && !hung {
            // The child died before reporting anything: blame the job it was on.
            let why = format!("child process ended ({:?}) during this launch", st.map(|s| s.code()));
            on(ChildEvent::Result(&jf.jobs[start], JobResult::Fault(why)));
            next = start + 1;
        }
        start = next;
        restarts += 1;
    }
}
