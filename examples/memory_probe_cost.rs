//! What the two ways of measuring memory for `--max-memory` cost, and what each sees
//! (BENCHMARKS.md, "Memory bound"):
//! - the resident set from `/proc/self/statm` (kept: it is what the OS will OOM-kill on), and
//! - a counting global allocator wrapping mimalloc (measured here, not kept: it counts the bytes
//!   asked for, not the pages the allocator holds).
//!
//!   cargo run --release --example memory_probe_cost
//!
//! Checks benches/double_buffer_scaling.phase (ITERS=8 CONSUMERS=4 STAGES=3, 109,926 states) three
//! times with counting off and three with counting on, and times 100,000 statm reads.

use phasecheck_model::rt::Model;
use phasecheck_model::spec::load;
use phasecheck_verifier::{bounds, check, CheckOptions};
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;
static COUNT: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = mimalloc::MiMalloc.alloc(l);
        if COUNT.load(Ordering::Relaxed) && !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if COUNT.load(Ordering::Relaxed) {
            LIVE.fetch_sub(l.size().min(LIVE.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
        mimalloc::MiMalloc.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = mimalloc::MiMalloc.realloc(p, l, new);
        if COUNT.load(Ordering::Relaxed) && !q.is_null() {
            let now = LIVE.fetch_add(new, Ordering::Relaxed) + new;
            PEAK.fetch_max(now, Ordering::Relaxed);
            LIVE.fetch_sub(l.size().min(LIVE.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

fn main() {
    let params = [("ITERS".to_string(), 8), ("CONSUMERS".to_string(), 4), ("STAGES".to_string(), 3)];
    let spec = load(std::path::Path::new("benches/double_buffer_scaling.phase"), &params).expect("run from the repository root");
    let model = Model::new(spec.proto.clone());
    let opts = CheckOptions::default();
    for counting in [false, true, false, true, false, true] {
        COUNT.store(counting, Ordering::Relaxed);
        LIVE.store(0, Ordering::Relaxed);
        PEAK.store(0, Ordering::Relaxed);
        let rss0 = bounds::resident_bytes().unwrap_or(0);
        let t = Instant::now();
        let r = check(&model, &opts);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "counting {counting:5}: {} states in {secs:.3} s; peak counted {} MiB, peak resident so far {} MiB (at start {} MiB)",
            r.stats.states,
            PEAK.load(Ordering::Relaxed) >> 20,
            bounds::peak_resident_bytes().unwrap_or(0) >> 20,
            rss0 >> 20
        );
    }
    COUNT.store(false, Ordering::Relaxed);
    let n = 100_000;
    let t = Instant::now();
    let mut sum = 0usize;
    for _ in 0..n {
        sum = sum.wrapping_add(bounds::resident_bytes().unwrap_or(0));
    }
    println!(
        "/proc/self/statm: {:.2} us per read ({sum})",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}
