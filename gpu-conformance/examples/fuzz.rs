//! Stable fuzz loop over the whole pipeline (`phasecheck_gpu::fuzz::pipeline`), for machines
//! without a nightly toolchain; see docs/fuzzing.md.
//!
//!   cargo run --release -p phasecheck-gpu --example fuzz -- EXECUTIONS [SEED]
//!
//! Mutates the seed corpus (specs/, tests/malformed/, gpu-conformance/tests/fixtures/) with the
//! language's dictionary; inputs that get through lowering join the pool, so later mutations start
//! deeper. Runs on a thread with a 2 MiB stack (a test thread's), catches panics, and writes every
//! failing input to fuzz-crashes/. An input that runs longer than 20 s is written to
//! fuzz-crashes/slow-*.phase and the process aborts. Deterministic for a given SEED.

use phasecheck_gpu::fuzz::{dictionary, mutate, pipeline, seeds, Reached, Rng};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let execs: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let corpus = seeds(&[
        root.join("specs"),
        root.join("tests/malformed"),
        root.join("gpu-conformance/tests/fixtures"),
    ]);
    assert!(!corpus.is_empty(), "no seeds found under {}", root.display());
    let crashes = root.join("fuzz-crashes");
    let current: Arc<Mutex<(u64, Vec<u8>)>> = Arc::new(Mutex::new((0, Vec::new())));
    let started = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    {
        // Hang detection: an execution that does not finish in 20 s.
        let (current, started, crashes) = (current.clone(), started.clone(), crashes.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let s = started.load(Ordering::Relaxed);
            if s != 0 && t0.elapsed().as_millis() as u64 - s > 20_000 {
                let (i, input) = current.lock().unwrap().clone();
                let _ = std::fs::create_dir_all(&crashes);
                let p = crashes.join(format!("slow-{seed}-{i}.phase"));
                let _ = std::fs::write(&p, &input);
                eprintln!("execution {i} ran more than 20 s: input written to {}", p.display());
                std::process::abort();
            }
        });
    }
    std::panic::set_hook(Box::new(|_| {}));
    let worker = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let dict = dictionary();
            let mut rng = Rng::new(seed);
            let mut pool: Vec<Vec<u8>> = corpus.clone();
            let mut reached: BTreeMap<Reached, u64> = BTreeMap::new();
            let mut failures = 0u64;
            let mut last = Instant::now();
            for i in 0..execs {
                let base = &pool[rng.below(pool.len())];
                let input = mutate(base, &mut rng, &dict, &corpus, 4);
                *current.lock().unwrap() = (i, input.clone());
                started.store((t0.elapsed().as_millis() as u64).max(1), Ordering::Relaxed);
                let r = std::panic::catch_unwind(|| pipeline(&input));
                started.store(0, Ordering::Relaxed);
                match r {
                    Ok(k) => {
                        *reached.entry(k).or_default() += 1;
                        if k == Reached::Searched && input.len() < 8192 {
                            if pool.len() < 4096 {
                                pool.push(input);
                            } else {
                                let j = rng.below(pool.len());
                                pool[j] = input;
                            }
                        }
                    }
                    Err(e) => {
                        failures += 1;
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        let _ = std::fs::create_dir_all(&crashes);
                        let p = crashes.join(format!("crash-{seed}-{i}.phase"));
                        let _ = std::fs::write(&p, &input);
                        eprintln!("execution {i}: panic: {msg}\n  input: {}", p.display());
                    }
                }
                if last.elapsed() >= Duration::from_secs(30) {
                    last = Instant::now();
                    eprintln!(
                        "{} executions, {:.0}/s, {failures} failures, reached {reached:?}",
                        i + 1,
                        (i + 1) as f64 / t0.elapsed().as_secs_f64()
                    );
                }
            }
            (reached, failures)
        })
        .unwrap();
    let (reached, failures) = worker.join().unwrap();
    println!(
        "fuzz: {execs} executions (seed {seed}) in {:.0} s: {failures} failures; reached {reached:?}",
        t0.elapsed().as_secs_f64()
    );
    std::process::exit(if failures == 0 { 0 } else { 1 });
}
