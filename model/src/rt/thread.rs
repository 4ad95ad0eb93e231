//! A thread: its pc, status, locals, clock and phase knowledge, and the rules that move it
//! on its own (branches, release of a thread a barrier let go, a thread that can only spin).

use super::memory::Clock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Running,
    /// Arrived at `syncwarp`, waiting for the rest of the warp.
    AtSyncWarp,
    /// Arrived at `syncthreads`, waiting for the rest of the CTA.
    AtSyncThreads,
    /// Issue 13: executed `bar_sync`/`bar_arrive`, waiting for the other lanes of its warp (the
    /// warp arrives as one).
    AtNamedBar,
    /// Issue 13: its warp arrived at a `bar_sync`; waiting for the named barrier to complete.
    AtNamedWait,
    /// Cluster scope: at `cluster_wait`, until the phase it arrived on completes.
    AtClusterWait,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadState {
    /// Always at a visible instruction (or past the end when done).
    pub pc: u32,
    pub status: Status,
    pub locals: Box<[i64]>,
    pub clock: Clock,
    /// Per barrier: the latest phase this thread knows the barrier reached (SEMANTICS.md's K),
    /// which decides the phase a parity wait names. It grows with the thread's own arrivals and
    /// successful waits, and with what it acquires from others (docs/model.md).
    pub known: Box<[i64]>,
    /// Branch outcomes since the last `syncwarp`, as `pc << 1 | taken`, kept only in roles that
    /// `commit` (nothing else reads it). Lanes of one role are converged while one's path is a
    /// prefix of the other's (the one behind has not yet reached a branch where they could part);
    /// they diverged once their paths differ.
    pub path: Vec<u32>,
    /// Commits executed since the last `syncwarp`.
    pub commit_seq: u16,
}

impl ThreadState {
    /// A hash of the role and the path, naming the converged group in commit logs. Two roles
    /// that share a warp are diverged from the start (docs/model.md): their lanes never form one
    /// group, exactly as if one role had split them with `if`.
    pub fn path_sig(&self, role: u16) -> u64 {
        std::iter::once(0x8000_0000 | role as u32)
            .chain(self.path.iter().copied())
            .fold(0xcbf2_9ce4_8422_2325u64, |h, d| (h ^ d as u64).wrapping_mul(0x100_0000_01b3))
    }
}
