//! `phasecheck gpu run`: every spec × backend × mode on the GPU, compared with the model. This
//! module only orchestrates; each job has its own module:
//!
//! - [`crate::plan`]: the model stages per spec (allowed outcomes, traces, kernels), each within
//!   its budget, a failing model caught;
//! - [`phasecheck_verifier::outcomes::schedule`]: replay schedules for the turnstile;
//! - [`crate::child`]: the child processes that launch kernels (a sticky CUDA error ends a child,
//!   not the suite);
//! - [`crate::compare`]: judging observed outcomes (within / unchecked / OUTSIDE);
//! - [`crate::report`]: the JSON and Markdown report.
//!
//! Modes: `stress` launches `runs` blocks (one execution per block) with pseudo-random delays
//! before every step; `replay` forces the order of thread steps of a trace with the turnstile (see
//! codegen and [`phasecheck_verifier::outcomes::schedule`]). A spec with a warp-batched `commit` also gets
//! `stress-hw-commit`: free running with the hardware batching the commit's lanes, judged against
//! the same allowed set (its other cases emulate the model's convergence rule and say "emulated").
//! A spec with `syncthreads` or named barriers (and no uniform role, commit or cluster) runs its
//! stress case as `stress-hw-barrier`: the kernel on the hardware's `barrier.sync` /
//! `barrier.arrive`, which cannot be bounded inside, so the host ends a launch that does not
//! return within [`HW_BARRIER_HANG_MS`] and judges it as hung ([`judge_launch_hung`]). Its replays whose trace
//! returns run on the same kernel as `replay-hw-barrier` (the turnstile forces the order of the
//! arrivals; see [`replay_returns`]); a trace that ends hung keeps the bounded software barriers
//! (and says "emulated"), so that the record says which threads hung. One NVRTC module per backend; the jobs of specs that cannot
//! fault share one child, each spec that may fault (over-arrival, lifetime, tx-range, count-range,
//! uninitialized) gets its own.

use crate::child::{run_jobs, ChildEvent, Job, JobFile, JobResult};
use crate::codegen::{has_commit, has_wgmma, software_barriers, Backend, Kernel};
use crate::compare::{as_forced, judge_launch_hung, judge_replay, judge_stress, outcome_of, Flags, Verdict, LAUNCH_HUNG};
use crate::plan::{generate_kernels, plan_spec, progress_line, Generated, Settings, SpecPlan, TraceIndex};
use crate::report::{today, Case, Report, SpecRow};
use crate::{nvrtc, sys};
use phasecheck_model::spec::{expand, load as load_spec};
use phasecheck_verifier::outcomes::replay_schedule;
use phasecheck_verifier::outcomes::{forced, End, Outcome, ThreadEnd};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long a free-running launch on the hardware's barriers may take before the host takes it
/// for hung, where the model allows a hang (or anything, after undefined behaviour): a slow launch
/// taken for a hang there is judged within either way. Its waits are bounded by 20 ms each; in the
/// H200 run of 2026-12-03 (`results/2026-12-03-h200-a.md`, each note says how long its launch took)
/// the slowest of 106 hardware-barrier launches that returned took 0.16 s, so 2 s is a wide
/// margin; each launch that hangs as the model allows costs that much of the wall (six in the
/// library).
pub const HW_BARRIER_HANG_MS: u64 = 2000;

/// The hang limit of a hardware-barrier launch whose spec the model says always returns. In an
/// H200 run of 2026-12-02 the first stress launch of `cutlass_pipeline_tma_async_cluster_multicast`
/// (a fresh child, `barrier.cluster`, 4,096 clusters) passed a 4 s limit twice in the suite while
/// alone it returned every time; with this limit it returned in 0.01 s (2026-12-03, above). A slow
/// launch taken for a hang there is a false OUTSIDE, while where the model allows a hang it is
/// judged within either way, so only these launches get the long wait.
pub const HW_BARRIER_QUIET_HANG_MS: u64 = 30_000;

