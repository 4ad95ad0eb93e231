//! `phasecheck gpu run`: every spec × backend × mode on the GPU, compared with the model.
//!
//! Plan: the parent loads specs, asks the verifier for violation traces, generates one kernel per
//! (spec, backend), compiles ONE NVRTC module per backend, and writes launch jobs. The jobs run in
//! child processes (`phasecheck gpu child JOBS`, hidden): one child for all specs that cannot fault,
//! and one per spec whose verdict includes a kind that may fault (over-arrival, lifetime, tx-range,
//! count-range, uninitialized). A child reports each finished job on stdout; when a launch fails
//! (a sticky CUDA error such as CUDA_ERROR_LAUNCH_FAILED), that job's outcome is `fault`, the child
//! exits, and the parent starts a new child at the next job: the suite goes on.
//!
//! Modes: `stress` launches `--runs` blocks (one execution per block) with pseudo-random delays
//! before every step; each block's outcome must be in `allowed_outcomes`. `replay` forces the order
//! of thread steps of a trace with the turnstile (see codegen). Copy landings (`Land` actions) are
//! asynchronous on the GPU and cannot be forced: they are dropped from the schedule; a step that
//! depends on a landing waits for it through its (bounded) barrier wait, as the trace did. A read
//! that the trace places before a landing races with the copy on the GPU too, and may see either
//! version or a torn mix; such observations are compared with the allowed set (which widens racy
//! reads) when they differ from the forced outcome. A warp-batched `commit` is one model step for
//! all its converged lanes (the mates observe `CommitJoined`): every lane of the group gets that
//! step's turn ([`commit_mates`], [`schedule`]), and the kernel lets the group commit on it once.

