//! The partial-order reduction on the constructs of warp-specialized kernels: warp-uniform roles
//! with an elected lane, `elect()` and `syncwarp` among the lanes of one warp, named barriers
//! (`bar_sync`/`bar_arrive`), the async proxy (TMA stores and their bulk groups, wgmma operand
//! reads, proxy fences), `syncthreads`, cp.async (arrive-ons and group waits) and the
//! warp-batched `commit`, and cluster scope (remote arrivals, multicast copies, the cluster
//! barrier). Each generator plants the mistakes users make with its construct; each
//! law says the reduced search finds exactly the kinds of the unreduced one (docs/model.md,
//! "Partial-order reduction"). The footprint defects of `Mutant::FOOTPRINT_DEFECTS` (each forgets
//! one construct's conflicts) must each lose a kind on some generated protocol, so these laws can
//! fail. The async proxy has no such defect: a write of a buffer unordered with an asynchronous
//! read of it races in either order (with the read in flight, or with the read its retiring wait
//! records), so forgetting that conflict changes states and messages, never kinds.

// The shared CLI-test module also sets the binary's allocator (mimalloc) for the searches here.
mod common;

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::{Model, Mutant};
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// A small deterministic choice source: generated protocols are functions of one seed, so the
/// laws (proptest) and the mutant hunts (a plain loop over seeds) draw from the same space.
struct Dice(u64);

impl Dice {
    fn pick(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }

    /// Mistakes are rarer than the right statement: 0 (right) half of the time.
    fn mistake(&mut self, n: u64) -> u64 {
        if self.pick(2) == 0 {
            0
        } else {
            self.pick(n)
        }
    }
}

/// A warp-specialized pipeline: an elected producer lane of a uniform warp issues TMA-style
/// copies; consumer warps (uniform, or the lanes of one warp) wait, read and release.
fn uniform_pipeline(seed: u64) -> String {
    let mut d = Dice(seed);
    let stages = 1 + d.pick(2);
    let iters = 1 + d.pick(3);
    let uniform = d.pick(4) != 0;
    let warps = if uniform { 1 + d.pick(2) } else { 1 };
    let release = d.mistake(4);
    let pwait = d.mistake(3);
    let cwait = d.mistake(3);
    let bytes = if d.mistake(2) == 1 { 8 } else { 16 };
    // Elected release: one arrival per warp; a whole warp's release: one per lane.
    let per_warp = if release == 1 { 2 } else { 1 };
    let count = match d.mistake(3) {
        1 => warps * per_warp + 1,
        _ => warps * per_warp,
    };
    let pw = match pwait {
        0 => "      if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) }\n",
        1 => "      if i >= STAGES { wait_parity(empty[s], (i / STAGES) % 2) }\n",
        _ => "",
    };
    let cw = match cwait {
        0 => "    wait_parity(full[s], (i / STAGES) % 2)\n",
        1 => "    wait_parity(full[s], 0)\n",
        _ => "",
    };
    let read = "    read(slot[s], expect = i)\n";
    let elected_arrive = "    let e = elect()\n    if e == 1 { arrive(empty[s]) }\n";
    let body = match release {
        0 => format!("{cw}{read}{elected_arrive}"),
        1 => format!("{cw}{read}    arrive(empty[s])\n"),
        2 => format!("{cw}{elected_arrive}{read}"),
        _ => format!("{cw}{read}"),
    };
    // A warp that reads the first tile once: stale if the producer refilled its slot first,
    // which takes the consumers' release (counted once per lane of a uniform warp).
    let watcher = if d.pick(2) == 0 {
        "\nrole watcher warps 1 uniform {\n  wait_parity(full[0], 0)\n  read(slot[0], expect = 0)\n}\n"
    } else {
        ""
    };
    let consumer = if uniform {
        format!("role consumer warps {warps} uniform {{\n")
    } else {
        // The lanes of one warp: each lane's elect() may be the elected one.
        "role consumer[2] {\n".to_string()
    };
    format!(
        "protocol ws\nexpect holds\nparam STAGES = {stages}\nparam ITERS = {iters}\nwarp_size 2\n\n\
         barrier full[STAGES] count 1\nbarrier empty[STAGES] count {count}\nbuffer slot[STAGES] bytes 16\n\n\
         role producer warps 1 uniform {{\n  let e = elect()\n  if e == 1 {{\n    for i in 0..ITERS {{\n      let s = i % STAGES\n{pw}\
               arrive_expect_tx(full[s], {bytes})\n      copy_async(slot[s], full[s], version = i)\n    }}\n  }}\n}}\n\n\
         {consumer}  for i in 0..ITERS {{\n    let s = i % STAGES\n{body}  }}\n}}\n{watcher}"
    )
}

/// The lanes of one warp meet at `elect()` and `syncwarp`: the elected lane writes and signals,
/// the others read after the warp's meeting, a thread of another warp reads after a barrier.
fn warp_election(seed: u64) -> String {
    let mut d = Dice(seed);
    let lanes = 2 + d.pick(2);
    // The elected lane writes its lane number (readers expect lane 0's) or a constant.
    let (value, seen) = if d.pick(2) == 0 { ("1", 1) } else { ("lane", 0) };
    let sync = if d.mistake(2) == 0 { "  syncwarp\n" } else { "" };
    let rwait = if d.mistake(2) == 0 { "  wait_parity(b, 0)\n" } else { "" };
    let pre = match d.mistake(3) {
        1 => "  read(x, expect = 0)\n",
        2 => "  let f = elect()\n",
        _ => "",
    };
    let second = if d.pick(2) == 0 {
        "  let g = elect()\n  if g == 1 { arrive(c) }\n"
    } else {
        ""
    };
    format!(
        "protocol election\nexpect holds\nwarp_size 4\n\n\
         barrier b count 1\nbarrier c count 1\nbuffer x bytes 4\n\n\
         role w[{lanes}] {{\n{pre}  let e = elect()\n  if e == 1 {{ write(x, {value})\n    arrive(b) }}\n{sync}  read(x, expect = {seen})\n{second}}}\n\n\
         role other warps 1 {{\n  if lane == 0 {{\n{rwait}    read(x, expect = {seen})\n  }}\n}}\n"
    )
}

/// Named barriers ordering a writer warp and reader warps (uniform agents, or the lanes of a
/// warp), over several rounds, with the mistakes of their use: a bar_arrive where a bar_sync
/// belongs, an arrival before the write, a count that mixes with another, no acknowledgement.
fn named_barriers(seed: u64) -> String {
    let mut d = Dice(seed);
    let rounds = 1 + d.pick(3);
    let uniform = d.pick(3) != 0;
    let third = d.pick(2) == 0;
    let warps = if third { 3 } else { 2 };
    let count = 2 * warps;
    let signal = d.mistake(4);
    let take = d.mistake(3);
    let ack = d.mistake(3);
    let role = |name: &str| {
        if uniform {
            format!("role {name} warps 1 uniform {{\n")
        } else {
            format!("role {name}[2] {{\n")
        }
    };
    let write = if uniform {
        "    write(x[i % 2], i)\n"
    } else {
        "    if lane == 0 { write(x[i % 2], i) }\n"
    };
    let arrive = match signal {
        0 => format!("{write}    bar_arrive(1, {count})\n"),
        1 => format!("{write}    bar_sync(1, {count})\n"),
        2 => format!("    bar_arrive(1, {count})\n{write}"),
        _ => format!("{write}    bar_arrive(1, {})\n", count + 2),
    };
    let wait_ack = match ack {
        0 => format!("    bar_sync(2, {count})\n"),
        1 => String::new(),
        _ => format!("    bar_sync(2, {})\n", count - 2),
    };
    let taking = match take {
        0 => format!("    bar_sync(1, {count})\n"),
        1 => format!("    bar_arrive(1, {count})\n"),
        _ => String::new(),
    };
    let reader = |name: &str| {
        format!(
            "{}  for i in 0..R {{\n{taking}    read(x[i % 2], expect = i)\n    bar_arrive(2, {count})\n  }}\n}}\n\n",
            role(name)
        )
    };
    let mut src = format!(
        "protocol named\nexpect holds\nparam R = {rounds}\nwarp_size 2\n\nbuffer x[2] bytes 4\n\n{}  for i in 0..R {{\n{arrive}{wait_ack}  }}\n}}\n\n",
        role("writer")
    );
    src += &reader("reader");
    if third {
        src += &reader("second");
    }
    src
}

