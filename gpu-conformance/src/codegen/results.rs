//! The results the host reads back: one block's words, as the kernel writes them and
//! [`Kernel::parse_block`] reads them. [`Layout`] is the one place where the parts of a block
//! start; the C++ spellings of those starts (`*_CPP`) and of the record calls ([`Gen::record`])
//! are next to it, so that the emitter and the parser cannot drift apart.
//!
//! Layout of one block's results (32-bit words):
//! ```text
//! per model thread t (THREAD_WORDS = 6 + 3 * CAP):
//!   [status, nreads, ntry, ntok, nbad_expect, turn_lost, reads[CAP], try_waits[CAP], token_parities[CAP]]
//! then per flattened barrier: completion-function runs
//! then per flattened barrier: the end probe (0: not probed; else 4 | test_wait.parity(0) |
//!   test_wait.parity(1) << 1, read by the last model thread to exit, non-destructively)
//! then, when completion functions write shared vars: a marker (1: written) and per such var
//!   (`outcome::completion_vars`) its final value, low and high 32 bits
//! then, when a role is warp-uniform: per model thread, the lanes of the agent that observed
//!   something else than its leader lane (0: they agreed, or not an agent)
//! ```
//! The prelude spells the same record in C++ (`PC_CAP`, `PC_HEADER`, `PC_THREAD_WORDS`, the
//! status enum); the tests below hold the two together.

use super::{has_uniform, Gen, Kernel};
use phasecheck_model::program::ir::Protocol;

/// Observations recorded per list and thread; more are counted but dropped (status `OVERFLOW`).
pub const CAP: usize = 32;
/// The header of a thread record: status, nreads, ntry, ntok, nbad_expect, turn_lost.
pub const HEADER_WORDS: usize = 6;
pub const THREAD_WORDS: usize = HEADER_WORDS + 3 * CAP;
/// Versions a copy source holds (0..SRC_VERSIONS); the row after them is stamped -2. The host
/// writes the source (`child`); the prelude's `pc_src_row` picks a row of it, and a copy of a
/// version past them is refused (`pc_version_ok`: unsupported) rather than bringing -2.
pub const SRC_VERSIONS: usize = 256;

/// Status word of a thread record.
pub mod status {
    pub const RUNNING: i32 = 0;
    pub const FINISHED: i32 = 1;
    /// A bounded wait timed out: the thread stopped there.
    pub const HUNG: i32 = 2;
    pub const ASSERT_FAILED: i32 = 3;
    /// An index or size the kernel cannot execute (out of range, unaligned copy).
    pub const UNSUPPORTED: i32 = 4;
    /// More observations than `CAP`.
    pub const OVERFLOW: i32 = 6;
}

/// The start of the completion-function counters, as the kernel spells it (`NT`: model threads).
pub(super) const COMPLETIONS_CPP: &str = "NT * PC_THREAD_WORDS";
/// The start of the end probes, as the kernel spells it (`NB`: flattened barriers).
pub(super) const PROBES_CPP: &str = "NT * PC_THREAD_WORDS + NB";
/// The start of the completion functions' vars, from the probes' start.
pub(super) const END_VARS_FROM_PROBES_CPP: &str = "probes + NB";
/// A thread's record header, written at its exit (the order of `HEADER_WORDS`).
pub(super) const HEADER_CPP: &str =
    "th.rec[0] = th.status; th.rec[1] = th.nreads; th.rec[2] = th.ntry; th.rec[3] = th.ntok; th.rec[4] = th.nbad; th.rec[5] = th.lost;";

/// Where the parts of one block's results start, in words (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    threads: usize,
    barriers: usize,
    /// The completion functions' vars: a marker and two words per var; 0 when none is written.
    end_var_words: usize,
    uniform: bool,
}

impl Layout {
    pub(super) fn of(p: &Protocol) -> Layout {
        let ncv = phasecheck_verifier::outcomes::completion_vars(p).len();
        Layout {
            threads: p.threads.len(),
            barriers: p.barriers.len(),
            end_var_words: if ncv > 0 { 1 + 2 * ncv } else { 0 },
            uniform: has_uniform(p),
        }
    }

    /// The layout of a kernel's results, from its launch facts.
    fn of_kernel(k: &Kernel) -> Layout {
        let uniform = k.lanes.iter().any(|&l| l > 1);
        let fixed = k.threads * THREAD_WORDS + 2 * k.barriers + if uniform { k.threads } else { 0 };
        Layout {
            threads: k.threads,
            barriers: k.barriers,
            end_var_words: k.block_words.saturating_sub(fixed),
            uniform,
        }
    }

    fn completions(&self) -> usize {
        self.threads * THREAD_WORDS
    }

    fn probes(&self) -> usize {
        self.completions() + self.barriers
    }

    fn end_vars(&self) -> usize {
        self.probes() + self.barriers
    }

    /// Where the words of the uniform agents' lanes apart start.
    pub(super) fn lanes_apart(&self) -> usize {
        self.end_vars() + self.end_var_words
    }

    pub(super) fn words(&self) -> usize {
        self.lanes_apart() + if self.uniform { self.threads } else { 0 }
    }
}

