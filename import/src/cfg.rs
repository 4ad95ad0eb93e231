//! The control-flow graph of one function, its dominators and natural loops: what tells a
//! polling loop (a loop whose only effect is a `try_wait`/`test_wait`) from a loop that does
//! work, so that the first can become one `wait_parity`/`wait` with an `exact` fact.

use crate::ptx::{Function, Instr, Operand};
use std::collections::BTreeSet;

pub struct Block {
    pub start: usize,
    pub end: usize,
    pub succ: Vec<usize>,
    pub pred: Vec<usize>,
}

pub struct Loop {
    pub header: usize,
    pub blocks: BTreeSet<usize>,
}

pub struct Cfg {
    pub blocks: Vec<Block>,
    block_of: Vec<usize>,
    pub dom: Vec<BTreeSet<usize>>,
    pub loops: Vec<Loop>,
}

/// The label a `bra` jumps to.
pub fn branch_target(ins: &Instr) -> Option<&str> {
    if !ins.opcode.starts_with("bra") {
        return None;
    }
    match ins.operands.first() {
        Some(Operand::Sym(s)) => Some(s),
        _ => None,
    }
}

fn ends_block(ins: &Instr) -> bool {
    ins.opcode.starts_with("bra") || ins.opcode == "ret" || ins.opcode == "exit" || ins.opcode.starts_with("trap")
}

impl Cfg {
    pub fn new(f: &Function) -> Cfg {
        let n = f.body.len();
        let mut leader = vec![false; n + 1];
        leader[0] = true;
        for &at in f.labels.values() {
            leader[at.min(n)] = true;
        }
        for (i, ins) in f.body.iter().enumerate() {
            if ends_block(ins) {
                leader[i + 1] = true;
            }
        }
        let mut blocks = Vec::new();
        let mut block_of = vec![0; n + 1];
        let mut s = 0;
        for i in 1..=n {
            if leader[i] {
                if i > s {
                    blocks.push(Block {
                        start: s,
                        end: i,
                        succ: Vec::new(),
                        pred: Vec::new(),
                    });
                }
                s = i;
            }
        }
        for (b, blk) in blocks.iter().enumerate() {
            for slot in &mut block_of[blk.start..blk.end] {
                *slot = b;
            }
        }
        block_of[n] = blocks.len();
        let nb = blocks.len();
        for b in 0..nb {
            let last = &f.body[blocks[b].end - 1];
            let mut succ = Vec::new();
            let falls = !(ends_block(last) && last.guard.is_none());
            if let Some(t) = branch_target(last) {
                if let Some(&at) = f.labels.get(t) {
                    if at < n {
                        succ.push(block_of[at]);
                    }
                }
            }
            if falls && blocks[b].end < n {
                succ.push(b + 1);
            }
            blocks[b].succ = succ;
        }
        for b in 0..nb {
            for s in blocks[b].succ.clone() {
                blocks[s].pred.push(b);
            }
        }
        // Dominators, iteratively (the bodies are small).
        let all: BTreeSet<usize> = (0..nb).collect();
        let mut dom: Vec<BTreeSet<usize>> = (0..nb).map(|b| if b == 0 { [0].into() } else { all.clone() }).collect();
        let mut changed = true;
        while changed {
            changed = false;
            for b in 1..nb {
                let mut d: Option<BTreeSet<usize>> = None;
                for &p in &blocks[b].pred {
                    d = Some(match d {
                        None => dom[p].clone(),
                        Some(d) => d.intersection(&dom[p]).copied().collect(),
                    });
                }
                let mut d = d.unwrap_or_default();
                d.insert(b);
                if d != dom[b] {
                    dom[b] = d;
                    changed = true;
                }
            }
        }
        // Natural loops: a back edge b -> h (h dominates b) and what reaches b without h.
        let mut loops = Vec::new();
        for b in 0..nb {
            for &h in &blocks[b].succ {
                if dom[b].contains(&h) {
                    let mut body: BTreeSet<usize> = [h, b].into();
                    let mut work = vec![b];
                    while let Some(x) = work.pop() {
                        if x == h {
                            continue;
                        }
                        for &p in &blocks[x].pred {
                            if body.insert(p) {
                                work.push(p);
                            }
                        }
                    }
                    loops.push(Loop { header: h, blocks: body });
                }
            }
        }
        Cfg {
            blocks,
            block_of,
            dom,
            loops,
        }
    }

    pub fn block_of(&self, instr: usize) -> usize {
        self.block_of[instr]
    }

    /// The smallest natural loop holding instruction `i`.
    pub fn innermost_loop(&self, i: usize) -> Option<&Loop> {
        let b = self.block_of(i);
        self.loops.iter().filter(|l| l.blocks.contains(&b)).min_by_key(|l| l.blocks.len())
    }

    /// The instructions of a loop, in order.
    pub fn loop_instrs(&self, l: &Loop) -> Vec<usize> {
        l.blocks.iter().flat_map(|&b| self.blocks[b].start..self.blocks[b].end).collect()
    }
}