/// The async proxy: a thread stages tiles for TMA stores (fence, store, commit, wait before the
/// rewrite), another hands a buffer to a wgmma consumer and rewrites it after the release, and a
/// third writes the staging buffer once the storer signals.
fn async_proxy(seed: u64) -> String {
    let mut d = Dice(seed);
    let rounds = 1 + d.pick(3);
    let keep = d.mistake(2);
    let fence = if d.mistake(2) == 0 { "    fence_proxy_async()\n" } else { "" };
    let commit = if d.mistake(2) == 0 { "    commit_group()\n" } else { "" };
    let tail = match d.mistake(3) {
        0 => "  wait_group_read(0)\n  arrive(done)\n",
        1 => "  arrive(done)\n  wait_group_read(0)\n",
        _ => "  arrive(done)\n",
    };
    let mfence = if d.mistake(2) == 0 { "    fence_proxy_async()\n" } else { "" };
    let mwait = match d.mistake(3) {
        0 => "    wgmma_wait(0)\n    arrive(empty)\n",
        1 => "    arrive(empty)\n    wgmma_wait(0)\n",
        _ => "    wgmma_wait(1)\n    arrive(empty)\n",
    };
    let pwait = if d.mistake(2) == 0 {
        "    if i > 0 { wait_parity(empty, (i + 1) % 2) }\n"
    } else {
        "    if i > 0 { wait_parity(empty, i % 2) }\n"
    };
    // The wgmma hand-off, in half of the protocols (alone, the stores' cases stay small).
    let wgmma = if d.pick(2) == 0 {
        format!(
            "\nrole producer[1] {{\n  for i in 0..R {{\n{pwait}    write(a, i)\n{mfence}    arrive(full)\n  }}\n}}\n\n\
             role mma[1] {{\n  for i in 0..R {{\n    wait_parity(full, i % 2)\n    wgmma_async(a)\n{mwait}  }}\n  wgmma_wait(0)\n}}\n"
        )
    } else {
        String::new()
    };
    format!(
        "protocol proxy\nexpect holds\nparam R = {rounds}\nwarp_size 4\n\n\
         barrier full count 1\nbarrier empty count 1\nbarrier done count 1\nbuffer d bytes 16\nbuffer a bytes 16\n\n\
         role storer[1] {{\n  for i in 0..R {{\n    wait_group_read({keep})\n    write(d, i)\n{fence}    copy_store_async(d)\n{commit}  }}\n{tail}}}\n\n\
         role late[1] {{\n  wait_parity(done, 0)\n  write(d, 99)\n}}\n{wgmma}"
    )
}

/// Fences of other threads: a writer stages a tile and signals; a fencer acquires it, fences (or
/// not) and signals again; a storer issues the TMA store after the fencer's signal (or, by
/// mistake, after the writer's alone, unordered with the fence), retires it, and may rewrite the
/// tile; a bystander may fence unordered with everything. The footprint a fence's step keeps is
/// the flags it can clear in the state (docs/model.md, "The async proxy").
fn fence_handoff(seed: u64) -> String {
    let mut d = Dice(seed);
    let fence = if d.mistake(2) == 0 { "  fence_proxy_async()\n" } else { "" };
    let after = if d.mistake(2) == 0 { "go" } else { "ready" };
    let rewrite = match d.mistake(3) {
        0 => "  wait_group_read(0)\n  write(d, 2)\n",
        1 => "  write(d, 2)\n  wait_group_read(0)\n",
        _ => "  wait_group_read(0)\n",
    };
    let twice = if d.pick(2) == 0 { "  write(d, 0)\n" } else { "" };
    let bystander = if d.pick(2) == 0 {
        "\nrole bystander[1] {\n  fence_proxy_async()\n}\n"
    } else {
        ""
    };
    let own = if d.pick(3) == 0 {
        "  write(e, 1)\n  fence_proxy_async()\n  copy_store_async(e)\n  commit_group()\n  wait_group_read(0)\n"
    } else {
        ""
    };
    format!(
        "protocol fences\nexpect holds\nwarp_size 4\n\n\
         barrier ready count 1\nbarrier go count 1\nbuffer d bytes 16\nbuffer e bytes 16\n\n\
         role writer[1] {{\n{twice}  write(d, 1)\n  arrive(ready)\n}}\n\n\
         role fencer[1] {{\n  wait_parity(ready, 0)\n{fence}  arrive(go)\n{own}}}\n\n\
         role storer[1] {{\n  wait_parity({after}, 0)\n  copy_store_async(d)\n  commit_group()\n{rewrite}}}\n{bystander}"
    )
}

/// A warpgroup-scoped MMA pipeline: an elected producer lane fills a stage; the warps of a
/// uniform consumer warpgroup issue one MMA together (`warpgroup_mma`), wait for it
/// (`warpgroup_wait`) and one signalling lane releases the stage. Mistakes: the release before
/// the wait, a warp that skips the MMA, a wait that keeps the newest group, a stale operand.
fn warpgroup_pipeline(seed: u64) -> String {
    warpgroup_mma_protocol(seed, false)
}

/// The same pipeline with the operands split: each warp's MMA reads its own slice
/// `x[warp - 1]` (all loaded on one `full`), so a member's wait retires the other members' reads
/// on buffers its own agent never reads. No warp skips the MMA here.
fn warpgroup_split_operands(seed: u64) -> String {
    warpgroup_mma_protocol(seed, true)
}

fn warpgroup_mma_protocol(seed: u64, split: bool) -> String {
    let mut d = Dice(seed);
    let iters = 1 + d.pick(2);
    let signaller = 1 + d.pick(4);
    let release_first = d.mistake(3) == 1;
    let skipper = if !split && d.mistake(4) == 1 {
        format!("if warp != {} {{ ", 1 + d.pick(4))
    } else {
        String::new()
    };
    let close = if skipper.is_empty() { "" } else { " }" };
    let keep = if d.mistake(3) == 1 { 1 } else { 0 };
    let expect = if d.mistake(3) == 1 { "0" } else { "i" };
    let parity = if d.mistake(4) == 1 { "0" } else { "i % 2" };
    let release = format!("    if warp == {signaller} {{ let e = elect(); if e == 1 {{ arrive(empty) }} }}\n");
    let wait = format!("    warpgroup_wait({keep})\n");
    let (first, second) = if release_first { (&release, &wait) } else { (&wait, &release) };
    let (buffers, copies, operand) = if split {
        (
            "buffer x[4] bytes 16",
            "for w in 0..4 { copy_async(x[w], full, version = i) }",
            "x[warp - 1]",
        )
    } else {
        ("buffer a bytes 64", "copy_async(a, full, version = i)", "a")
    };
    format!(
        "protocol g\nwarp_size 32\nbarrier full count 1\nbarrier empty count 1\n{buffers}\n\
         role producer warps 1 uniform {{\n  let e = elect()\n  if e == 1 {{\n    for i in 0..{iters} {{\n\
         \x20     if i > 0 {{ wait_parity(empty, (i + 1) % 2) }}\n      arrive_expect_tx(full, 64)\n\
         \x20     {copies}\n    }}\n  }}\n}}\n\
         role mma warpgroups 1 uniform {{\n  for i in 0..{iters} {{\n    wait_parity(full, {parity})\n\
         \x20   {skipper}warpgroup_mma({operand}, expect = {expect}){close}\n{first}{second}  }}\n  warpgroup_wait(0)\n}}\n"
    )
}

/// `while` loops as kernels write them: a ring walked by counting `while` loops, waits written as
/// spins on `try_wait_parity` (CUTLASS's `ClusterBarrier::wait`) or as blocking waits, a
/// consumer that leaves its loop early by `break`, and a shared flag polled until the producer
/// sets it. Mistakes: a loop one round short, a spin on the wrong parity, a flag never set (each
/// a spin that nothing can end, or a stale read), the release before the read.
fn while_loops(seed: u64) -> String {
    let mut d = Dice(seed);
    let stages = 1 + d.pick(2);
    let iters = 1 + d.pick(3);
    let consumers = 1 + d.pick(2);
    let spin = |bar: &str, parity: &str| format!("let ok = 0\n    while ok == 0 {{ ok = try_wait_parity({bar}, {parity}) }}");
    let pbound = if d.mistake(4) == 1 { "ITERS - 1" } else { "ITERS" };
    let empty_parity = if d.mistake(4) == 1 {
        "(i / STAGES) % 2"
    } else {
        "(i / STAGES + 1) % 2"
    };
    let pwait = match d.pick(3) {
        0 => format!("    if i >= STAGES {{ wait_parity(empty[s], {empty_parity}) }}\n"),
        1 => format!("    if i >= STAGES {{\n    {}\n    }}\n", spin("empty[s]", empty_parity)),
        _ if d.mistake(3) == 1 => String::new(),
        _ => format!("    if i >= STAGES {{ wait_parity(empty[s], {empty_parity}) }}\n"),
    };
    let full_parity = if d.mistake(4) == 1 { "0" } else { "(i / STAGES) % 2" };
    let cwait = if d.pick(2) == 0 {
        format!("    {}\n", spin("full[s]", full_parity))
    } else {
        format!("    wait_parity(full[s], {full_parity})\n")
    };
    let read = "    read(slot[s], expect = i)\n";
    let release = "    arrive(empty[s])\n";
    let body = if d.mistake(4) == 1 {
        format!("{cwait}{release}{read}")
    } else {
        format!("{cwait}{read}{release}")
    };
    let early = if d.mistake(4) == 1 {
        format!("    if i == {} {{ break }}\n", d.pick(iters))
    } else {
        String::new()
    };
    let (set_flag, poll) = match d.pick(3) {
        0 => ("", ""),
        1 => ("  flag = 1\n", "  let f = 0\n  while f == 0 { f = flag }\n"),
        _ if d.mistake(3) == 1 => ("", "  let f = 0\n  while f == 0 { f = flag }\n"),
        _ => ("  flag = 1\n", ""),
    };
    format!(
        "protocol spin\nexpect holds\nparam STAGES = {stages}\nparam ITERS = {iters}\n\n\
         barrier full[STAGES] count 1\nbarrier empty[STAGES] count {consumers}\nbuffer slot[STAGES] bytes 16\nvar flag = 0\n\n\
         role producer[1] {{\n  let i = 0\n  while i < {pbound} {{\n    let s = i % STAGES\n{pwait}\
         \x20   arrive_expect_tx(full[s], 16)\n    copy_async(slot[s], full[s], version = i)\n    i = i + 1\n  }}\n{set_flag}}}\n\n\
         role consumer[{consumers}] {{\n  let i = 0\n  while i < ITERS {{\n    let s = i % STAGES\n{body}{early}    i = i + 1\n  }}\n{poll}}}\n"
    )
}

