//! A thread: its pc, status, locals, clock and phase knowledge, and the rules that move it
//! on its own (branches, release of a thread a barrier let go, a thread that can only spin).

use super::memory::Clock;
use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Running,
    /// Arrived at `syncwarp`, waiting for the rest of the warp.
    AtSyncWarp,
    /// Arrived at `syncthreads`, waiting for the rest of the CTA.
    AtSyncThreads,
    /// Executed `bar_sync`/`bar_arrive`, waiting for the other lanes of its warp (the
    /// warp arrives as one).
    AtNamedBar,
    /// Its warp arrived at a `bar_sync`; waiting for the named barrier to complete.
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

impl Exec<'_> {
    /// Released threads (a barrier or collective let them go) run their local code as part of
    /// the releasing step; the step's own agent and thread are restored after each.
    pub(crate) fn run_released(&mut self, released: impl IntoIterator<Item = usize>) {
        for t in released {
            if self.ended {
                return;
            }
            let (agent, thread) = (self.agent, self.thread);
            self.run_local(t);
            self.agent = agent;
            self.thread = thread;
        }
    }

    pub(super) fn branch(&mut self, t: usize, pc: usize, taken: bool, else_to: u32) {
        let role = self.p().threads[t].role as usize;
        let th = &mut self.s.threads[t];
        if self.m.tracks_path[role] {
            th.path.push(((pc as u32) << 1) | taken as u32);
        }
        th.pc = if taken { pc as u32 + 1 } else { else_to };
    }
}

impl Model {
    /// A thread that can only spin: from `s`, running it alone returns to `s` within a few
    /// steps, changing nothing but its own pc and locals on the way (a `while` loop polling a
    /// `try_wait` or a shared var that no one else can change any more).
    pub fn spins(&self, s: &State, t: usize) -> bool {
        const MAX_STEPS: usize = 16;
        if !self.proto.code_of(t).has_while {
            return false;
        }
        // Only the thread's own step counts (an election enables the same action for a thread
        // waiting at `elect()`, which is not a spin). Every state of the walk is stepped into a
        // spare kept per expansion thread: the search asks this of nearly every state of a
        // protocol with a `while` loop, and a fresh copy per question cost as much as the
        // state's own successors.
        let me = Action::Thread(t as u16);
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            let mut cur: Option<State> = None;
            let mut spins = false;
            for _ in 0..MAX_STEPS {
                let c = cur.as_ref().unwrap_or(s);
                if c.threads[t].status != Status::Running || !self.runs(c, t) {
                    break;
                }
                let o = self.step_reusing(c, me, spare.take());
                let Some(n) = o.next else { break };
                let (same, back) = if o.violations.is_empty() && o.internal.is_none() {
                    (same_but_locals(s, &n, t), n == *s)
                } else {
                    (false, false)
                };
                // The state left behind is the next step's spare.
                *spare = cur.replace(n).or(spare.take());
                if !same {
                    break;
                }
                if back {
                    spins = true;
                    break;
                }
            }
            if let Some(c) = cur {
                *spare = Some(c);
            }
            spins
        })
    }
}

thread_local! {
    /// The state `Model::spins` steps into, kept between its calls.
    static SPARE: std::cell::RefCell<Option<State>> = const { std::cell::RefCell::new(None) };
}

/// Equal but for thread `t`'s pc and locals.
pub(super) fn same_but_locals(a: &State, b: &State, t: usize) -> bool {
    a.threads.iter().zip(b.threads.iter()).enumerate().all(|(i, (x, y))| {
        if i == t {
            x.status == y.status && x.clock == y.clock && x.known == y.known && x.path == y.path && x.commit_seq == y.commit_seq
        } else {
            x == y
        }
    }) && a.barriers == b.barriers
        && a.buffers == b.buffers
        && a.vars == b.vars
        && a.copies == b.copies
        && a.engines == b.engines
        && a.engines_known == b.engines_known
        && a.commit_logs == b.commit_logs
        && a.named == b.named
        && a.proxy == b.proxy
}

/// The status as one word of a packed state (and a sort key of the symmetry reduction).
pub(super) fn status_word(s: Status) -> u32 {
    match s {
        Status::Running => 0,
        Status::AtSyncWarp => 1,
        Status::AtSyncThreads => 2,
        Status::Done => 3,
        Status::AtNamedBar => 4,
        Status::AtNamedWait => 5,
        Status::AtClusterWait => 6,
    }
}
