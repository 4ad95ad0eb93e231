//! Shared memory: buffers and shared vars, their byte ranges, the vector clocks that order
//! accesses (happens-before), phase knowledge, and the data races between unordered accesses.

/// A vector clock over agents: threads, then one async-copy engine per buffer.
pub type Clock = Box<[u32]>;

impl Cell {
    /// Every access record of the cell (whole-buffer and per range), for renamings.
    pub fn accesses_mut(&mut self) -> impl Iterator<Item = &mut Access> {
        self.last_write.iter_mut().chain(self.reads.iter_mut()).chain(
            self.parts
                .iter_mut()
                .flat_map(|r| r.last_write.iter_mut().chain(r.reads.iter_mut())),
        )
    }

    pub fn accesses(&self) -> impl Iterator<Item = &Access> {
        self.last_write
            .iter()
            .chain(self.reads.iter())
            .chain(self.parts.iter().flat_map(|r| r.last_write.iter().chain(r.reads.iter())))
    }

    /// The version of the byte at `at` (the whole buffer's while it has no per range records).
    pub fn value_at(&self, at: i64) -> i64 {
        self.parts.iter().find(|r| r.lo <= at && at < r.hi).map_or(self.value, |r| r.value)
    }
}

/// Race-tracking record for a buffer (value = version) or a shared var (value = its value).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    pub value: i64,
    /// Writes issued so far (a copy counts when issued): the default version of the next copy.
    pub writes: u32,
    pub last_write: Option<Access>,
    /// Reads since the last write, at most one per agent, sorted by agent.
    pub reads: Vec<Access>,
    /// An async copy into it is in flight.
    pub in_flight: bool,
    /// Issue 13: per byte range records, once a partial access (an `offset = ...` copy or read)
    /// touched the buffer; sorted, disjoint, covering the buffer. While non-empty they replace
    /// `value`, `last_write` and `reads`; empty whenever every range has the same record.
    pub parts: Vec<RangeRec>,
}

/// Issue 13: the race record and version of bytes `lo .. hi` of a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeRec {
    pub lo: i64,
    pub hi: i64,
    pub value: i64,
    pub last_write: Option<Access>,
    pub reads: Vec<Access>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub agent: u16,
    pub epoch: u32,
    /// Made by a completion function (a race with it is completion-misuse).
    pub in_completion: bool,
}

/// Pointwise maximum, for phase knowledge.
pub fn join_known(dst: &mut [i64], src: &[i64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        if *s > *d {
            *d = *s;
        }
    }
}

pub fn join_into(dst: &mut [u32], src: &[u32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        if *s > *d {
            *d = *s;
        }
    }
}

/// Whether an access is ordered before the point in time described by `clock`.
pub fn ordered_before(a: &Access, clock: &[u32]) -> bool {
    clock[a.agent as usize] >= a.epoch
}