/// Roles whose code reads the thread's identity the way warp-specialized kernels do: a uniform
/// consumer role of several warps where one warp (or lane 0 of a lane role) signals, the warp
/// picks its half of the work (`(warp - 1) / 2`), and sometimes an identity read mixed with a
/// local (`warp + i`) or a per-warp buffer index keeps the warps apart. The symmetry reduction
/// groups only threads whose identity decides the same values. Mistakes: the signaller counted
/// once per warp, a read before the wait, a stale expectation for one warp.
fn identity_roles(seed: u64) -> String {
    let mut d = Dice(seed);
    let uniform = d.pick(3) != 0;
    let warps = 2 + d.pick(3);
    let iters = 1 + d.pick(2);
    let signaller = if uniform {
        format!("warp == {}", 1 + d.pick(warps))
    } else {
        "lane == 0".to_string()
    };
    let count = if d.mistake(4) == 1 { 2 } else { 1 };
    let half = if uniform { "(warp - 1) / 2" } else { "lane / 2" };
    let wait = if d.mistake(4) == 1 { "" } else { "    wait_parity(full, i % 2)\n" };
    let expect = match d.mistake(4) {
        1 => format!("i + ({half}) * 0"),
        2 if uniform => "warp + i - warp".to_string(),
        3 => "0".to_string(),
        _ => "i".to_string(),
    };
    let scratch = if uniform && d.pick(2) == 0 {
        format!("    write(w[warp - 1], i)\n")
    } else {
        String::new()
    };
    let consumer = if uniform {
        format!("role consumer warps {warps} uniform {{\n")
    } else {
        format!("role consumer[{}] {{\n", warps)
    };
    format!(
        "protocol ident\nexpect holds\nwarp_size 4\n\nbarrier full count 1\nbarrier empty count {count}\n\
         buffer slot bytes 16\nbuffer w[8] bytes 4\nbuffer h[2] bytes 4\n\n\
         role producer warps 1 uniform {{\n  let e = elect()\n  if e == 1 {{\n    for i in 0..{iters} {{\n\
         \x20     if i > 0 {{ wait_parity(empty, (i + 1) % 2) }}\n      arrive_expect_tx(full, 16)\n\
         \x20     copy_async(slot, full, version = i)\n    }}\n  }}\n}}\n\n\
         {consumer}  let g = {half}\n  for i in 0..{iters} {{\n{wait}    read(slot, expect = {expect})\n{scratch}\
         \x20   if g == 0 {{ read(h[0], expect = 0) }}\n    if {signaller} {{ arrive(empty) }}\n  }}\n}}\n"
    )
}

/// Threads that end while copies are in flight: a producer that may leave its last copies
/// unwaited, consumers that may stop early, a bystander that finishes on its own. Whether the
/// CTA's last exit comes before a landing (`lifetime`) is a property of the end state, and the
/// reduction lets an exit that cannot be the last commute with the landings (docs/model.md,
/// "Why every kind is still found"). Weak evidence in one direction: with the exit/landing
/// conflict dropped altogether, these laws still hold on 256 protocols (a landing joins a set
/// only through a conflict and every seed is a thread, so a reduced search rarely makes the
/// last exit wait for a landing); the argument in docs/model.md carries the relaxation.
fn exits_under_copies(seed: u64) -> String {
    let mut d = Dice(seed);
    let stages = 1 + d.pick(2);
    let iters = 1 + d.pick(3);
    let consumers = 1 + d.pick(2);
    let citers = if d.mistake(2) == 1 { iters - 1 } else { iters };
    let pw = match d.mistake(3) {
        0 => "    if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) }\n",
        1 => "    if i >= STAGES { wait_parity(empty[s], (i / STAGES) % 2) }\n",
        _ => "",
    };
    // The producer drains its last copy before leaving, or not (then only the consumers' waits
    // keep the CTA alive under it).
    let drain = match d.pick(3) {
        0 => "  wait_parity(full[(ITERS - 1) % STAGES], ((ITERS - 1) / STAGES) % 2)\n",
        _ => "",
    };
    let bystander = match d.pick(3) {
        0 => "",
        1 => "\nrole bystander[1] {\n  write(scratch, 1)\n  read(scratch, expect = 1)\n}\n",
        _ => "\nrole bystander[1] {\n  wait_parity(full[0], 0)\n  read(slot[0], expect = 0)\n}\n",
    };
    format!(
        "protocol exits\nexpect holds\nparam STAGES = {stages}\nparam ITERS = {iters}\n\n\
         barrier full[STAGES] count 1\nbarrier empty[STAGES] count {consumers}\n\
         buffer slot[STAGES] bytes 16\nbuffer scratch bytes 16\n\n\
         role producer[1] {{\n  for i in 0..ITERS {{\n    let s = i % STAGES\n{pw}\
             arrive_expect_tx(full[s], 16)\n    copy_async(slot[s], full[s], version = i)\n  }}\n{drain}}}\n\n\
         role consumer[{consumers}] {{\n  for i in 0..{citers} {{\n    let s = i % STAGES\n\
             wait_parity(full[s], (i / STAGES) % 2)\n    read(slot[s], expect = i)\n    arrive(empty[s])\n  }}\n}}\n{bystander}"
    )
}

/// `syncthreads` among the CTA's threads: a barrier initialised by one thread and published by
/// `syncthreads` (or not), a buffer handed over per round through it (double-buffered, or one
/// buffer: the rewrite races the last round's read), an mbarrier-and-copy pipeline beside it, and
/// consumers that stop a round early, so that their exits release the producer's last
/// `syncthreads` (exited threads leave the CTA's barrier).
fn syncthreads_rounds(seed: u64) -> String {
    let mut d = Dice(seed);
    let iters = 1 + d.pick(3);
    let consumers = 1 + d.pick(2);
    let nbuf = if d.mistake(2) == 1 { 1 } else { 2 };
    let manual = d.pick(2) == 0;
    let publish = d.mistake(3);
    let order = d.mistake(3);
    let citers = if d.mistake(3) == 1 { iters - 1 } else { iters };
    let pipeline = d.pick(3) != 0;
    let parity = d.mistake(3);
    let bytes = if d.mistake(3) == 1 { 8 } else { 16 };
    // A closing `syncthreads` in every role (an epilogue's): its last arrival releases the CTA
    // into its exits, maybe under the last copy.
    let close = if d.pick(2) == 0 { "  syncthreads\n" } else { "" };
    let init = if manual {
        let sync = if publish == 1 { "" } else { "  syncthreads\n" };
        (
            "barrier full count 1 manual_init\n",
            format!("  init(full)\n{sync}"),
            sync.to_string(),
        )
    } else {
        ("barrier full count 1\n", String::new(), String::new())
    };
    // The producer's round: the handed-over write and the CTA's barrier, in either order (the
    // write after the barrier races the readers), or the barrier left out.
    let hand = match order {
        0 => "    write(x[i % NB], i)\n    syncthreads\n",
        1 => "    syncthreads\n    write(x[i % NB], i)\n",
        _ => "    write(x[i % NB], i)\n",
    };
    let (pfill, cdrain) = if pipeline {
        let pw = match parity {
            0 => "    if i > 0 { wait_parity(empty, (i - 1) % 2) }\n",
            1 => "    if i > 0 { wait_parity(empty, i % 2) }\n",
            _ => "",
        };
        (
            format!("{pw}    arrive_expect_tx(full, {bytes})\n    copy_async(slot, full, version = i)\n"),
            "    wait_parity(full, i % 2)\n    read(slot, expect = i)\n    arrive(empty)\n",
        )
    } else {
        (String::new(), "")
    };
    let csync = if order == 2 { "" } else { "    syncthreads\n" };
    format!(
        "protocol sync\nexpect holds\nparam ITERS = {iters}\nparam NB = {nbuf}\n\n{}barrier empty count {consumers}\n\
         buffer slot bytes 16\nbuffer x[NB] bytes 16\n\n\
         role producer[1] {{\n{}  for i in 0..ITERS {{\n{hand}{pfill}  }}\n{close}}}\n\n\
         role consumer[{consumers}] {{\n{}  for i in 0..{citers} {{\n{csync}    read(x[i % NB], expect = i)\n{cdrain}  }}\n{close}}}\n",
        init.0, init.1, init.2
    )
}