/// Words of one block's results for protocol `p` (see the module docs for the layout).
pub fn block_words_of(p: &Protocol) -> usize {
    Layout::of(p).words()
}

impl Gen<'_> {
    /// Records observation `v` in list 0 (reads), 1 (try_waits) or 2 (token parities). On an
    /// agent's lanes every lane counts and hashes it, and the leader writes it.
    pub(super) fn record(&self, list: usize, v: &str) -> String {
        match (self.lanes, list) {
            (false, 0) => format!("pc_record_read(th, {v});"),
            (false, 1) => format!("pc_record_try(th, {v});"),
            (false, _) => format!("pc_record_token(th, {v});"),
            (true, 0) => format!("pc_u_record(th, u, 0, th.nreads, {v});"),
            (true, 1) => format!("pc_u_record(th, u, 1, th.ntry, {v} ? 1 : 0);"),
            (true, _) => format!("pc_u_record(th, u, 2, th.ntok, {v});"),
        }
    }
}

/// One model thread's record, parsed from a block of results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRecord {
    pub status: i32,
    pub reads: Vec<i64>,
    pub try_waits: Vec<bool>,
    pub token_parities: Vec<u8>,
    /// Reads that differed from their `expect`.
    pub bad_expect: u32,
    /// Replay only: the turnstile stalled and the thread ran free from then on.
    pub turn_lost: bool,
}

/// One block of results (one execution), parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRecord {
    pub threads: Vec<ThreadRecord>,
    pub completions: Vec<u32>,
    /// Per barrier, the end probe word (0: not probed; else `4 | p0 | p1 << 1`).
    pub probes: Vec<i32>,
    /// The final values of the vars completion functions write; empty when not recorded.
    pub end_vars: Vec<i64>,
    /// Per model thread, the lanes of a uniform agent whose observations (outside elected blocks)
    /// or end differed from its leader lane's (bit l: lane l); empty without uniform roles.
    pub lanes_apart: Vec<u32>,
}

impl Kernel {
    /// Parse a block of results (as written by the kernel) into per-thread raw records.
    pub fn parse_block(&self, words: &[i32]) -> BlockRecord {
        let layout = Layout::of_kernel(self);
        let mut threads = Vec::with_capacity(self.threads);
        for t in 0..self.threads {
            let r = &words[t * THREAD_WORDS..(t + 1) * THREAD_WORDS];
            let n = |k: usize| (r[k].max(0) as usize).min(CAP);
            let list = |l: usize, k: usize| &r[HEADER_WORDS + l * CAP..HEADER_WORDS + l * CAP + n(k)];
            threads.push(ThreadRecord {
                status: r[0],
                reads: list(0, 1).iter().map(|&v| v as i64).collect(),
                try_waits: list(1, 2).iter().map(|&v| v != 0).collect(),
                token_parities: list(2, 3).iter().map(|&v| v as u8).collect(),
                bad_expect: r[4].max(0) as u32,
                turn_lost: r[5] != 0,
            });
        }
        let completions = words[layout.completions()..layout.probes()]
            .iter()
            .map(|&v| v.max(0) as u32)
            .collect();
        let probes = words
            .get(layout.probes()..layout.end_vars())
            .map(|w| w.to_vec())
            .unwrap_or_default();
        let lanes_apart = if layout.uniform {
            words
                .get(layout.lanes_apart()..self.block_words)
                .map(|w| w.iter().map(|&v| v as u32).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let end_vars = match words.get(layout.end_vars()..layout.lanes_apart()) {
            Some(v) if v.len() > 1 && v[0] == 1 => v[1..]
                .chunks_exact(2)
                .map(|c| ((c[1] as u32 as u64) << 32 | c[0] as u32 as u64) as i64)
                .collect(),
            _ => Vec::new(),
        };
        BlockRecord {
            threads,
            completions,
            probes,
            end_vars,
            lanes_apart,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record the prelude's C++ writes is the one this module parses.
    #[test]
    fn the_prelude_spells_the_same_record() {
        let thread = include_str!("prelude/thread.cuh");
        assert!(thread.contains(&format!("#define PC_CAP {CAP}\n")));
        assert!(thread.contains(&format!("#define PC_HEADER {HEADER_WORDS}\n")));
        assert!(thread.contains("#define PC_THREAD_WORDS (PC_HEADER + 3 * PC_CAP)\n"));
        let statuses = format!(
            "PC_RUNNING = {}, PC_FINISHED = {}, PC_HUNG = {}, PC_ASSERT = {}, PC_UNSUPPORTED = {}, PC_OVERFLOW = {} ",
            status::RUNNING,
            status::FINISHED,
            status::HUNG,
            status::ASSERT_FAILED,
            status::UNSUPPORTED,
            status::OVERFLOW
        );
        assert!(thread.contains(&statuses));
        let rows = format!("(version >= 0 && version < {SRC_VERSIONS}) ? (int)version : {SRC_VERSIONS};");
        assert!(include_str!("prelude/memory.cuh").contains(&rows));
        assert!(include_str!("prelude/memory.cuh").contains(&format!("#define PC_SRC_VERSIONS {SRC_VERSIONS}\n")));
    }
}