/// Run the suite; the exit status: 0 (nothing outside the model, or no driver), 1 (some case
/// OUTSIDE), 2 (bad input).
pub fn run(a: &Settings) -> u8 {
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
        match load_spec(f, &a.params) {
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
    if !a.plan_only && !sys::driver_present() {
        println!(
            "no CUDA driver found (libcuda could not be loaded): no kernel can run here, nothing run. `gpu run --plan-only` runs the model stages without a GPU."
        );
        return 0;
    }
    // 1. Model stages, one spec per core at a time (each within its own budgets); the progress
    // line of a spec comes when it is planned, the plans keep the specs' order.
    let index = a.traces.as_deref().map(TraceIndex::load).unwrap_or_default();
    let generated = par_map(loaded.len(), |i| generate_kernels(&loaded[i], i, &a.backends));
    // NVRTC compiles every generated kernel while the model's stages run (the slowest outcome
    // enumeration sets the planning's wall; a spec that ends up not ready wastes its compile).
    let (mut specs, modules) = std::thread::scope(|scope| {
        let modules = (!a.plan_only).then(|| scope.spawn(|| compile_modules(a, &generated)));
        let specs = plan_all(&loaded, a, &index, &generated);
        (specs, modules.map(|h| h.join().expect("the compile thread panicked")))
    });
    eprintln!(
        "gpu run: {} specs planned in {:.1} s ({} counterexample files indexed)",
        specs.len(),
        t0.elapsed().as_secs_f64(),
        index.len()
    );
    let date = today();
    // Never the committed results folder by default: a run lands there only when named.
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("phasecheck-gpu-{date}.json")));
    let modes = modes(a.replay, a.stress);
    let mut cases: Vec<Case> = Vec::new();
    // Specs that cannot run: one row per case, saying why.
    for s in specs.iter().filter(|s| !s.ready()) {
        for &b in &a.backends {
            for m in &modes {
                cases.push(skip_case(s, b, m, s.why_not_run(b)));
            }
        }
    }
    let (device, driver) = if a.plan_only {
        ("none (--plan-only)".to_string(), "none".to_string())
    } else {
        // The parent opens a context only to name the device; it is dropped before children start.
        sys::Gpu::open()
            .map(|g| (g.name(), g.driver_version()))
            .unwrap_or_else(|e| (format!("unavailable: {e}"), "unknown".into()))
    };
    if a.plan_only {
        for s in specs.iter().filter(|s| s.ready()) {
            for &b in &a.backends {
                for m in &modes {
                    let why = match &s.kernels[&b] {
                        Err(e) => crate::plan::refusal(e),
                        Ok(_) => "planned (--plan-only): no kernel run".into(),
                    };
                    // The stress case the run would make: on the hardware's barriers where it can.
                    let m = if *m == "stress" && s.hw_barrier_kernels.contains_key(&b) {
                        "stress-hw-barrier"
                    } else {
                        m
                    };
                    cases.push(skip_case(s, b, m, why));
                }
            }
        }
    } else {
        write_report(&out, &device, &driver, t0, &specs, cases.clone());
        let mut save = |specs: &[SpecPlan], cases: &[Case]| {
            write_report(&out, &device, &driver, t0, specs, cases.to_vec());
        };
        let modules = modules.expect("modules are compiled for a run on the GPU");
        run_on_gpu(a, &mut specs, modules, &mut cases, &mut save);
    }
    // 5. Report (also written after planning and after each backend, so that a run cut short by
    //    an outer timeout still leaves what it did).
    let report = write_report(&out, &device, &driver, t0, &specs, cases);
    print!("{}", report.markdown());
    let outside = report.count(Verdict::Outside);
    println!(
        "{} cases: {} within, {} unchecked, {outside} OUTSIDE; report: {} (+ .md); {:.1} s",
        report.cases.len(),
        report.count(Verdict::Within),
        report.count(Verdict::Unchecked),
        out.display(),
        t0.elapsed().as_secs_f64()
    );
    if outside > 0 {
        1
    } else {
        0
    }
}

/// [`plan_spec`] for every spec, on as many threads as the machine has cores (at most one per
/// spec). The stages are independent per spec, and each catches its own model failure.
/// A spec's line comes when it is planned; while a long enumeration runs, a line every few
/// seconds says how many specs are left and which has run longest (the real shapes' planning went
/// 75 s without a word on the H200, 2026-12-03).
fn plan_all(loaded: &[phasecheck_model::spec::Spec], a: &Settings, index: &TraceIndex, generated: &[Generated]) -> Vec<SpecPlan> {
    let n = loaded.len();
    let t0 = Instant::now();
    let running: std::sync::Mutex<BTreeMap<usize, Instant>> = std::sync::Mutex::new(BTreeMap::new());
    let left = std::sync::atomic::AtomicUsize::new(n);
    std::thread::scope(|scope| {
        let (running, left) = (&running, &left);
        scope.spawn(move || {
            let mut spoke = Instant::now();
            while left.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                std::thread::sleep(Duration::from_millis(100));
                if spoke.elapsed() < crate::child::HEARTBEAT {
                    continue;
                }
                let longest = running
                    .lock()
                    .unwrap()
                    .iter()
                    .min_by_key(|(_, t)| **t)
                    .map(|(&i, t)| (i, t.elapsed()));
                if let Some((i, took)) = longest {
                    eprintln!(
                        "gpu run: planning, {} of {n} specs left, {:.1} s; longest running: {} ({:.1} s)",
                        left.load(std::sync::atomic::Ordering::Relaxed),
                        t0.elapsed().as_secs_f64(),
                        loaded[i].path.display(),
                        took.as_secs_f64()
                    );
                }
                spoke = Instant::now();
            }
        });
        // Counted down even if a plan panics, so that the ticker always ends.
        struct Planned<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Planned<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        par_map(n, |i| {
            let _planned = Planned(left);
            running.lock().unwrap().insert(i, Instant::now());
            let p = plan_spec(&loaded[i], a, index, &generated[i]);
            running.lock().unwrap().remove(&i);
            eprintln!("{}", progress_line(i, n, &p));
            p
        })
    })
}

/// `f(0..n)` on as many threads as the machine has cores (at most `n`), results in index order.
fn par_map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<T>>> = std::sync::Mutex::new((0..n).map(|_| None).collect());
    let threads = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1).min(n.max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                done.lock().unwrap()[i] = Some(r);
            });
        }
    });
    done.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every index is done"))
        .collect()
}

