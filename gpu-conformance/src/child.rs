//! The child-process protocol: the parent writes a job file (one NVRTC module's PTX and its
//! launches) and starts `phasecheck gpu child JOBS` (hidden); the child runs the jobs from `start`
//! and reports each on stdout, `done ID` (results in `job-ID.bin`) or `fault ID MESSAGE`. A sticky
//! CUDA error (CUDA_ERROR_LAUNCH_FAILED) ends the child; the parent records that job's outcome as
//! `fault` and starts a new child at the next job, so the suite goes on. A job past its wall-clock
//! budget has its child ended the same way.

use crate::{codegen, sys};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
        match gpu.run(&module, &l) {
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
    Words(Vec<i32>),
    Fault(String),
    /// The job did not finish within the kernel budget: its child was ended, nothing judged.
    OverBudget(String),
}

/// Run a job file's jobs in children, restarting after each fault. Returns results by job id.
/// `budget`: wall-clock seconds one job may take (launch included); past it the child is ended,
/// that job is [`JobResult::OverBudget`], and a new child goes on with the next job.
pub fn run_jobs(jf: &mut JobFile, tag: &str, dir: &Path, budget: Duration) -> BTreeMap<usize, JobResult> {
    let mut results = BTreeMap::new();
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("phasecheck"));
    let mut start = 0;
    let n = jf.jobs.len();
    let mut restarts = 0;
    while start < n && restarts <= n {
        jf.start = start;
        let path = dir.join(format!("jobs-{tag}.json"));
        if let Err(e) = std::fs::write(&path, serde_json::to_vec(&*jf).unwrap()) {
            for j in &jf.jobs[start..] {
                results.insert(j.id, JobResult::Fault(format!("cannot write job file: {e}")));
            }
            break;
        }
        let child = std::process::Command::new(&exe)
            .args(["gpu", "child"])
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                for j in &jf.jobs[start..] {
                    results.insert(j.id, JobResult::Fault(format!("cannot start child: {e}")));
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
        loop {
            let line = match rx.recv_timeout(budget) {
                Ok(l) => l,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    // This child's current job ran past its budget: end this child only.
                    let _ = child.kill();
                    if let Some(j) = jf.jobs.get(next) {
                        results.insert(j.id, JobResult::OverBudget(format!("kernel {:.0} s", budget.as_secs_f64())));
                    }
                    next += 1;
                    over = true;
                    break;
                }
            };
            let mut it = line.splitn(3, ' ');
            let (what, id) = (it.next().unwrap_or(""), it.next().and_then(|s| s.parse::<usize>().ok()));
            let Some(id) = id else { continue };
            let idx = jf.jobs.iter().position(|j| j.id == id).unwrap_or(next);
            match what {
                "done" => {
                    let f = jf.results_dir.join(format!("job-{id}.bin"));
                    let r = match std::fs::read(&f) {
                        Ok(b) => JobResult::Words(b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()),
                        Err(e) => JobResult::Fault(format!("results lost: {e}")),
                    };
                    let _ = std::fs::remove_file(&f);
                    results.insert(id, r);
                    next = idx + 1;
                }
                "fault" => {
                    results.insert(id, JobResult::Fault(it.next().unwrap_or("").to_string()));
                    next = idx + 1;
                    faulted = true;
                }
                _ => {}
            }
        }
        let st = child.wait();
        let _ = reader.join();
        if next == start && !faulted && !over {
            // The child died before reporting anything: blame the job it was on.
            let why = format!("child process ended ({:?}) during this launch", st.map(|s| s.code()));
            results.insert(jf.jobs[start].id, JobResult::Fault(why));
            next = start + 1;
        }
        start = next;
        restarts += 1;
    }
    results
}