/// cp.async rings: producer threads copy their part of a stage with `cp_async` and signal its
/// barrier by an arrive-on (`cp_async_arrive_noinc`, or `cp_async_arrive` with an arrival of
/// their own), or by waiting for their groups and arriving; consumers wait, read and release.
/// Mistakes: an arrive-on that raises the count it fires (no arrival beside it), an arrival that
/// tracks no copy, a group wait one group short, the producer's wait for a free slot on the
/// wrong parity or missing, consumers that stop a round early (the producer exits under its last
/// copies).
fn cp_async_rings(seed: u64) -> String {
    let mut d = Dice(seed);
    let stages = 1 + d.pick(2);
    let iters = 1 + d.pick(3);
    let producers = 1 + d.pick(2);
    let consumers = 1 + d.pick(2);
    let part = 32 / producers;
    let signal = match d.mistake(4) {
        0 => d.pick(3),
        m => 2 + m,
    };
    let pw = match d.mistake(3) {
        0 => "    if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) }\n",
        1 => "    if i >= STAGES { wait_parity(empty[s], (i / STAGES) % 2) }\n",
        _ => "",
    };
    let citers = if d.mistake(3) == 1 { iters - 1 } else { iters };
    // A bystander that polls the first stage's barrier once and reads the stage if it saw the
    // phase complete (a race when the stage is refilled before it reads).
    let observer = if d.pick(3) == 0 {
        "\nrole observer[1] {\n  let ok = try_wait_parity(full[0], 0)\n  if ok == 1 { read(slot[0], expect = 0) }\n}\n"
    } else {
        ""
    };
    let signal = match signal {
        0 => "    cp_async_arrive_noinc(full[s])\n".to_string(),
        1 => "    cp_async_arrive(full[s])\n    arrive(full[s])\n".to_string(),
        2 => "    cp_async_commit_group()\n    cp_async_wait_group(0)\n    arrive(full[s])\n".to_string(),
        3 => "    cp_async_arrive(full[s])\n".to_string(),
        4 => "    arrive(full[s])\n".to_string(),
        _ => "    cp_async_commit_group()\n    cp_async_wait_group(1)\n    arrive(full[s])\n".to_string(),
    };
    format!(
        "protocol cpasync\nexpect holds\nparam STAGES = {stages}\nparam ITERS = {iters}\n\n\
         barrier full[STAGES] count {producers}\nbarrier empty[STAGES] count {consumers}\n\
         buffer slot[STAGES] bytes 32\n\n\
         role producer[{producers}] {{\n  for i in 0..ITERS {{\n    let s = i % STAGES\n{pw}\
             cp_async(slot[s], offset = tid * {part}, bytes = {part}, version = i)\n{signal}  }}\n}}\n\n\
         role consumer[{consumers}] {{\n  for i in 0..{citers} {{\n    let s = i % STAGES\n\
             wait_parity(full[s], (i / STAGES) % 2)\n    read(slot[s], expect = i)\n    arrive(empty[s])\n  }}\n}}\n{observer}"
    )
}

/// Warp-batched commits: consumer lanes of one or two warps wait for a copy, read it (all alike,
/// or diverged on their lane), reconverge or not, and release the slot with `commit` on a
/// barrier that counts warps. Mistakes: no `syncwarp` after the divergence (one arrival per
/// group: entanglement, over-arrival), a count of lanes instead of warps (a hang), a commit
/// reached by the diverged lanes one after the other.
fn warp_commits(seed: u64) -> String {
    let mut d = Dice(seed);
    let ws = if d.pick(2) == 0 { 2 } else { 4 };
    let warps = 1 + d.pick(2);
    let iters = 1 + d.pick(2);
    let diverge = d.pick(2) == 0;
    let sync = d.mistake(2);
    let count = if d.mistake(3) == 1 { ws * warps } else { warps };
    let body = if diverge {
        "    if lane == 0 { read(slot, expect = i) } else { work\n      read(slot, expect = i) }\n"
    } else {
        "    read(slot, expect = i)\n"
    };
    let sync = if sync == 0 { "    syncwarp\n" } else { "" };
    format!(
        "protocol commits\nexpect holds\nwarp_size {ws}\nparam ITERS = {iters}\n\n\
         barrier full count 1\nbarrier empty count {count}\nbuffer slot bytes 64\n\n\
         role producer[{ws}] {{\n  if lane == 0 {{\n    for i in 0..ITERS {{\n\
             if i >= 1 {{ wait_parity(empty, (i + 1) % 2) }}\n      arrive_expect_tx(full, 64)\n\
             copy_async(slot, full, version = i)\n    }}\n  }}\n}}\n\n\
         role consumer[{}] {{\n  for i in 0..ITERS {{\n    wait_parity(full, i % 2)\n{body}{sync}    commit(empty)\n  }}\n}}\n",
        ws * warps
    )
}

/// Cluster pipelines: two CTAs, each with a producer that fills its stages by TMA (its own copy,
/// or half a tile multicast into both CTAs) and consumers that release each stage on the
/// barrier of every CTA whose producer wrote into it (remote arrivals, by a constant rank or one
/// computed from `cta`); the cluster barrier publishes the inits (whole, or split with work
/// between arrive and wait, or relaxed after `fence_mbarrier_init()`, which publishes the inits)
/// and keeps CTAs alive at the end, or a producer tail does. Mistakes: no cluster barrier, or a
/// relaxed one with no fence before it, before the first remote use (uninitialized), no tail
/// (lifetime), a release of the own CTA only or an empty count for one CTA (hangs,
/// over-arrival), a byte count for one half (a tx mismatch), a wrong parity.
fn cluster_pipelines(seed: u64) -> String {
    let mut d = Dice(seed);
    let stages = 1 + d.pick(2);
    let iters = 1 + d.pick(3);
    let consumers = 1 + d.pick(2);
    let multicast = d.pick(2) == 0;
    let start = match d.mistake(4) {
        0 if d.pick(2) == 0 => "  cluster_sync()\n",
        0 => "  fence_mbarrier_init()\n  cluster_arrive_relaxed()\n  cluster_wait()\n",
        1 => "  cluster_arrive_relaxed()\n  cluster_wait()\n",
        2 => "  cluster_arrive_relaxed()\n  fence_mbarrier_init()\n  cluster_wait()\n",
        _ => "",
    };
    // The consumers may split their first cluster phase: arrive, work, wait.
    let split = d.pick(3) == 0 && !start.is_empty();
    let cstart = if split {
        "  cluster_arrive()\n  work\n  cluster_wait()\n"
    } else {
        start
    };
    let pparity = if d.mistake(4) == 1 {
        "(i / STAGES) % 2"
    } else {
        "(i / STAGES + 1) % 2"
    };
    let tx = if multicast && d.mistake(4) == 2 { 32 } else { 64 };
    let copy = if multicast {
        "    copy_async(tile[s], full[s], offset = cta * 32, bytes = 32, version = i, multicast = 3)\n"
    } else {
        "    copy_async(tile[s], full[s], version = i)\n"
    };
    let peers = multicast || d.pick(3) == 0;
    let release = match (peers, d.mistake(4)) {
        (false, _) => "    arrive(empty[s])\n",
        (true, 3) => "    arrive(empty[s])\n",
        (true, m) if m % 2 == 0 => "    arrive(empty[s], cta = 0)\n    arrive(empty[s], cta = 1)\n",
        _ => "    arrive(empty[s], cta = cta)\n    arrive(empty[s], cta = 1 - cta)\n",
    };
    let count = if peers && d.mistake(4) != 2 { 2 * consumers } else { consumers };
    let (ptail, ctail) = match d.mistake(3) {
        0 => (
            "  for j in 0..STAGES {\n    let i = ITERS + j\n    let s = i % STAGES\n    if i >= STAGES { wait_parity(empty[s], (i / STAGES + 1) % 2) }\n  }\n",
            "",
        ),
        1 => ("  cluster_sync()\n", "  cluster_sync()\n"),
        _ => ("", ""),
    };
    format!(
        "protocol clusters\nexpect holds\ncluster 2\nparam STAGES = {stages}\nparam ITERS = {iters}\n\n\
         barrier full[STAGES] count 1\nbarrier empty[STAGES] count {count}\nbuffer tile[STAGES] bytes 64\n\n\
         role producer[1] {{\n{start}  for i in 0..ITERS {{\n    let s = i % STAGES\n\
             if i >= STAGES {{ wait_parity(empty[s], {pparity}) }}\n    arrive_expect_tx(full[s], {tx})\n{copy}  }}\n{ptail}}}\n\n\
         role consumer[{consumers}] {{\n{cstart}  for i in 0..ITERS {{\n    let s = i % STAGES\n\
             wait_parity(full[s], (i / STAGES) % 2)\n    read(tile[s], expect = i)\n{release}  }}\n{ctail}}}\n"
    )
}

/// DSMEM mailboxes: every CTA of a cluster writes its peer's mailbox and tells it so by a remote
/// arrival on the peer's barrier; each reads its own mailbox once told. Mistakes: no arrival or
/// two (hangs, over-arrival), no wait or the wrong parity (races, stale reads), no cluster
/// barrier before the first remote use, or a relaxed one with no `fence_mbarrier_init()` before
/// it (uninitialized; with the fence it publishes the inits), none at the end (a
/// peer's write reaching an exited CTA: lifetime).
fn cluster_mailboxes(seed: u64) -> String {
    let mut d = Dice(seed);
    let ctas = 2 + d.pick(2);
    let writers = 1 + d.pick(2);
    let peer = if d.pick(2) == 0 && ctas == 2 {
        "1 - cta"
    } else {
        "(cta + 1) % CTAS"
    };
    let from = if ctas == 2 && peer == "1 - cta" {
        "1 - cta"
    } else {
        "(cta + CTAS - 1) % CTAS"
    };
    let start = match d.mistake(4) {
        0 if d.pick(2) == 0 => "  cluster_sync()\n",
        0 => "  fence_mbarrier_init()\n  cluster_arrive_relaxed()\n  cluster_wait()\n",
        1 => "  cluster_arrive_relaxed()\n  cluster_wait()\n",
        2 => "  cluster_arrive_relaxed()\n  fence_mbarrier_init()\n  cluster_wait()\n",
        _ => "",
    };
    let signal = match d.mistake(3) {
        0 => format!("  arrive(posted, cta = {peer})\n"),
        1 => String::new(),
        _ => format!("  arrive(posted, cta = {peer})\n  arrive(posted, cta = {peer})\n"),
    };
    let wait = match d.mistake(3) {
        0 => "  wait_parity(posted, 0)\n",
        1 => "  wait_parity(posted, 1)\n",
        _ => "",
    };
    let end = if d.mistake(2) == 0 { "  cluster_sync()\n" } else { "" };
    format!(
        "protocol mailboxes\nexpect holds\ncluster {ctas}\nparam CTAS = {ctas}\n\n\
         barrier posted count {writers}\nbuffer note[{writers}] bytes 4\n\n\
         role worker[{writers}] {{\n{start}  write(note[tid], cta + 1, cta = {peer})\n{signal}{wait}\
           read(note[tid], expect = {from} + 1)\n{end}}}\n"
    )
}