use crate::codegen::{self, generate, status, Backend, Kernel};
use crate::outcome::{allowed_outcomes, forced, Outcome, ThreadOutcome};
use crate::{nvrtc, sys};
use phasecheck_model::spec::{expand, load as load_spec};
use phasecheck_model::step::{Action, Model, Obs};
use phasecheck_model::ViolationKind as K;
use phasecheck_verifier::{check, CheckOptions};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendSel {
    Libcu,
    Ptx,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeSel {
    Replay,
    Stress,
    Both,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// `.phase` files or folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = BackendSel::Both)]
    pub backend: BackendSel,
    #[arg(long, value_enum, default_value_t = ModeSel::Both)]
    pub mode: ModeSel,
    /// Stress: blocks (executions) per spec; replay: blocks per trace is min(N, 32).
    #[arg(long, default_value_t = 4096)]
    pub runs: u32,
    /// JSON report path (a `.md` table is written next to it). Default:
    /// gpu-conformance/results/<date>-h200.json
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Bound of every wait in the kernels.
    #[arg(long, default_value_t = 20)]
    pub timeout_ms: u64,
    /// Bound of the model-side enumeration of allowed outcomes (distinct partial states).
    #[arg(long, default_value_t = 200_000)]
    pub outcome_limit: usize,
    /// Seconds the verifier may spend per spec finding traces.
    #[arg(long, default_value_t = 10.0)]
    pub check_seconds: f64,
}

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
enum JobResult {
    Words(Vec<i32>),
    Fault(String),
}

/// Run a job file's jobs in children, restarting after each fault. Returns results by job id.
fn run_jobs(jf: &mut JobFile, tag: &str, dir: &Path) -> BTreeMap<usize, JobResult> {
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
        let mut next = start;
        let mut faulted = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
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
        if next == start && !faulted {
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

fn outcome_of(k: &Kernel, words: &[i32], block: usize) -> (Outcome, Flags) {
    let rec = k.parse_block(&words[block * k.block_words..(block + 1) * k.block_words]);
    let mut flags = Flags::default();
    let threads = rec
        .threads
        .iter()
        .map(|t| {
            match t.status {
                status::HUNG => flags.hung = true,
                status::ASSERT_FAILED => flags.assert = true,
                status::UNSUPPORTED => flags.unsupported = true,
                status::OVERFLOW => flags.overflow = true,
                _ => {}
            }
            flags.turn_lost |= t.turn_lost;
            flags.torn |= t.reads.contains(&-1);
            flags.wrong_version |= t.bad_expect > 0;
            ThreadOutcome {
                finished: t.status == status::FINISHED,
                reads: t.reads.clone(),
                try_waits: t.try_waits.clone(),
                token_parities: t.token_parities.clone(),
            }
        })
        .collect();
    (
        Outcome {
            threads,
            completions: rec.completions,
            fault: false,
        },
        flags,
    )
}

#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    hung: bool,
    turn_lost: bool,
    assert: bool,
    unsupported: bool,
    overflow: bool,
    torn: bool,
    wrong_version: bool,
    fault: bool,
}

impl Flags {
    fn merge(&mut self, o: Flags) {
        self.hung |= o.hung;
        self.turn_lost |= o.turn_lost;
        self.assert |= o.assert;
        self.unsupported |= o.unsupported;
        self.overflow |= o.overflow;
        self.torn |= o.torn;
        self.wrong_version |= o.wrong_version;
        self.fault |= o.fault;
    }
    fn bug_shows(&self) -> bool {
        self.hung || self.assert || self.torn || self.wrong_version || self.fault
    }
    fn describe(&self) -> String {
        let mut v = Vec::new();
        for (b, s) in [
            (self.hung, "hang"),
            (self.turn_lost, "left the trace, ran free"),
            (self.assert, "assert failed"),
            (self.torn, "torn read"),
            (self.wrong_version, "wrong version"),
            (self.fault, "fault"),
            (self.unsupported, "unsupported index/size"),
            (self.overflow, "record overflow"),
        ] {
            if b {
                v.push(s);
            }
        }
        v.join(", ")
    }
}

/// One row of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Case {
    pub spec: String,
    pub backend: String,
    pub mode: String,
    pub runs: usize,
    pub allowed: serde_json::Value,
    pub observed: BTreeMap<String, usize>,
    /// null when nothing ran (not expressible, compile error).
    pub observed_within_model: Option<bool>,
    pub bug_manifested: Option<bool>,
    pub note: String,
}

const MAY_FAULT: [K; 5] = [K::OverArrival, K::Lifetime, K::TxRange, K::CountRange, K::Uninitialized];

/// The lanes that took part in each step of a trace without an action of their own: for a
/// warp-batched `commit`, the converged mates of the acting lane (`Obs::CommitJoined`), found by
/// replaying the trace through the model. One entry per action; empty past where the model stops
/// (a trace ending in undefined behaviour) and for every other kind of step.
pub fn commit_mates(model: &Model, actions: &[Action]) -> Vec<Vec<u16>> {
    let mut out = vec![Vec::new(); actions.len()];
    let Some(mut s) = model.init().next else { return out };
    for (k, &a) in actions.iter().enumerate() {
        let o = model.step(&s, a);
        if let Some(ev) = &o.event {
            out[k] = ev
                .obs
                .iter()
                .filter_map(|ob| match ob {
                    Obs::CommitJoined { lane, .. } => Some(*lane),
                    _ => None,
                })
                .collect();
        }
        match o.next {
            Some(n) => s = n,
            None => break,
        }
    }
    out
}

/// Schedule for the turnstile from a trace: thread steps numbered in order; landings dropped.
/// `mates[k]` (see [`commit_mates`]; may be shorter than `actions`) are lanes whose commit step is
/// part of action k: each gets the same turn as the acting lane, since on the GPU every lane of the
/// group executes the commit (and the kernel lets all of them in on that one turn).
pub fn schedule(nt: usize, actions: &[Action], mates: &[Vec<u16>]) -> Vec<i32> {
    let mut per: Vec<Vec<i32>> = vec![Vec::new(); nt];
    let mut turn = 0;
    for (k, a) in actions.iter().enumerate() {
        if let Action::Thread(t) = a {
            per[*t as usize].push(turn);
            for &m in mates.get(k).map(|v| v.as_slice()).unwrap_or(&[]) {
                per[m as usize].push(turn);
            }
            turn += 1;
        }
    }
    let mut s = vec![1, turn];
    let base = 2 + 2 * nt as i32;
    let mut off = base;
    let mut offs = Vec::new();
    for p in &per {
        offs.push(off);
        off += p.len() as i32;
    }
    s.extend(offs);
    s.extend(per.iter().map(|p| p.len() as i32));
    for p in per {
        s.extend(p);
    }
    s
}

/// The turnstile schedule of a trace of `model`, group commits included.
pub fn replay_schedule(model: &Model, actions: &[Action]) -> Vec<i32> {
    schedule(model.proto.threads.len(), actions, &commit_mates(model, actions))
}

/// One complete execution of the model (first enabled action each time), for holding specs.
fn one_execution(model: &Model) -> Option<Vec<Action>> {
    let mut s = model.init().next?;
    let mut acts = Vec::new();
    let mut buf = Vec::new();
    for _ in 0..100_000 {
        buf.clear();
        model.actions(&s, &mut buf);
        let Some(a) = buf.first().copied() else { break };
        let o = model.step(&s, a);
        acts.push(a);
        s = o.next?;
    }
    s.all_done().then_some(acts)
}

struct SpecRun {
    display: String,
    model: Model,
    traces: Vec<(String, Vec<Action>, bool)>, // (label, actions, is a violation)
    may_fault: bool,
    kernels: BTreeMap<Backend, Result<Kernel, String>>,
    /// The model's allowed outcomes, computed once (on first use).
    allowed: std::cell::OnceCell<crate::outcome::AllowedSet>,
}

fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let z = secs / 86400 + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02}")
}