/// How long the host waits for a launch on the hardware's barriers (see [`HW_BARRIER_HANG_MS`]).
fn hang_limit(s: &SpecPlan) -> u64 {
    if s.allowed.as_ref().is_none_or(crate::compare::hang_in_model) {
        HW_BARRIER_HANG_MS
    } else {
        HW_BARRIER_QUIET_HANG_MS
    }
}

/// A replay runs on the hardware's barriers when its trace, forced, leaves no thread hung and
/// reaches no undefined behaviour: then the forced launch returns, and the turnstile forces the
/// same order of steps as on the software barriers (a thread ends its turn before it blocks in
/// `barrier.sync`, and a thread whose turn never comes runs free, as in software). A trace that
/// ends hung keeps the software form: on the hardware the host could only end the launch, and no
/// thread's record would say which threads hung where, which is what that replay is for.
fn replay_returns(model: &phasecheck_model::rt::Model, actions: &[phasecheck_model::rt::Action]) -> bool {
    // A deadlock trace ends with its threads `Hung` and no timeout (none is left to time out).
    forced(model, actions)
        .is_ok_and(|fc| fc.timeouts.is_empty() && fc.undefined.is_none() && !fc.ends.iter().any(|e| matches!(e, ThreadEnd::Hung)))
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

fn skip_case(s: &SpecPlan, b: Backend, mode: &str, why: String) -> Case {
    Case {
        spec: s.display.clone(),
        backend: b.name().into(),
        mode: mode.into(),
        allowed: s
            .allowed
            .as_ref()
            .map(|a| serde_json::json!(a.summary()))
            .unwrap_or(serde_json::Value::Null),
        note: s.notes.join("; "),
        why,
        ..Case::default()
    }
}

/// NVRTC's output per (backend, chunk): the module's PTX (or the compile log), its number of
/// kernels, seconds.
type Compiled = BTreeMap<(Backend, usize), (Result<String, String>, usize, f64)>;

/// Every spec's kernels, compiled: the chunk each spec's kernels are in, and the modules.
struct Modules {
    chunk_of: Vec<usize>,
    compiled: Compiled,
    chunks: usize,
}

/// 2: compile the generated kernels, one NVRTC module per chunk of specs and backend.
fn compile_modules(a: &Settings, generated: &[Generated]) -> Modules {
    // The ready specs' kernels in chunks, one NVRTC module per chunk and backend, all compiled at
    // once (NVRTC compiles separate programs concurrently; one module of every kernel took 37 s
    // on one core of the H200 host while the others idled).
    let ready: Vec<usize> = (0..generated.len())
        .filter(|&i| a.backends.iter().any(|&b| generated[i].kernels(b).next().is_some()))
        .collect();
    let cores = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1);
    let chunks = (cores / a.backends.len().max(1)).clamp(1, 8).min(ready.len().max(1));
    let chunk_of = balance_chunks(&ready, chunks, generated.len(), |si| {
        a.backends
            .iter()
            .flat_map(|&b| generated[si].kernels(b))
            .map(|k| k.body.len())
            .sum()
    });
    let tc = Instant::now();
    let modules_left = std::sync::atomic::AtomicUsize::new(a.backends.len() * chunks);
    let compiling = &modules_left;
    let compiled: Compiled = std::thread::scope(|scope| {
        // NVRTC gives no word while it works: say every few seconds how many modules are left.
        scope.spawn(move || {
            let mut spoke = Instant::now();
            while compiling.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                std::thread::sleep(Duration::from_millis(100));
                if spoke.elapsed() >= crate::child::HEARTBEAT {
                    eprintln!(
                        "gpu run: compiling, {} of {} modules left, {:.1} s",
                        compiling.load(std::sync::atomic::Ordering::Relaxed),
                        a.backends.len() * chunks,
                        tc.elapsed().as_secs_f64()
                    );
                    spoke = Instant::now();
                }
            }
        });
        let mut handles = Vec::new();
        for &b in &a.backends {
            for c in 0..chunks {
                let ok: Vec<Kernel> = ready
                    .iter()
                    .filter(|&&si| chunk_of[si] == c)
                    .flat_map(|&si| generated[si].kernels(b).cloned())
                    .collect();
                handles.push(scope.spawn(move || {
                    let t = Instant::now();
                    // Counted down even if the compile panics, so that the ticker always ends.
                    struct Done<'a>(&'a std::sync::atomic::AtomicUsize);
                    impl Drop for Done<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    let _done = Done(compiling);
                    let ptx = nvrtc::compile_module(&ok, &format!("phasecheck_{}_{c}.cu", b.name()));
                    ((b, c), (ptx, ok.len(), t.elapsed().as_secs_f64()))
                }));
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("an NVRTC compile thread panicked"))
            .collect()
    });
    for &b in &a.backends {
        let mine: Vec<&(Result<String, String>, usize, f64)> = (0..chunks).map(|c| &compiled[&(b, c)]).collect();
        eprintln!(
            "gpu run: {} kernels compiled for {} in {chunks} modules, {:.1} s (longest module {:.1} s)",
            mine.iter().map(|m| m.1).sum::<usize>(),
            b.name(),
            tc.elapsed().as_secs_f64(),
            mine.iter().map(|m| m.2).fold(0.0, f64::max)
        );
    }
    Modules {
        chunk_of,
        compiled,
        chunks,
    }
}