/// A CTA's own collectives under cluster scope: in each CTA of a pair, a writer warp hands tiles
/// to a reader warp through named barriers (its CTA's own), then both meet at `syncthreads` (its
/// CTA's own) before the writer posts a note into the peer CTA (a remote write told by a remote
/// arrival) that the peer's reader waits for. Mistakes: those of the named-barrier handoff, no
/// cluster barrier before the remote use or after it, the wrong parity, `syncthreads` left out.
fn cluster_collectives(seed: u64) -> String {
    let mut d = Dice(seed);
    let rounds = 1 + d.pick(2);
    let uniform = d.pick(2) == 0;
    let count = 4;
    let role = |name: &str| {
        if uniform {
            format!("role {name} warps 1 uniform {{\n")
        } else {
            format!("role {name}[2] {{\n")
        }
    };
    // One lane's statement at `indent`: the elected lane's in a uniform role, lane 0's otherwise.
    let lane0 = |indent: &str, stmt: &str| {
        if uniform {
            format!("{indent}let e = elect()\n{indent}if e == 1 {{ {stmt} }}\n")
        } else {
            format!("{indent}if lane == 0 {{ {stmt} }}\n")
        }
    };
    let write = lane0("    ", "write(x[i % 2], i)");
    let arrive = match d.mistake(3) {
        0 => format!("{write}    bar_arrive(1, {count})\n"),
        1 => format!("    bar_arrive(1, {count})\n{write}"),
        _ => format!("{write}    bar_arrive(1, {})\n", count + 2),
    };
    let taking = match d.mistake(3) {
        0 => format!("    bar_sync(1, {count})\n"),
        1 => format!("    bar_arrive(1, {count})\n"),
        _ => String::new(),
    };
    let wait_ack = if d.mistake(2) == 0 {
        format!("    bar_sync(2, {count})\n")
    } else {
        String::new()
    };
    let start = match d.mistake(3) {
        0 => "  cluster_sync()\n",
        1 => "  syncthreads\n",
        _ => "",
    };
    let mid = if d.mistake(2) == 0 { "  syncthreads\n" } else { "" };
    // The wrong parity, or a look into the mailbox before the peer's post (expecting it empty).
    let (early, parity) = match d.mistake(3) {
        0 => ("", 0),
        1 => ("", 1),
        _ => ("  read(note, expect = 0)\n", 0),
    };
    let end = if d.mistake(2) == 0 { "  cluster_sync()\n" } else { "" };
    let post = lane0("  ", "write(note, cta + 1, cta = 1 - cta)");
    format!(
        "protocol cluster_collectives\nexpect holds\ncluster 2\nwarp_size 2\nparam R = {rounds}\n\n\
         barrier posted count 2\nbuffer x[2] bytes 4\nbuffer note bytes 4\n\n\
         {}{start}  for i in 0..R {{\n{arrive}{wait_ack}  }}\n{mid}{post}  arrive(posted, cta = 1 - cta)\n{end}}}\n\n\
         {}{start}  for i in 0..R {{\n{taking}    read(x[i % 2], expect = i)\n    bar_arrive(2, {count})\n  }}\n\
         {mid}{early}  wait_parity(posted, {parity})\n  read(note, expect = 2 - cta)\n{end}}}\n",
        role("writer"),
        role("reader"),
    )
}

/// Blackwell tensor memory: a producer fills a ring of operand stages by TMA-style copies, an MMA
/// thread allocates an accumulator in tensor memory, issues `tcgen05_mma` per stage, releases each
/// stage by `tcgen05_commit` on its `empty` barrier and the accumulator by one on `acc_full`; an
/// epilogue (one thread, or two that both arrive) loads it (`tcgen05_ld`, `tcgen05_wait_ld`) and
/// hands it back for the next tile; the MMA thread deallocates at the end. Mistakes: a plain
/// arrive for the commit (the stage released before the MMA read it), the commit before the MMA,
/// the load before the wait or released before `tcgen05_wait_ld`, no final wait before the
/// deallocation, no deallocation, the wrong parity.
fn tensor_memory(seed: u64) -> String {
    let mut d = Dice(seed);
    let stages = 1 + d.pick(2);
    let tiles = 1 + d.pick(3);
    let epilogues = 1 + d.pick(2);
    let release = match d.mistake(2) {
        0 => "      tcgen05_commit(empty[s])\n",
        _ => "      arrive(empty[s])\n",
    };
    let (before, after) = match d.mistake(2) {
        0 => ("", "    tcgen05_commit(acc_full)\n"),
        _ => ("    tcgen05_commit(acc_full)\n", ""),
    };
    let load = match d.mistake(4) {
        0 => "    wait_parity(acc_full, t % 2)\n    tcgen05_ld(acc, expect = t)\n    tcgen05_wait_ld()\n    arrive(acc_empty)\n",
        1 => "    tcgen05_ld(acc, expect = t)\n    wait_parity(acc_full, t % 2)\n    tcgen05_wait_ld()\n    arrive(acc_empty)\n",
        2 => "    wait_parity(acc_full, t % 2)\n    tcgen05_ld(acc, expect = t)\n    arrive(acc_empty)\n    tcgen05_wait_ld()\n",
        _ => "    wait_parity(acc_full, (t + 1) % 2)\n    tcgen05_ld(acc, expect = t)\n    tcgen05_wait_ld()\n    arrive(acc_empty)\n",
    };
    let last_wait = if d.mistake(2) == 0 {
        "  wait_parity(acc_empty, (T - 1) % 2)\n"
    } else {
        ""
    };
    let dealloc = if d.mistake(2) == 0 { "  tmem_dealloc(acc)\n" } else { "" };
    // Cluster launch control, half of the time: a scheduler asks for the next tile per tile and
    // the MMA thread reads the response (and hands it back) before its tile.
    let (scheduler, take) = if d.pick(2) == 0 {
        let (wait_free, wait_full) = match d.mistake(3) {
            0 => (
                "    if t > 0 { wait_parity(clc_empty, (t + 1) % 2) }\n",
                "    wait_parity(clc_full, t % 2)\n",
            ),
            1 => ("", "    wait_parity(clc_full, t % 2)\n"),
            _ => ("    if t > 0 { wait_parity(clc_empty, (t + 1) % 2) }\n", ""),
        };
        (
            format!(
                "\nrole scheduler[1] {{\n  for t in 0..T {{\n{wait_free}    arrive_expect_tx(clc_full, 16)\n    clc_try_cancel(clc_resp, clc_full)\n  }}\n}}\n"
            ),
            format!("{wait_full}    read(clc_resp)\n    arrive(clc_empty)\n"),
        )
    } else {
        (String::new(), String::new())
    };
    format!(
        "protocol tensor_memory\nexpect holds\nparam S = {stages}\nparam T = {tiles}\n\n\
         barrier full[S] count 1\nbarrier empty[S] count 1\nbarrier acc_full count 1\nbarrier acc_empty count {epilogues}\n\
         barrier clc_full count 1\nbarrier clc_empty count 1\n\
         buffer stage[S] bytes 64\nbuffer acc bytes 512\nbuffer clc_resp bytes 16\n\n\
         role producer[1] {{\n  for t in 0..T {{\n    let s = t % S\n    if t >= S {{ wait_parity(empty[s], (t / S + 1) % 2) }}\n    \
             arrive_expect_tx(full[s], 64)\n    copy_async(stage[s], full[s], version = t)\n  }}\n}}\n\n\
         role mma[1] {{\n  tmem_alloc(acc, 32)\n  for t in 0..T {{\n    let s = t % S\n{take}    if t > 0 {{ wait_parity(acc_empty, (t + 1) % 2) }}\n    \
             wait_parity(full[s], (t / S) % 2)\n{before}    tcgen05_mma(acc, stage[s], expect = t, version = t)\n    if t + S < T {{\n{release}    }}\n{after}  }}\n\
         {last_wait}{dealloc}}}\n\n\
         role epilogue[{epilogues}] {{\n  for t in 0..T {{\n{load}  }}\n}}\n{scheduler}"
    )
}