pub fn run(a: &RunArgs) -> u8 {
    let t0 = Instant::now();
    let files = match expand(&a.paths) {
        Ok(f) => f,
        Err(e) => {
            eprint!("{e}");
            return 2;
        }
    };
    // Bad input is exit 2 with or without a GPU: every spec is loaded before anything runs.
    let mut loaded = Vec::new();
    let mut bad = false;
    for f in &files {
        match load_spec(f, &[]) {
            Ok(s) => loaded.push(s),
            Err(e) => {
                eprint!("{e}");
                bad = true;
            }
        }
    }
    if bad {
        return 2;
    }
    if !sys::driver_present() {
        println!("no CUDA driver found: nothing run");
        return 0;
    }
    let backends: Vec<Backend> = match a.backend {
        BackendSel::Libcu => vec![Backend::Libcu],
        BackendSel::Ptx => vec![Backend::Ptx],
        BackendSel::Both => vec![Backend::Ptx, Backend::Libcu],
    };
    let (do_replay, do_stress) = match a.mode {
        ModeSel::Replay => (true, false),
        ModeSel::Stress => (false, true),
        ModeSel::Both => (true, true),
    };
    let mut cases: Vec<Case> = Vec::new();
    // 1. Model side: load, check, traces; generate kernels.
    let mut specs: Vec<SpecRun> = Vec::new();
    for spec in loaded {
        let model = Model::new(spec.proto.clone());
        let opts = CheckOptions {
            max_seconds: Some(a.check_seconds),
            ..Default::default()
        };
        let rep = check(&model, &opts);
        let mut traces = Vec::new();
        for v in &rep.violations {
            traces.push((v.kind.name().to_string(), v.actions.clone(), true));
        }
        if rep.violations.is_empty() {
            if let Some(ex) = one_execution(&model) {
                traces.push(("complete execution".to_string(), ex, false));
            }
        }
        let may_fault = rep.violations.iter().any(|v| MAY_FAULT.contains(&v.kind));
        let mut kernels = BTreeMap::new();
        for &b in &backends {
            kernels.insert(b, generate(&spec.proto, &spec.source, b, specs.len()).map_err(|e| e.to_string()));
        }
        specs.push(SpecRun {
            display: spec.display.clone(),
            model,
            traces,
            may_fault,
            kernels,
            allowed: Default::default(),
        });
    }
    eprintln!(
        "gpu run: {} specs loaded and checked in {:.1} s",
        specs.len(),
        t0.elapsed().as_secs_f64()
    );
    let gpu_info = sys::Gpu::open().map(|g| (g.name(), g.driver_version()));
    // The parent opened a context only to name the device; drop it before children start.
    let (device, driver) = gpu_info.clone().unwrap_or_else(|e| (format!("unavailable: {e}"), "unknown".into()));
    let work = std::env::temp_dir().join(format!("phasecheck-gpu-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&work);
    let timeout_ns = a.timeout_ms * 1_000_000;
    let replay_blocks = a.runs.clamp(1, 32);
    for &b in &backends {
        // 2. Compile one module per backend.
        let ok: Vec<Kernel> = specs.iter().filter_map(|s| s.kernels[&b].as_ref().ok().cloned()).collect();
        let tc = Instant::now();
        let ptx = nvrtc::compile_module(&ok, &format!("phasecheck_{}.cu", b.name()));
        eprintln!(
            "gpu run: {} kernels compiled for {} in {:.1} s",
            ok.len(),
            b.name(),
            tc.elapsed().as_secs_f64()
        );
        // 3. Jobs: group 0 = specs that cannot fault; one group per spec that may.
        let mut groups: BTreeMap<usize, Vec<Job>> = BTreeMap::new();
        let mut meta: BTreeMap<usize, (usize, &'static str, Option<usize>)> = BTreeMap::new(); // job -> (spec, mode, trace)
        let mut id = 0;
        for (si, s) in specs.iter().enumerate() {
            let k = match &s.kernels[&b] {
                Ok(k) => k,
                Err(e) => {
                    for m in modes(do_replay, do_stress) {
                        cases.push(skip_case(s, b, m, e.clone()));
                    }
                    continue;
                }
            };
            if let Err(log) = &ptx {
                for m in modes(do_replay, do_stress) {
                    cases.push(skip_case(
                        s,
                        b,
                        m,
                        format!("NVRTC compile failed: {}", log.lines().take(3).collect::<Vec<_>>().join(" ")),
                    ));
                }
                continue;
            }
            let group = if s.may_fault { si + 1 } else { 0 };
            let mk = |id: usize, grid: u32, sched: Vec<i32>, seed: u32, max_delay: u32| Job {
                id,
                symbol: k.symbol.clone(),
                grid,
                block: k.block_dim,
                out_words: grid as usize * k.block_words,
                src_words: k.src_words as i32,
                sched,
                timeout_ns,
                seed,
                max_delay,
            };
            if do_stress {
                groups
                    .entry(group)
                    .or_default()
                    .push(mk(id, a.runs.max(1), vec![0, 0], 0x5EED ^ id as u32, 2048));
                meta.insert(id, (si, "stress", None));
                id += 1;
            }
            if do_replay {
                for (ti, (_, acts, _)) in s.traces.iter().enumerate() {
                    groups
                        .entry(group)
                        .or_default()
                        .push(mk(id, replay_blocks, replay_schedule(&s.model, acts), 1, 0));
                    meta.insert(id, (si, "replay", Some(ti)));
                    id += 1;
                }
            }
        }
        let Ok(ptx) = ptx else { continue };
        let mut results = BTreeMap::new();
        for (g, jobs) in groups {
            let mut jf = JobFile {
                ptx: ptx.clone(),
                results_dir: work.clone(),
                jobs,
                start: 0,
            };
            results.extend(run_jobs(&mut jf, &format!("{}-{g}", b.name()), &work));
        }
        // 4. Compare.
        for (jid, (si, mode, trace)) in meta {
            let s = &specs[si];
            let k = s.kernels[&b].as_ref().unwrap();
            let res = results.get(&jid).cloned().unwrap_or(JobResult::Fault("no result".into()));
            cases.push(compare(s, k, b, mode, trace, res, a, replay_blocks));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    // 5. Report.
    let date = today();
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("gpu-conformance/results/{date}-h200.json")));
    let report = serde_json::json!({
        "device": device, "driver": driver, "date": date,
        "wall_seconds": t0.elapsed().as_secs_f64(),
        "cases": cases,
    });
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let md = markdown(&device, &driver, &date, &cases, t0.elapsed());
    let wrote =
        std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap()).and_then(|_| std::fs::write(out.with_extension("md"), &md));
    if let Err(e) = wrote {
        eprintln!("error: cannot write {}: {e}", out.display());
    }
    print!("{md}");
    let bad = cases.iter().filter(|c| c.observed_within_model == Some(false)).count();
    println!(
        "{} cases, {} outside the model; report: {} (+ .md); {:.1} s",
        cases.len(),
        bad,
        out.display(),
        t0.elapsed().as_secs_f64()
    );
    if bad > 0 {
        1
    } else {
        0
    }
}

fn modes(r: bool, s: bool) -> Vec<&'static str> {
    let mut v = Vec::new();
    if s {
        v.push("stress");
    }
    if r {
        v.push("replay");
    }
    v
}

fn skip_case(s: &SpecRun, b: Backend, mode: &str, note: String) -> Case {
    Case {
        spec: s.display.clone(),
        backend: b.name().into(),
        mode: mode.into(),
        runs: 0,
        allowed: serde_json::Value::Null,
        observed: BTreeMap::new(),
        observed_within_model: None,
        bug_manifested: None,
        note,
    }
}

#[allow(clippy::too_many_arguments)]
fn compare(s: &SpecRun, k: &Kernel, b: Backend, mode: &str, trace: Option<usize>, res: JobResult, a: &RunArgs, replay_blocks: u32) -> Case {
    let allowed = s.allowed.get_or_init(|| allowed_outcomes(&s.model, a.outcome_limit));
    let mut observed: BTreeMap<String, usize> = BTreeMap::new();
    let mut flags = Flags::default();
    let mut outcomes: Vec<Outcome> = Vec::new();
    let blocks = if mode == "stress" {
        a.runs.max(1) as usize
    } else {
        replay_blocks as usize
    };
    match &res {
        JobResult::Words(w) => {
            for blk in 0..blocks.min(w.len() / k.block_words.max(1)) {
                let (o, f) = outcome_of(k, w, blk);
                flags.merge(f);
                outcomes.push(o);
            }
        }
        JobResult::Fault(_) => {
            flags.fault = true;
            outcomes.push(Outcome {
                threads: Vec::new(),
                completions: Vec::new(),
                fault: true,
            });
        }
    }
    for o in &outcomes {
        *observed.entry(o.to_string()).or_default() += if o.fault { blocks } else { 1 };
    }
    let mut note = String::new();
    if let JobResult::Fault(e) = &res {
        note.push_str(&format!("launch fault: {e}; "));
    }
    let (allowed_json, within, bug) = if mode == "stress" {
        let within = outcomes.iter().all(|o| allowed.contains(o));
        if !allowed.is_complete() {
            note.push_str("allowed set incomplete (limit reached): a rejection is inconclusive; ");
        }
        let has_bug = !s.traces.iter().all(|t| !t.2);
        (serde_json::json!(allowed.summary()), within, has_bug.then_some(flags.bug_shows()))
    } else {
        let (label, acts, is_violation) = &s.traces[trace.unwrap()];
        note.push_str(&format!("trace: {label} ({} steps); ", acts.len()));
        match forced(&s.model, acts) {
            Ok(fc) => {
                let fo = &fc.outcome;
                let within = outcomes.iter().all(|o| {
                    o == fo
                        || allowed.contains(o)
                        || fc.undefined.is_some()
                            && crate::outcome::Undefined {
                                prefix: fo.clone(),
                                cause: fc.undefined.unwrap(),
                            }
                            .admits(o)
                });
                let exact = outcomes.iter().filter(|o| as_forced(&fc, o)).count();
                note.push_str(&format!("{exact}/{} blocks as forced; ", outcomes.len()));
                (serde_json::json!(fo.to_string()), within, is_violation.then_some(flags.bug_shows()))
            }
            Err(e) => {
                note.push_str(&format!("trace does not replay in the model: {e}; "));
                (serde_json::Value::Null, false, None)
            }
        }
    };
    let f = flags.describe();
    if !f.is_empty() {
        note.push_str(&format!("seen: {f}"));
    }
    let _ = b;
    Case {
        spec: s.display.clone(),
        backend: b.name().into(),
        mode: mode.into(),
        runs: blocks,
        allowed: allowed_json,
        observed,
        observed_within_model: Some(within),
        bug_manifested: bug,
        note: note.trim_end_matches("; ").to_string(),
    }
}

/// Whether a replayed block did what the trace forces. Threads that finished or hung in the trace
/// must match exactly. A trace that stops early (a state violation such as a stale wait, or a
/// step violation that does not end the execution) forces only a prefix: its threads still blocked
/// or able to run go on freely on the GPU after the last turn, so their recorded vectors must
/// start with the forced ones and their end is free; completion-function runs may only grow.
/// (Before this, such traces could never count as "exactly as forced": a thread blocked at the end
/// of kinds/stale_wait's trace is released on the GPU by the workers' last round.)
pub fn as_forced(fc: &crate::outcome::Forced, o: &Outcome) -> bool {
    use crate::outcome::ThreadEnd;
    let fo = &fc.outcome;
    fn prefix<T: PartialEq>(a: &[T], b: &[T]) -> bool {
        b.len() >= a.len() && b[..a.len()] == *a
    }
    if o == fo {
        return true;
    }
    if fc.undefined.is_some() || o.fault || o.threads.len() != fo.threads.len() || o.completions.len() != fo.completions.len() {
        return false;
    }
    fo.threads.iter().zip(&o.threads).zip(&fc.ends).all(|((f, g), end)| match end {
        ThreadEnd::Finished | ThreadEnd::Hung => f == g,
        ThreadEnd::Running | ThreadEnd::Blocked => {
            prefix(&f.reads, &g.reads) && prefix(&f.try_waits, &g.try_waits) && prefix(&f.token_parities, &g.token_parities)
        }
    }) && fo.completions.iter().zip(&o.completions).all(|(f, g)| g >= f)
}

/// One row per spec, one cell per backend: the table a reviewer reads first.
fn by_spec(cases: &[Case]) -> String {
    let mut specs: Vec<&str> = Vec::new();
    for c in cases {
        if !specs.contains(&c.spec.as_str()) {
            specs.push(&c.spec);
        }
    }
    let cell = |spec: &str, backend: &str| -> String {
        let mine: Vec<&Case> = cases.iter().filter(|c| c.spec == spec && c.backend == backend).collect();
        if mine.is_empty() {
            return "-".into();
        }
        if mine.iter().all(|c| c.observed_within_model.is_none()) {
            return "not expressible".into();
        }
        let ran: Vec<&&Case> = mine.iter().filter(|c| c.observed_within_model.is_some()).collect();
        let within = ran.iter().filter(|c| c.observed_within_model == Some(true)).count();
        let shown = |mode: &str| {
            let m: Vec<&&&Case> = ran.iter().filter(|c| c.mode == mode).collect();
            if m.iter().all(|c| c.bug_manifested.is_none()) {
                "-"
            } else if m.iter().any(|c| c.bug_manifested == Some(true)) {
                "yes"
            } else {
                "no"
            }
        };
        let verdict = if within == ran.len() {
            "within".to_string()
        } else {
            format!("**{} OUTSIDE**", ran.len() - within)
        };
        format!(
            "{verdict} ({}/{}); bug: replay {}, stress {}",
            within,
            ran.len(),
            shown("replay"),
            shown("stress")
        )
    };
    let mut s = String::from("| spec | ptx | libcu |\n|---|---|---|\n");
    for spec in specs {
        s.push_str(&format!("| {spec} | {} | {} |\n", cell(spec, "ptx"), cell(spec, "libcu")));
    }
    s
}

fn markdown(device: &str, driver: &str, date: &str, cases: &[Case], wall: Duration) -> String {
    let mut s = format!("# GPU conformance: {device}, driver {driver}, {date}\n\n");
    let within = cases.iter().filter(|c| c.observed_within_model == Some(true)).count();
    let outside = cases.iter().filter(|c| c.observed_within_model == Some(false)).count();
    let skipped = cases.iter().filter(|c| c.observed_within_model.is_none()).count();
    let bugs = cases.iter().filter(|c| c.bug_manifested == Some(true)).count();
    let bug_cases = cases.iter().filter(|c| c.bug_manifested.is_some()).count();
    s.push_str(&format!(
        "{} cases: {within} within the model, {outside} outside, {skipped} not run; bug shown in {bugs}/{bug_cases} buggy cases; {:.1} s wall.\n\n",
        cases.len(),
        wall.as_secs_f64()
    ));
    s.push_str(&by_spec(cases));
    s.push_str("\n## Every case\n\n");
    s.push_str("| spec | backend | mode | runs | outcomes seen | within model | bug shown | note |\n|---|---|---|---|---|---|---|---|\n");
    let yn = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "**NO**",
        None => "-",
    };
    for c in cases {
        let spec = Path::new(&c.spec)
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or(c.spec.clone());
        s.push_str(&format!(
            "| {spec} | {} | {} | {} | {} | {} | {} | {} |\n",
            c.backend,
            c.mode,
            c.runs,
            c.observed.len(),
            yn(c.observed_within_model),
            match c.bug_manifested {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            },
            c.note.replace('|', "/")
        ));
    }
    s
}