/// The module (chunk) of each ready spec: the heaviest specs first, each into the chunk with the
/// least code so far (NVRTC's time grows with a module's code, and the slowest module holds back
/// the kernel stage: on the H200 run of 2026-12-03, with chunks cut by spec count, the longest
/// libcu module took 34.7 s while planning was done in 18 s). Ties go to the lowest chunk, so the
/// assignment depends only on the specs.
fn balance_chunks(ready: &[usize], chunks: usize, specs: usize, weight: impl Fn(usize) -> usize) -> Vec<usize> {
    let mut chunk_of = vec![0usize; specs];
    let mut order: Vec<(usize, usize)> = ready.iter().map(|&si| (weight(si), si)).collect();
    order.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let mut load = vec![0usize; chunks.max(1)];
    for (w, si) in order {
        let c = (0..load.len()).min_by_key(|&c| (load[c], c)).expect("at least one chunk");
        load[c] += w;
        chunk_of[si] = c;
    }
    chunk_of
}

/// 3-4: run the jobs in children, judge.
fn run_on_gpu(
    a: &Settings,
    specs: &mut [SpecPlan],
    modules: Modules,
    cases: &mut Vec<Case>,
    save: &mut (dyn FnMut(&[SpecPlan], &[Case]) + Send),
) {
    let work = std::env::temp_dir().join(format!("phasecheck-gpu-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&work);
    let timeout_ns = a.timeout_ms * 1_000_000;
    let replay_blocks = a.runs.clamp(1, 32);
    let modes = modes(a.replay, a.stress);
    let Modules {
        chunk_of,
        mut compiled,
        chunks,
    } = modules;
    for &b in &a.backends {
        let ptx_of: BTreeMap<usize, Result<String, String>> = (0..chunks)
            .map(|c| (c, compiled.remove(&(b, c)).expect("every chunk was compiled").0))
            .collect();
        // Cases by spec, in the specs' order once the backend is done.
        let mut by_spec: BTreeMap<usize, Vec<Case>> = BTreeMap::new();
        // Jobs by module: one child per module, restarted after a fault. A spec that may fault
        // once had a child of its own; each such child loads its whole module again (eagerly:
        // every kernel), about 30 per backend in the 2026-12-03 suite, while the restart after a
        // fault already keeps a fault from touching the jobs after it.
        let mut groups: BTreeMap<usize, Vec<Job>> = BTreeMap::new();
        let mut meta: BTreeMap<usize, (usize, &'static str, Option<usize>)> = BTreeMap::new(); // job -> (spec, mode, trace)
        let mut id = 0;
        for (si, s) in specs.iter().enumerate().filter(|(_, s)| s.ready()) {
            let k = match &s.kernels[&b] {
                Ok(k) => k,
                Err(e) => {
                    for m in &modes {
                        by_spec.entry(si).or_default().push(skip_case(s, b, m, crate::plan::refusal(e)));
                    }
                    continue;
                }
            };
            if let Err(log) = &ptx_of[&chunk_of[si]] {
                for m in &modes {
                    let first: Vec<&str> = log.lines().take(3).collect();
                    by_spec
                        .entry(si)
                        .or_default()
                        .push(skip_case(s, b, m, format!("NVRTC compile failed: {}", first.join(" "))));
                }
                continue;
            }
            let group = chunk_of[si];
            let mk = |id: usize, grid: u32, sched: Vec<i32>, seed: u32, max_delay: u32, k: &Kernel| Job {
                id,
                symbol: k.symbol.clone(),
                // A cluster kernel runs each execution on `cluster` CTAs, which share its record.
                grid: grid * k.cluster,
                block: k.block_dim,
                out_words: grid as usize * k.block_words,
                src_words: k.src_words as i32,
                sched,
                timeout_ns,
                seed,
                max_delay,
                spec: si,
                hang_ms: 0,
            };
            if a.stress {
                if let Some(h) = s.hw_barrier_kernels.get(&b) {
                    let mut j = mk(id, a.runs.max(1), vec![0, 0], 0x5EED ^ id as u32, 2048, h);
                    j.hang_ms = hang_limit(s);
                    groups.entry(group).or_default().push(j);
                    meta.insert(id, (si, "stress-hw-barrier", None));
                } else {
                    groups
                        .entry(group)
                        .or_default()
                        .push(mk(id, a.runs.max(1), vec![0, 0], 0x5EED ^ id as u32, 2048, k));
                    meta.insert(id, (si, "stress", None));
                }
                id += 1;
                if let Some(h) = s.hw_commit_kernels.get(&b) {
                    groups
                        .entry(group)
                        .or_default()
                        .push(mk(id, a.runs.max(1), vec![0, 0], 0x5EED ^ id as u32, 2048, h));
                    meta.insert(id, (si, "stress-hw-commit", None));
                    id += 1;
                }
            }
            if a.replay {
                for (ti, t) in s.traces.iter().enumerate() {
                    let sched = replay_schedule(&s.model, &t.actions);
                    match s.hw_barrier_kernels.get(&b).filter(|_| replay_returns(&s.model, &t.actions)) {
                        Some(h) => {
                            let mut j = mk(id, replay_blocks, sched, 1, 0, h);
                            j.hang_ms = hang_limit(s);
                            groups.entry(group).or_default().push(j);
                            meta.insert(id, (si, "replay-hw-barrier", Some(ti)));
                        }
                        None => {
                            groups.entry(group).or_default().push(mk(id, replay_blocks, sched, 1, 0, k));
                            meta.insert(id, (si, "replay", Some(ti)));
                        }
                    }
                    id += 1;
                }
            }
        }
        let budget = Duration::from_secs_f64(a.budget.kernel_seconds);
        let specs_ro: &[SpecPlan] = specs;
        let progress = Progress::new(b, &meta);
        // Judging runs beside the kernels: a spec whose jobs are all in is judged by a worker
        // (a replay that left its trace enumerates what the model allows from where it left,
        // which can take seconds) while the child runs the next spec's launches.
        let done_specs = std::sync::Mutex::new(by_spec);
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Vec<(usize, JobResult)>)>();
        let rx = std::sync::Mutex::new(rx);
        let earlier: &[Case] = cases;
        let last_save = std::sync::Mutex::new(Instant::now());
        let save = std::sync::Mutex::new(&mut *save);
        // Specs being judged (since when), specs handed to the judges, specs judged.
        let judging: std::sync::Mutex<BTreeMap<usize, Instant>> = std::sync::Mutex::new(BTreeMap::new());
        let judged = std::sync::atomic::AtomicUsize::new(0);
        let mut sent = 0usize;
        let workers = std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1).clamp(1, 8);
        let working = std::sync::atomic::AtomicUsize::new(workers);
        let alive = &working;
        let mut stage = StageTime::default();
        let stage_began = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    // Counted down however the worker ends, so that the wait below ends too.
                    struct Gone<'a>(&'a std::sync::atomic::AtomicUsize);
                    impl Drop for Gone<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                    let _gone = Gone(alive);
                    loop {
                        let Ok((si, results)) = rx.lock().unwrap().recv() else { break };
                        judging.lock().unwrap().insert(si, Instant::now());
                        let s = &specs_ro[si];
                        let mine: Vec<Case> = results
                            .into_iter()
                            .map(|(jid, res)| {
                                let (_, mode, trace) = meta[&jid];
                                let k = match mode {
                                    "stress-hw-barrier" | "replay-hw-barrier" => &s.hw_barrier_kernels[&b],
                                    _ => s.kernels[&b].as_ref().unwrap(),
                                };
                                let blocks = if mode.starts_with("stress") { a.runs.max(1) } else { replay_blocks } as usize;
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| judge_case(s, k, b, mode, trace, res, blocks, a)))
                                    .unwrap_or_else(|p| {
                                        skip_case(s, b, mode, format!("model error: judging: {}", crate::plan::panic_text(&*p)))
                                    })
                            })
                            .collect();
                        eprintln!("{}", progress.spec_line(s, &mine));
                        let mut done = done_specs.lock().unwrap();
                        done.entry(si).or_default().extend(mine);
                        judging.lock().unwrap().remove(&si);
                        judged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        // The report stays current (a killed run leaves what it finished), written
                        // at most every two seconds.
                        let mut last = last_save.lock().unwrap();
                        if last.elapsed() >= Duration::from_secs(2) {
                            let snapshot: Vec<Case> = earlier.iter().cloned().chain(done.values().flatten().cloned()).collect();
                            drop(done);
                            (save.lock().unwrap())(specs_ro, &snapshot);
                            *last = Instant::now();
                        }
                    }
                });
            }
            let mut pending: BTreeMap<usize, Vec<(usize, JobResult)>> = BTreeMap::new();
            let mut left: BTreeMap<usize, usize> = BTreeMap::new();
            for &(si, _, _) in meta.values() {
                *left.entry(si).or_default() += 1;
            }
            // The specs the model took longest over first (their replays are the slowest to judge,
            // and judging runs beside the kernels): in the 2026-12-01 run the slowest spec came
            // last, and judging it after every kernel had run took 12 to 17 s of the wall per backend.
            let weight = |si: usize| {
                let t = &specs_ro[si].seconds;
                t.get("model").copied().unwrap_or(0.0) + t.get("traces").copied().unwrap_or(0.0)
            };
            let mut ordered: Vec<(usize, Vec<Job>)> = std::mem::take(&mut groups).into_iter().collect();
            for (_, jobs) in &mut ordered {
                // Stable: a spec's jobs stay together and in their order.
                jobs.sort_by(|x, y| weight(y.spec).total_cmp(&weight(x.spec)).then(x.spec.cmp(&y.spec)));
            }
            let heaviest = |jobs: &[Job]| jobs.iter().map(|j| weight(j.spec)).fold(0.0, f64::max);
            ordered.sort_by(|x, y| heaviest(&y.1).total_cmp(&heaviest(&x.1)));
            for (c, jobs) in ordered {
                let Ok(ptx) = &ptx_of[&c] else { continue };
                let mut jf = JobFile {
                    ptx: ptx.clone(),
                    results_dir: work.clone(),
                    jobs,
                    start: 0,
                };
                run_jobs(&mut jf, &format!("{}-{c}", b.name()), &work, budget, &mut |ev| match ev {
                    ChildEvent::Ready(d) => {
                        stage.children += 1;
                        stage.loading += d;
                    }
                    ChildEvent::Result(job, res) => {
                        if let JobResult::Words(_, Some(d)) = &res {
                            stage.launches += *d;
                        }
                        progress.job_done();
                        pending.entry(job.spec).or_default().push((job.id, res));
                        let n = left.get_mut(&job.spec).expect("every job's spec is counted");
                        *n -= 1;
                        if *n == 0 {
                            sent += 1;
                            let _ = tx.send((job.spec, pending.remove(&job.spec).unwrap_or_default()));
                        }
                    }
                    ChildEvent::Waiting(job, spent) => eprintln!("{}", progress.waiting_line(&specs_ro[job.spec], spent)),
                });
            }
            // Jobs that never reported (a child that could not be started): judged as faults.
            for (si, mut got) in std::mem::take(&mut pending) {
                for (&jid, &(s2, _, _)) in &meta {
                    if s2 == si && !got.iter().any(|(j, _)| *j == jid) {
                        got.push((jid, JobResult::Fault("no result".into())));
                    }
                }
                sent += 1;
                let _ = tx.send((si, got));
            }
            drop(tx);
            // The kernels are done; the last specs may still be judged: say which, as often.
            let mut spoke = Instant::now();
            while judged.load(std::sync::atomic::Ordering::Relaxed) < sent && alive.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                std::thread::sleep(Duration::from_millis(100));
                if spoke.elapsed() >= crate::child::HEARTBEAT {
                    let now: Vec<(String, f64)> = judging
                        .lock()
                        .unwrap()
                        .iter()
                        .map(|(&si, t)| (specs_ro[si].display.clone(), t.elapsed().as_secs_f64()))
                        .collect();
                    eprintln!("{}", progress.judging_line(&now));
                    spoke = Instant::now();
                }
            }
        });
        eprintln!("{}", stage.line(b, meta.len(), stage_began.elapsed()));
        let done = done_specs.into_inner().unwrap();
        cases.extend(done.into_values().flatten());
        (save.into_inner().unwrap())(specs, cases);
    }
    for s in specs.iter_mut().filter(|s| s.ready()) {
        s.status = "ran".into();
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Where a backend's kernel stage spent its wall: the children's starts (process, context, the
/// module's eager load) and the launches themselves; the rest is the host between launches.
#[derive(Default)]
struct StageTime {
    children: usize,
    loading: Duration,
    launches: Duration,
}

impl StageTime {
    fn line(&self, b: Backend, jobs: usize, wall: Duration) -> String {
        format!(
            "gpu run: kernels {} done: {jobs} jobs in {:.1} s; {} children, {:.1} s from their start to their module loaded; launches {:.1} s",
            b.name(),
            wall.as_secs_f64(),
            self.children,
            self.loading.as_secs_f64(),
            self.launches.as_secs_f64()
        )
    }
}

/// The observed outcomes of a job with what each run left behind, their block counts, and the
/// flags they raised.
pub fn observations(k: &Kernel, res: &JobResult, blocks: usize) -> (Vec<((Outcome, End), usize)>, Flags) {
    let mut flags = Flags::default();
    let mut counts: BTreeMap<(Outcome, End), usize> = BTreeMap::new();
    match res {
        JobResult::Words(w, _) => {
            for blk in 0..blocks.min(w.len() / k.block_words.max(1)) {
                let (o, e, f) = outcome_of(k, w, blk);
                flags.merge(f);
                *counts.entry((o, e)).or_default() += 1;
            }
        }
        JobResult::Fault(_) => {
            flags.fault = true;
            let fault = Outcome {
                fault: true,
                ..Outcome::default()
            };
            counts.insert((fault, End::default()), blocks);
        }
        JobResult::OverBudget(_) | JobResult::Hung(_) => {}
    }
    (counts.into_iter().collect(), flags)
}

#[allow(clippy::too_many_arguments)]
fn judge_case(s: &SpecPlan, k: &Kernel, b: Backend, mode: &str, trace: Option<usize>, res: JobResult, blocks: usize, a: &Settings) -> Case {
    if let JobResult::OverBudget(why) = &res {
        return skip_case(s, b, mode, format!("not run (budget: {why})"));
    }
    let allowed = s.allowed.as_ref().expect("a ready spec has its allowed set");
    let (seen, flags) = observations(k, &res, blocks);
    let obs: Vec<(Outcome, usize)> = seen.iter().map(|((o, _), n)| (o.clone(), *n)).collect();
    let mut ends: Vec<End> = seen.iter().map(|((_, e), _)| e.clone()).collect();
    if s.vars_racy && ends.iter().any(|e| !e.vars.is_empty()) {
        // Vars are not widened for races: their end values are not judged in a racy spec.
        for e in &mut ends {
            e.vars.clear();
        }
    }
    let mut note = s.notes.iter().map(|n| format!("{n}; ")).collect::<String>();
    if let JobResult::Fault(e) = &res {
        note.push_str(&format!("launch fault: {e}; "));
    }
    if has_commit(&s.model.proto) && mode != "stress-hw-commit" {
        note.push_str("commit emulated (the model's convergence rule); ");
    }
    if has_wgmma(&s.model.proto) {
        match &k.wgmma_emulated {
            // wgmma.mma_async is executed by a whole warpgroup (128 threads, .sync.aligned) and the
            // spec's agent is one thread (or one warp's lanes): a helper warpgroup issues its wgmmas.
            // A warpgroup-scoped group is issued by the helper once the last of the warpgroup's
            // warps issued it: the warps' joint issue is the generator's, hence "emulated".
            None if crate::codegen::has_warpgroup_wgmma(&s.model.proto) => note.push_str(
                "wgmma on the hardware (wgmma.mma_async by one helper warpgroup per spec warpgroup, over descriptors of the spec's buffers); the warpgroup's joint issue emulated (a group goes out once the last of its warps issued it); ",
            ),
            None => note.push_str(
                "wgmma on the hardware (wgmma.mma_async by a helper warpgroup per issuing agent, over descriptors of the spec's buffers); ",
            ),
            Some(why) => note.push_str(&format!("wgmma emulated (bulk stores of its operands: {why}); ")),
        }
    }
    let hw_form = mode.ends_with("-hw-barrier");
    if hw_form && crate::codegen::keeper_form(&s.model.proto) {
        note.push_str("named barriers on the hardware (barrier.sync / barrier.arrive, unbounded: a launch that does not return is ended by the host; a keeper warp per CTA holds its shared memory until the cluster finished); ");
    } else if hw_form && s.model.proto.cluster > 1 {
        note.push_str("cluster barrier on the hardware (barrier.cluster, unbounded: a launch that does not return is ended by the host); ");
    } else if hw_form {
        note.push_str("execution barriers on the hardware (barrier.sync / barrier.arrive, unbounded: a launch that does not return is ended by the host); ");
    }
    if let (true, JobResult::Words(_, Some(took))) = (hw_form, &res) {
        note.push_str(&format!("the launch returned in {:.2} s; ", took.as_secs_f64()));
    }
    for what in software_barriers(&s.model.proto, hw_form) {
        note.push_str(&format!("{what} emulated (a bounded software barrier); "));
    }
    let proto = &s.model.proto;
    let uniform: Vec<&str> = proto.roles.iter().filter(|r| r.uniform).map(|r| r.name.as_str()).collect();
    if !uniform.is_empty() {
        note.push_str(&format!("uniform: {} lanes per agent ({}); ", proto.warp_size, uniform.join(", ")));
    }
    let mut case = Case {
        spec: s.display.clone(),
        backend: b.name().into(),
        mode: mode.into(),
        runs: obs.iter().map(|(_, n)| n).sum(),
        observed: seen.iter().map(|((o, e), n)| (format!("{o}{}", e.suffix()), *n)).collect(),
        ..Case::default()
    };
    if let JobResult::Hung(why) = &res {
        note.push_str(&format!("{why}; "));
        if let Some(t) = trace.map(|i| &s.traces[i]) {
            note.push_str(&format!("trace: {} ({} steps) from {}; ", t.label, t.actions.len(), t.source));
        }
        let j = judge_launch_hung(allowed);
        case.runs = blocks;
        case.observed = BTreeMap::from([(LAUNCH_HUNG.to_string(), blocks)]);
        case.allowed = serde_json::json!(allowed.summary());
        case.bug_manifested = s.has_bug.then_some(true);
        case.verdict = Some(j.verdict);
        case.why = j.why;
        case.blocks = Some(j.tally);
    } else if mode.starts_with("stress") {
        let (j, litmus) = judge_stress(allowed, &obs, &ends);
        case.allowed = serde_json::json!(allowed.summary());
        case.bug_manifested = s.has_bug.then_some(flags.bug_shows());
        case.verdict = Some(j.verdict);
        case.why = j.why;
        case.blocks = Some(j.tally);
        case.litmus = Some(litmus);
    } else {
        let t = &s.traces[trace.expect("a replay job has its trace")];
        note.push_str(&format!("trace: {} ({} steps) from {}; ", t.label, t.actions.len(), t.source));
        match forced(&s.model, &t.actions) {
            Ok(fc) => {
                let deadline = Instant::now() + Duration::from_secs_f64(a.budget.outcome_seconds);
                let (j, mut info) = judge_replay(
                    &s.model,
                    &t.actions,
                    &fc,
                    allowed,
                    &obs,
                    &ends,
                    a.budget.outcome_states,
                    Some(deadline),
                );
                info.trace = t.label.clone();
                info.trace_source = t.source.clone();
                note.push_str(&format!(
                    "reproduced as forced: {}/{}; {} left the trace; ",
                    info.reproduced, info.blocks, info.left
                ));
                case.allowed = serde_json::json!(info.forced);
                case.bug_manifested = t.is_violation.then_some(flags.bug_shows());
                case.verdict = Some(j.verdict);
                case.why = j.why;
                case.blocks = Some(j.tally);
                case.replay = Some(info);
            }
            Err(e) => {
                case.why = format!("model error: the trace does not replay in the model: {e}");
            }
        }
        let _ = as_forced;
    }
    case.observed_within_model = case.verdict.map(|v| v != Verdict::Outside);
    let f = flags.describe();
    if !f.is_empty() {
        note.push_str(&format!("seen: {f}"));
    }
    case.note = note.trim_end_matches("; ").to_string();
    case
}

/// Build the report from what has run so far and write it (JSON and Markdown).
fn write_report(out: &std::path::Path, device: &str, driver: &str, t0: Instant, specs: &[SpecPlan], cases: Vec<Case>) -> Report {
    let spec_rows = specs
        .iter()
        .map(|s| SpecRow {
            spec: s.display.clone(),
            status: s.status.clone(),
            allowed: s.allowed.as_ref().map(|a| a.summary()).unwrap_or_default(),
            traces: s
                .traces
                .iter()
                .map(|t| format!("{} ({} steps) from {}", t.label, t.actions.len(), t.source))
                .collect(),
            seconds: s.seconds.clone(),
        })
        .collect();
    let report = Report {
        device: device.to_string(),
        driver: driver.to_string(),
        date: today(),
        wall_seconds: t0.elapsed().as_secs_f64(),
        specs: spec_rows,
        cases,
    };
    if let Err(e) = report.write(out) {
        eprintln!("error: cannot write {}: {e}", out.display());
    }
    report
}

/// The kernel stage's progress lines: one per spec as it is judged, and one while a child is
/// silent (at most every [`crate::child::HEARTBEAT`]), each with the stage, the spec, the jobs
/// done of the backend and the time since the stage began.
struct Progress {
    backend: Backend,
    jobs: usize,
    done: std::sync::atomic::AtomicUsize,
    specs_done: std::sync::atomic::AtomicUsize,
    specs: usize,
    began: Instant,
}

impl Progress {
    fn new(backend: Backend, meta: &BTreeMap<usize, (usize, &'static str, Option<usize>)>) -> Progress {
        let specs: std::collections::BTreeSet<usize> = meta.values().map(|m| m.0).collect();
        Progress {
            backend,
            jobs: meta.len(),
            done: 0.into(),
            specs_done: 0.into(),
            specs: specs.len(),
            began: Instant::now(),
        }
    }

    fn job_done(&self) {
        self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn head(&self) -> String {
        format!(
            "gpu run: kernels {} [{}/{} jobs, {:.1} s]",
            self.backend.name(),
            self.done.load(std::sync::atomic::Ordering::Relaxed),
            self.jobs,
            self.began.elapsed().as_secs_f64()
        )
    }

    /// A spec judged: its cases' verdicts.
    fn spec_line(&self, s: &SpecPlan, mine: &[Case]) -> String {
        let n = self.specs_done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let v: Vec<String> = mine
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c.mode,
                    c.verdict.map(|v| v.name()).unwrap_or(if c.why.is_empty() { "-" } else { &c.why })
                )
            })
            .collect();
        format!("{} spec {n}/{} {}: {}", self.head(), self.specs, s.display, v.join(", "))
    }

    /// Every kernel has run; these specs are still being judged (for so many seconds).
    fn judging_line(&self, specs: &[(String, f64)]) -> String {
        let v: Vec<String> = specs.iter().map(|(s, t)| format!("{s} ({t:.1} s)")).collect();
        format!("{} judging {}", self.head(), v.join(", "))
    }

    /// A child silent for a while: the spec whose launch is in progress.
    fn waiting_line(&self, s: &SpecPlan, spent: Duration) -> String {
        format!("{} running {} ({:.1} s on it so far)", self.head(), s.display, spent.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::balance_chunks;

    /// The longest-first rule's bound: no module holds more code than the average share plus the
    /// largest spec, and every ready spec gets a module.
    #[test]
    fn balanced_modules_hold_at_most_the_average_plus_the_largest_spec() {
        let weights = [900usize, 40, 40, 700, 35, 30, 25, 20, 500, 15, 10, 5, 300, 3, 2, 1];
        let ready: Vec<usize> = (0..weights.len()).filter(|i| i % 5 != 4).collect();
        for chunks in 1..=6 {
            let of = balance_chunks(&ready, chunks, weights.len(), |si| weights[si]);
            let mut load = vec![0usize; chunks];
            for &si in &ready {
                assert!(of[si] < chunks);
                load[of[si]] += weights[si];
            }
            let total: usize = ready.iter().map(|&si| weights[si]).sum();
            let largest = ready.iter().map(|&si| weights[si]).max().unwrap();
            assert!(*load.iter().max().unwrap() <= total / chunks + largest, "{chunks}: {load:?}");
            // Cut by count instead, the first module would take 900 + 40 + 40 + 700 at 4 chunks.
            if chunks == 4 {
                assert!(*load.iter().max().unwrap() <= 900, "{load:?}");
            }
        }
    }
}