/// Tensor copies through a descriptor: a producer edits the descriptor per tile
/// (`tensormap_write`), fences it (`fence_proxy_tensormap`) and issues a tensor copy that one or
/// two consumers wait for and read, while another thread reads the descriptor too. Mistakes: no
/// fence, no wait for the previous copy's release before the next edit (an edit under a copy in
/// flight), the wrong descriptor version expected, the wrong parity.
fn tensor_copies(seed: u64) -> String {
    let mut d = Dice(seed);
    let tiles = 1 + d.pick(3);
    let consumers = 1 + d.pick(2);
    let wait_free = if d.mistake(2) == 0 {
        "    if g > 0 { wait_parity(empty, (g - 1) % 2) }\n"
    } else {
        ""
    };
    let fence = if d.mistake(2) == 0 {
        "    fence_proxy_tensormap(desc)\n"
    } else {
        ""
    };
    let expect = if d.mistake(2) == 0 { "g + 1" } else { "g" };
    let parity = if d.mistake(2) == 0 { "g % 2" } else { "(g + 1) % 2" };
    format!(
        "protocol tensor_copies\nexpect holds\nparam T = {tiles}\n\n\
         barrier full count 1\nbarrier empty count {consumers}\nbuffer tile bytes 64\ntensormap desc\n\n\
         role producer[1] {{\n  for g in 0..T {{\n{wait_free}    tensormap_write(desc, g + 1)\n{fence}    \
         arrive_expect_tx(full, 64)\n    copy_async(tile, full, version = g, tensormap = desc, expect = {expect})\n  }}\n}}\n\n\
         role consumer[{consumers}] {{\n  for g in 0..T {{\n    wait_parity(full, {parity})\n    read(tile, expect = g)\n    arrive(empty)\n  }}\n}}\n"
    )
}

/// Copies from shared memory into a peer CTA (`copy_async(..., cta = R, from = SRC)`): each CTA
/// of a pair fills its own staging buffer per round, fences it for the async proxy and copies it
/// into the peer's tile, completing on the peer's `full`; the peer reads and releases the stage
/// by a remote arrival. Mistakes: no fence, a refill of the stage before the release (under the
/// copy), no cluster barrier at either end, the wrong parity, the byte count of half a tile.
fn cluster_copies_from(seed: u64) -> String {
    let mut d = Dice(seed);
    let rounds = 1 + d.pick(2);
    let start = if d.mistake(2) == 0 { "  cluster_sync()\n" } else { "" };
    let end = if d.mistake(2) == 0 { "  cluster_sync()\n" } else { "" };
    let fence = if d.mistake(2) == 0 { "    fence_proxy_async()\n" } else { "" };
    let wait_free = if d.mistake(2) == 0 {
        "    if i > 0 { wait_parity(empty, (i - 1) % 2) }\n"
    } else {
        ""
    };
    let bytes = if d.mistake(2) == 0 { 64 } else { 32 };
    let parity = if d.mistake(2) == 0 { "i % 2" } else { "(i + 1) % 2" };
    format!(
        "protocol copies_from\nexpect holds\ncluster 2\nparam R = {rounds}\n\n\
         barrier full count 1\nbarrier empty count 1\nbuffer stage bytes 64\nbuffer tile bytes 64\n\n\
         role producer[1] {{\n{start}  for i in 0..R {{\n{wait_free}    write(stage, i + 1)\n{fence}    \
         arrive_expect_tx(full, {bytes}, cta = 1 - cta)\n    copy_async(tile, full, cta = 1 - cta, from = stage)\n  }}\n{end}}}\n\n\
         role consumer[1] {{\n{start}  for i in 0..R {{\n    wait_parity(full, {parity})\n    read(tile, expect = i + 1)\n    \
         arrive(empty, cta = 1 - cta)\n  }}\n{end}}}\n"
    )
}

/// Kinds found, or `None` when the search did not finish within its bound.
fn kinds(src: &str, por: bool, symmetry: bool, mutant: Option<Mutant>) -> Option<BTreeSet<ViolationKind>> {
    let ast = lang::parse(src).unwrap_or_else(|d| panic!("generated protocol does not parse: {d:?}\n{src}"));
    lang::check(&ast).unwrap_or_else(|d| panic!("generated protocol does not check: {d:?}\n{src}"));
    let proto = lower(&ast, &[]).unwrap_or_else(|d| panic!("generated protocol does not lower: {d:?}\n{src}"));
    let mut model = Model::new(proto);
    model.mutant = mutant;
    let opts = CheckOptions {
        max_states: Some(30_000),
        self_check: mutant.is_none(),
        symmetry,
        por,
        threads: 1,
        ..CheckOptions::default()
    };
    let r = check(&model, &opts);
    assert_ne!(r.verdict, Verdict::InternalError, "{src}");
    r.bound.is_none().then(|| r.violations.iter().map(|v| v.kind).collect())
}

/// The law of every generator: reduced (alone and with symmetry) and unreduced give the same
/// kinds; the reduction applies (the header would say otherwise).
fn same_kinds(src: &str) -> Result<(), TestCaseError> {
    let model = Model::new(lower(&lang::parse(src).unwrap(), &[]).unwrap());
    prop_assert!(model.por.applicable, "the reduction does not apply to\n{}", src);
    let plain = kinds(src, false, false, None);
    // The unreduced search is the one a bound stops: a protocol it cannot finish is rejected
    // before the two reduced searches are spent on it (the same protocols are kept as before).
    prop_assume!(plain.is_some());
    let por = kinds(src, true, false, None);
    let both = kinds(src, true, true, None);
    prop_assume!(plain.is_some() && por.is_some() && both.is_some());
    prop_assert_eq!(&plain, &por, "POR alone\n{}", src);
    prop_assert_eq!(&plain, &both, "POR with symmetry\n{}", src);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Law: on warp-specialized pipelines with an elected producer lane and uniform (or lane)
    /// consumers, the reduction keeps the kinds of the unreduced search.
    #[test]
    fn reduction_keeps_the_kinds_of_uniform_pipelines_with_elected_lanes(seed in any::<u64>()) {
        same_kinds(&uniform_pipeline(seed))?;
    }

    /// Law: on one warp's lanes meeting at elect() and syncwarp, the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_warp_elections(seed in any::<u64>()) {
        same_kinds(&warp_election(seed))?;
    }

    /// Law: on warps ordered by named barriers (with their misuses), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_named_barrier_handoffs(seed in any::<u64>()) {
        same_kinds(&named_barriers(seed))?;
    }

    /// Law: on TMA stores, wgmma operand reads and proxy fences, the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_async_proxy_protocols(seed in any::<u64>()) {
        same_kinds(&async_proxy(seed))?;
    }

    /// Law: on fences by other threads than the writer and the storer (the fence's footprint
    /// narrowed to the flags it can clear), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_fences_by_other_threads(seed in any::<u64>()) {
        same_kinds(&fence_handoff(seed))?;
    }

    /// Law: on warpgroups issuing one MMA together and releasing its operands from one lane
    /// after a wait (the group record shared by the warpgroup's agents), the reduction keeps the
    /// kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_warpgroup_mma_pipelines(seed in any::<u64>()) {
        same_kinds(&warpgroup_pipeline(seed))?;
    }

    /// Law: on a warpgroup whose agents read different operands, so that a member's wait
    /// retires reads of buffers its own agent never reads, the reduction keeps the kinds of the
    /// unreduced search.
    #[test]
    fn reduction_keeps_the_kinds_of_warpgroups_with_split_operands(seed in any::<u64>()) {
        same_kinds(&warpgroup_split_operands(seed))?;
    }

    /// Law: on threads that exit while copies are still in flight (a producer that does not
    /// drain, consumers that stop early, a bystander), the reduction keeps the kinds, the
    /// CTA's exit under a copy (`lifetime`) among them.
    #[test]
    fn reduction_keeps_the_kinds_of_exits_under_copies_in_flight(seed in any::<u64>()) {
        same_kinds(&exits_under_copies(seed))?;
    }

    /// Law: on threads meeting at `syncthreads` (an init published by it, buffers handed over
    /// through it, exits that release it, an mbarrier pipeline beside it), the reduction keeps
    /// the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_syncthreads_rounds(seed in any::<u64>()) {
        same_kinds(&syncthreads_rounds(seed))?;
    }

    /// Law: on cp.async rings (arrive-ons with and without `.noinc`, group waits, their
    /// misuses, exits under copies in flight), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_cp_async_rings(seed in any::<u64>()) {
        same_kinds(&cp_async_rings(seed))?;
    }

    /// Law: on warp-batched commits (converged or diverged lanes, a missing `syncwarp`, a count
    /// of lanes for a count of warps), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_warp_batched_commits(seed in any::<u64>()) {
        same_kinds(&warp_commits(seed))?;
    }

    /// Law: on cluster pipelines (multicast copies, remote releases, the cluster barrier whole
    /// or split, producer tails, and their misuses), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_cluster_pipelines(seed in any::<u64>()) {
        same_kinds(&cluster_pipelines(seed))?;
    }

    /// Law: on DSMEM mailboxes (remote writes told by remote arrivals, two or three CTAs, the
    /// cluster barrier, and their misuses), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_cluster_mailboxes(seed in any::<u64>()) {
        same_kinds(&cluster_mailboxes(seed))?;
    }

    /// Law: on named barriers and `syncthreads` in each CTA of a cluster (each CTA's own), with
    /// remote writes and arrivals between the CTAs and their misuses, the reduction keeps the
    /// kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_each_ctas_own_collectives_in_a_cluster(seed in any::<u64>()) {
        same_kinds(&cluster_collectives(seed))?;
    }

    /// Law: on Blackwell MMA pipelines (tensor-memory allocation, `tcgen05_mma` from a ring of
    /// stages, `tcgen05_commit` releasing stages and the accumulator, an epilogue's loads, the
    /// deallocation, and their misuses), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_tensor_memory_pipelines(seed in any::<u64>()) {
        same_kinds(&tensor_memory(seed))?;
    }

    /// Law: on tensor copies through a descriptor edited per tile (fenced or not, edited under a
    /// copy in flight or not), the reduction keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_tensor_copies(seed in any::<u64>()) {
        same_kinds(&tensor_copies(seed))?;
    }

    /// Law: on copies from a CTA's shared memory into its peer's (fenced or not, the source
    /// refilled under the copy or not, the cluster barrier at either end or not), the reduction
    /// keeps the kinds.
    #[test]
    fn reduction_keeps_the_kinds_of_copies_from_shared_memory(seed in any::<u64>()) {
        same_kinds(&cluster_copies_from(seed))?;
    }

    /// Law: on `while` loops (counting loops, spins on try_wait_parity and on a shared flag,
    /// `break`), the reduction keeps the kinds, the spinning `deadlock` among them.
    #[test]
    fn reduction_keeps_the_kinds_of_while_loops_and_spins(seed in any::<u64>()) {
        same_kinds(&while_loops(seed))?;
    }

    /// Law: on roles that read their identity (a signalling warp, a warp's half of the work, an
    /// identity mixed with a local, a per-warp buffer), the symmetry reduction (alone and with
    /// the partial-order reduction) keeps the kinds of the unreduced search.
    #[test]
    fn symmetry_keeps_the_kinds_of_roles_that_read_their_identity(seed in any::<u64>()) {
        let src = identity_roles(seed);
        let plain = kinds(&src, false, false, None);
        prop_assume!(plain.is_some());
        prop_assert_eq!(&plain, &kinds(&src, false, true, None), "symmetry alone\n{}", src);
        prop_assert_eq!(&plain, &kinds(&src, true, true, None), "with the partial-order reduction\n{}", src);
    }
}

