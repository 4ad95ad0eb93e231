//! What the importer recovered, and how sure it is: every barrier fact is `exact`, `assumed`
//! (with what was assumed) or `unresolved`, never guessed silently.

use crate::ptx::{Pos, SrcLoc};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Exact,
    Assumed(String),
    Unresolved(String),
}

#[derive(Clone, Debug)]
pub struct Fact {
    pub status: Status,
    /// What was recovered, e.g. "mbarrier.try_wait.parity polling loop -> wait_parity".
    pub what: String,
    pub pos: Pos,
    pub src: SrcLoc,
}

/// The facts of one import, one per (PTX position, what): a fact found by every thread that
/// runs an instruction is listed once.
#[derive(Default)]
pub struct Facts {
    map: BTreeMap<(u32, u32, u32, u32, String), Fact>,
    /// Data-path instructions dropped, by opcode family (counted once per instruction).
    pub dropped: BTreeMap<String, usize>,
    dropped_at: std::collections::BTreeSet<(u32, u32)>,
}

/// Facts sort by source line and merge across the copies the compiler made of one line
/// (unrolled loops, inlined helpers).
fn key(pos: Pos, src: SrcLoc, what: &str) -> (u32, u32, u32, u32, String) {
    match (src.outer, src.inner) {
        (Some(o), Some(i)) => (o.file, o.line, i.file, i.line, what.to_string()),
        _ => (u32::MAX, pos.line, 0, pos.col, what.to_string()),
    }
}

impl Facts {
    pub fn add(&mut self, status: Status, what: impl Into<String>, pos: Pos, src: SrcLoc) {
        let what = what.into();
        self.map.entry(key(pos, src, &what)).or_insert(Fact { status, what, pos, src });
    }
    pub fn exact(&mut self, what: impl Into<String>, pos: Pos, src: SrcLoc) {
        self.add(Status::Exact, what, pos, src)
    }
    pub fn assumed(&mut self, what: impl Into<String>, why: impl Into<String>, pos: Pos, src: SrcLoc) {
        self.add(Status::Assumed(why.into()), what, pos, src)
    }
    pub fn unresolved(&mut self, what: impl Into<String>, why: impl Into<String>, pos: Pos, src: SrcLoc) {
        self.add(Status::Unresolved(why.into()), what, pos, src)
    }
    pub fn drop_instr(&mut self, family: &str, pos: Pos) {
        if self.dropped_at.insert((pos.line, pos.col)) {
            *self.dropped.entry(family.to_string()).or_default() += 1;
        }
    }
    pub fn list(&self) -> impl Iterator<Item = &Fact> {
        self.map.values()
    }
    pub fn unresolved_count(&self) -> usize {
        self.map.values().filter(|f| matches!(f.status, Status::Unresolved(_))).count()
    }
}