/// Each planted footprint defect loses a kind on some protocol of its construct's generator (the
/// first of 400 seeds where it does is reported), so the laws above can fail.
#[test]
fn each_footprint_defect_loses_a_kind_on_its_construct() {
    let cases: [(Mutant, fn(u64) -> String); 9] = [
        (Mutant::PorForgetsWarpLanes, warp_election),
        (Mutant::PorForgetsNamedBarriers, named_barriers),
        (Mutant::PorCountsOneLanePerAgent, uniform_pipeline),
        (Mutant::PorFenceForgetsFlags, fence_handoff),
        (Mutant::PorWhileRunsOnce, while_loops),
        (Mutant::PorForgetsCommitLanes, warp_commits),
        (Mutant::PorForgetsClusterPeers, cluster_mailboxes),
        (Mutant::PorNamedBarriersOfCtaZero, cluster_collectives),
        (Mutant::PorForgetsTensorMemory, tensor_memory),
    ];
    assert_eq!(Mutant::FOOTPRINT_DEFECTS.len(), cases.len());
    for (mutant, generate) in cases {
        let caught = (0..400u64).find(|&seed| {
            let src = generate(seed);
            let plain = kinds(&src, false, false, None);
            let broken = kinds(&src, true, false, Some(mutant));
            plain.is_some() && broken.is_some() && plain != broken
        });
        eprintln!("{}: caught at seed {caught:?}", mutant.name());
        assert!(caught.is_some(), "{} loses no kind on 400 generated protocols", mutant.name());
    }
}

/// The kinds the unreduced search finds over a generator's first 128 protocols (those it
/// finishes), and how many of them hold: what the `*_reach_*` tests below ask of each generator.
fn kinds_reached(generate: fn(u64) -> String) -> (BTreeSet<ViolationKind>, usize) {
    let mut seen = BTreeSet::new();
    let mut holds = 0;
    for seed in 0..128u64 {
        let Some(k) = kinds(&generate(seed), false, false, None) else {
            continue;
        };
        holds += k.is_empty() as usize;
        seen.extend(k);
    }
    eprintln!("kinds over 128 seeds: {seen:?}; {holds} hold");
    (seen, holds)
}

/// A generator reaches every kind in `wanted` over its first 128 protocols, and protocols that
/// hold.
fn assert_reaches(generate: fn(u64) -> String, wanted: &[ViolationKind]) {
    let (seen, holds) = kinds_reached(generate);
    assert!(holds > 0, "no generated protocol holds");
    for k in wanted {
        assert!(seen.contains(k), "{k:?} not reached: {seen:?}");
    }
}

/// The `while` generator reaches what its mistakes are for: a spin that nothing can end
/// (`deadlock`), a stale read, and protocols that hold, so its law above compares searches that
/// find something.
#[test]
fn while_loops_reach_spinning_deadlocks_stale_reads_and_protocols_that_hold() {
    let (seen, holds) = kinds_reached(while_loops);
    assert!(holds > 0);
    assert!(
        seen.contains(&ViolationKind::Deadlock) && seen.contains(&ViolationKind::StaleRead),
        "{seen:?}"
    );
}

/// The identity generator exercises the symmetry it tests: most of its protocols have a class of
/// interchangeable threads although their role reads `warp` or `lane`, and some (a per-warp
/// buffer, `warp + i`) keep every consumer apart.
#[test]
fn roles_that_read_their_identity_still_have_interchangeable_threads() {
    let classes: Vec<usize> = (0..64u64)
        .map(|seed| Model::new(lower(&lang::parse(&identity_roles(seed)).unwrap(), &[]).unwrap()).symmetry_class_count())
        .collect();
    let with = classes.iter().filter(|&&c| c > 0).count();
    eprintln!("{with} of 64 generated protocols have a symmetry class");
    assert!(with >= 8 && with < 64, "{classes:?}");
}

/// The exit generator reaches what its law is about: the CTA's exit under a copy in flight
/// (`lifetime`) on some protocols, and protocols that hold on others.
#[test]
fn exits_under_copies_reach_lifetime_and_protocols_that_hold() {
    let (seen, holds) = kinds_reached(exits_under_copies);
    assert!(holds > 0);
    assert!(seen.contains(&ViolationKind::Lifetime), "{seen:?}");
}

/// The `syncthreads` generator reaches what its mistakes are for: an unpublished init
/// (`uninitialized`), a rewrite racing a read (`data-race`), a stale read, a hang, and
/// protocols that hold.
#[test]
fn syncthreads_rounds_reach_uninitialized_races_and_protocols_that_hold() {
    let (seen, holds) = kinds_reached(syncthreads_rounds);
    assert!(holds > 0);
    for kind in [
        ViolationKind::Uninitialized,
        ViolationKind::DataRace,
        ViolationKind::StaleRead,
        ViolationKind::Deadlock,
    ] {
        assert!(seen.contains(&kind), "{kind:?} not reached: {seen:?}");
    }
}

/// `syncthreads` has no conflict of its own to forget: a release needs every unfinished thread
/// of the CTA at it, the seed included, so no step passes one while the seed stands still, and
/// arrivals and exits commute among themselves (docs/model.md, "syncthreads"). The law: with
/// its footprint planted away (the CTA's record and the release's exits), the cut alone keeps
/// the kinds of the unreduced search on 400 generated protocols; the footprint is kept as a
/// margin. The reduction that ignores every conflict loses a kind on them, so the protocols
/// can tell a broken reduction.
#[test]
fn the_cut_at_syncthreads_alone_keeps_the_kinds_and_a_broken_reduction_does_not() {
    let mut compared = 0;
    let mut ignored = None;
    for seed in 0..400u64 {
        let src = syncthreads_rounds(seed);
        let Some(plain) = kinds(&src, false, false, None) else { continue };
        let bare = kinds(&src, true, false, Some(Mutant::PorForgetsSyncThreads));
        if let Some(bare) = bare {
            compared += 1;
            assert_eq!(plain, bare, "the cut at syncthreads alone loses a kind on\n{src}");
        }
        if ignored.is_none() && kinds(&src, true, false, Some(Mutant::PorIgnoresConflicts)).is_some_and(|k| k != plain) {
            ignored = Some(seed);
        }
    }
    eprintln!("{compared} protocols compared; ignoring conflicts caught at seed {ignored:?}");
    assert!(compared >= 300, "{compared}");
    assert!(
        ignored.is_some(),
        "ignoring every conflict loses no kind on 400 syncthreads protocols"
    );
}

/// The cp.async generator reaches what its mistakes are for: a hang, a race or stale read of a
/// copy not waited for, the CTA's exit under a copy (`lifetime`), and protocols that hold.
#[test]
fn cp_async_rings_reach_hangs_races_lifetime_and_protocols_that_hold() {
    assert_reaches(
        cp_async_rings,
        &[ViolationKind::Deadlock, ViolationKind::DataRace, ViolationKind::Lifetime],
    );
}

/// The cp.async defect (a landing that forgets the arrive-ons it fires and the issuer's record it
/// carries to) loses a kind on a protocol made for it: an observer polls the barrier that an
/// arrive-on in flight arrives on, while its issuer is blocked; the landing must write that
/// barrier, or the poll is taken alone before it and the completed phase is never seen. (The
/// generated rings do not lose a kind to it: the orders it drops are reached through others.)
#[test]
fn the_cp_async_landing_defect_loses_a_kind_on_an_arrive_on_in_flight() {
    let fired = "protocol landing_fires_arrive_on\nexpect holds\nbarrier b count 1\nbarrier done count 1\nbuffer src bytes 16\n\n\
        role copier[1] {\n  cp_async(src, offset = 0, bytes = 16, version = 1)\n  cp_async_arrive_noinc(b)\n  wait_parity(done, 0)\n  cp_async_wait_all()\n}\n\
        role observer[1] {\n  let ok = try_wait_parity(b, 0)\n  assert ok == 0\n  arrive(done)\n}\n";
    let plain = kinds(fired, false, false, None).expect("finishes");
    assert!(plain.contains(&ViolationKind::Assertion), "{plain:?}\n{fired}");
    assert_eq!(kinds(fired, true, false, None).as_ref(), Some(&plain), "{fired}");
    let broken = kinds(fired, true, false, Some(Mutant::PorForgetsCpAsyncLandings)).expect("finishes");
    assert!(
        !broken.contains(&ViolationKind::Assertion),
        "the defect keeps the assertion: {broken:?}"
    );
}

/// The cluster generator reaches what its mistakes are for: peers reached before their inits
/// are published (`uninitialized`), a CTA ended under a peer's release (`lifetime`), hangs, and
/// protocols that hold.
#[test]
fn cluster_pipelines_reach_uninitialized_lifetime_hangs_and_protocols_that_hold() {
    assert_reaches(
        cluster_pipelines,
        &[ViolationKind::Uninitialized, ViolationKind::Lifetime, ViolationKind::Deadlock],
    );
}

/// The mailbox generator reaches races, stale reads, lifetime and uninitialized peers, and
/// protocols that hold.
#[test]
fn cluster_mailboxes_reach_races_stale_reads_lifetime_and_protocols_that_hold() {
    assert_reaches(
        cluster_mailboxes,
        &[
            ViolationKind::DataRace,
            ViolationKind::StaleRead,
            ViolationKind::Lifetime,
            ViolationKind::Uninitialized,
        ],
    );
}

/// The generator of a CTA's own collectives in a cluster reaches races, stale reads, hangs,
/// lifetime and uninitialized peers, and protocols that hold.
#[test]
fn cluster_collectives_reach_races_stale_reads_hangs_lifetime_and_protocols_that_hold() {
    assert_reaches(
        cluster_collectives,
        &[
            ViolationKind::DataRace,
            ViolationKind::StaleRead,
            ViolationKind::Deadlock,
            ViolationKind::Lifetime,
            ViolationKind::Uninitialized,
        ],
    );
}

/// The tensor-memory generator reaches races, stale reads, lifetime (a deallocation under an
/// MMA, none at all), missing waits and hangs, and protocols that hold.
#[test]
fn tensor_memory_reaches_races_stale_reads_lifetime_missing_waits_hangs_and_protocols_that_hold() {
    assert_reaches(
        tensor_memory,
        &[
            ViolationKind::DataRace,
            ViolationKind::StaleRead,
            ViolationKind::Lifetime,
            ViolationKind::MissingWait,
            ViolationKind::Deadlock,
        ],
    );
}

/// The copy generators reach the races of an unfenced or refilled source and of a descriptor
/// edited under a copy, stale reads and hangs, and protocols that hold.
#[test]
fn copies_through_a_source_or_a_descriptor_reach_races_stale_reads_hangs_and_protocols_that_hold() {
    let wanted = [ViolationKind::DataRace, ViolationKind::StaleRead, ViolationKind::Deadlock];
    assert_reaches(tensor_copies, &wanted);
    assert_reaches(
        cluster_copies_from,
        &[&wanted[..], &[ViolationKind::Uninitialized, ViolationKind::Lifetime]].concat(),
    );
}

/// The end of a source's or descriptor's read at a copy's landing is a margin: with the planted
/// defect whose landings forget it, the copy generators keep their kinds (a write of the source
/// unordered with the copy races in either order: with the read in flight, or with the read the
/// landing records). The reduction that ignores every conflict loses a kind on the same
/// protocols, so they can tell a broken one.
#[test]
fn the_end_of_a_source_read_is_a_margin_and_a_broken_reduction_is_caught() {
    for generate in [tensor_copies as fn(u64) -> String, cluster_copies_from] {
        let (mut kept, mut finished, mut broken_caught) = (0, 0, false);
        for seed in 0..100u64 {
            let src = generate(seed);
            let Some(plain) = kinds(&src, false, false, None) else { continue };
            finished += 1;
            if kinds(&src, true, false, Some(Mutant::PorForgetsSourceReads)).as_ref() == Some(&plain) {
                kept += 1;
            }
            broken_caught |= kinds(&src, true, false, Some(Mutant::PorIgnoresConflicts)).is_some_and(|k| k != plain);
        }
        assert!(finished > 50, "only {finished} protocols finished");
        assert_eq!(kept, finished, "the source-read defect loses a kind");
        assert!(broken_caught, "the conflict-ignoring reduction loses no kind either");
    }
}

/// Each CTA of a cluster passes its own `syncthreads`: while a thread of CTA 0 stands still, CTA
/// 1's threads may pass theirs and write into CTA 0. With the planted defect that holds every
/// CTA's `syncthreads` while the seed stands still, the peer's remote write after it is left out
/// of the reduction, and the order in which it lands before CTA 0's read (a stale read) is lost.
#[test]
fn another_ctas_syncthreads_does_not_hold_its_threads_while_the_seed_stands_still() {
    let src = "protocol peer\nexpect holds\ncluster 2\nbuffer note bytes 4\n\nrole t[2] {\n  if cta == 0 {\n    if tid == 0 { read(note, expect = 0) }\n  } else {\n    syncthreads\n    if tid == 0 { write(note, 1, cta = 0) }\n  }\n  cluster_sync()\n}\n";
    let plain = kinds(src, false, false, None).expect("finishes");
    assert_eq!(
        plain,
        [ViolationKind::DataRace, ViolationKind::StaleRead]
            .into_iter()
            .collect::<BTreeSet<_>>()
    );
    assert_eq!(kinds(src, true, false, None).as_ref(), Some(&plain));
    let broken = kinds(src, true, false, Some(Mutant::PorSyncThreadsHoldsEveryCta)).expect("finishes");
    assert_ne!(plain, broken, "the defect keeps every kind: {broken:?}");
}

/// Arrivals commute only while none of them can complete the phase: with the planted defect that
/// takes every barrier's arrivals as commuting, a single arrival and a double one on a barrier
/// that counts two are taken in one order only, and the other order's kind is lost (the double
/// arrival over-arrives after the single one; before it, it completes the phase and the single
/// one arrives on the next phase before anyone waited: a missing wait).
#[test]
fn the_quiet_arrival_defect_loses_a_kind_on_an_arrival_that_completes_the_phase() {
    let src = "protocol quiet\nexpect holds\nbarrier b count 2\n\nrole one[1] {\n  arrive(b)\n}\n\nrole two[1] {\n  arrive(b, 2)\n}\n";
    let plain = kinds(src, false, false, None).expect("finishes");
    assert_eq!(kinds(src, true, false, None).as_ref(), Some(&plain));
    let broken = kinds(src, true, false, Some(Mutant::PorArrivalsAlwaysQuiet)).expect("finishes");
    assert!(
        plain.contains(&ViolationKind::OverArrival) && plain.contains(&ViolationKind::MissingWait),
        "{plain:?}"
    );
    assert_ne!(plain, broken, "the defect keeps every kind: {broken:?}");
}

/// The wait a walk stops at conflicts with the steps that may complete its phase, but that is a
/// margin: with the planted defect that counts no step as completing, the generators of this file
/// keep their kinds (300 protocols of each, 2026-12-07), because the thread such a step releases
/// becomes enabled at the next state, where its wait conflicts with every later step on its barrier.
/// A broken reduction is still caught on the same protocols.
#[test]
fn the_release_of_a_cut_wait_is_a_margin_and_a_broken_reduction_is_caught() {
    let (mut kept, mut broken_caught) = (0, false);
    for seed in 0..60u64 {
        let src = cluster_pipelines(seed);
        let Some(plain) = kinds(&src, false, false, None) else { continue };
        if kinds(&src, true, false, Some(Mutant::PorCutWaitNeverReleased)).as_ref() == Some(&plain) {
            kept += 1;
        }
        broken_caught |= kinds(&src, true, false, Some(Mutant::PorIgnoresConflicts)).is_some_and(|k| k != plain);
    }
    assert!(kept > 20, "only {kept} protocols finished");
    assert!(broken_caught, "the conflict-ignoring reduction loses no kind either");
}

/// Cluster arrivals commute (the barrier's record is a commutative update), so once the seed
/// has arrived on the cluster barrier only the walks say that the others' arrivals may complete
/// the phase and release a thread into steps that conflict with the seed's. Here CTA 0 arrives,
/// then arrives on its mbarrier and waits on its parity; CTA 1's arrival on that mbarrier after
/// the cluster barrier may come first, which the reduction must explore (a stale wait, the hang,
/// a missing wait). The planted defect that never lets a walk pass the cluster wait loses them.
/// The generators of this file do not catch that defect (400 protocols of each of the three
/// cluster generators keep their kinds, 2026-12-08): their threads do not arrive early and then
/// race a released peer on one barrier.
#[test]
fn a_cluster_wait_the_others_may_release_is_passed_once_the_seed_has_arrived() {
    let src = "protocol p\ncluster 2\nbarrier bar count 1\nrole w[1] {\n  if cta == 0 {\n    cluster_arrive()\n    arrive(bar)\n    wait_parity(bar, 0)\n    cluster_wait()\n  } else {\n    cluster_arrive()\n    cluster_wait()\n    arrive(bar, cta = 0)\n  }\n  cluster_sync()\n}\n";
    let plain = kinds(src, false, false, None).expect("finishes");
    assert!(
        plain.contains(&ViolationKind::Deadlock) && plain.contains(&ViolationKind::StaleWait),
        "{plain:?}"
    );
    assert_eq!(kinds(src, true, false, None).as_ref(), Some(&plain));
    let broken = kinds(src, true, false, Some(Mutant::PorClusterWaitNeverPasses)).expect("finishes");
    assert_ne!(plain, broken, "the defect keeps every kind: {broken:?}");
}
