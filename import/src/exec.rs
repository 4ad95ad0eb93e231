//! Runs the kernel once per thread of the block on a per-register value domain: constants,
//! thread indices, kernel params given with `--param`, shared-memory symbol + offset and
//! arrival tokens are known; everything else (global memory, clocks, shuffles) is unknown. The
//! thread's path is thereby exact wherever its branches depend on known values (the role
//! structure, loop trips, phase bits flipped each round), and a branch on an unknown value is
//! reported `unresolved`. Barrier operations become [`Event`]s; data-path code is dropped and
//! counted.

use crate::cfg::Cfg;
use crate::events::{expected_tx, given_bytes};
pub use crate::events::{Bar, Event, Launch, Op, ThreadRun, Val};
use crate::facts::Facts;
use crate::ptx::{type_bytes, Function, Module, Operand, SrcLoc};
use crate::values::{family, norm, shfl_source, ty_of, vec_len};
use std::collections::HashMap;

const STEP_LIMIT: usize = 2_000_000;

/// Register-only instructions: no memory, no synchronisation, no control flow but `bra`.
const PURE: &[&str] = &[
    "bra", "setp", "selp", "mov", "add", "sub", "mul", "mad", "div", "rem", "and", "or", "xor", "not", "shl", "shr", "cvt", "min", "max",
    "neg", "abs", "bfe", "bfi", "prmt", "set", "slct", "clz", "popc", "brev", "lop3",
];

fn head_is_bra(ins: &crate::ptx::Instr) -> bool {
    ins.parts()[0] == "bra"
}

struct Frame<'m> {
    f: &'m Function,
    pc: usize,
    regs: HashMap<String, Val>,
    /// The `.param` space: the function's own params, and the call arguments it stages.
    params: HashMap<String, Val>,
    /// Where the caller wants the callee's return params (caller-side names).
    ret_to: Vec<String>,
}

pub struct Interp<'m> {
    m: &'m Module,
    cfgs: HashMap<String, Cfg>,
    pub facts: Facts,
    /// The value each thread passed to each execution of a `shfl.sync`: (thread, PTX line and
    /// column, how many times before the thread ran it) -> the value. Threads run in order, so
    /// a lane reading a lower lane (`__shfl_sync(~0, x, 0)`) finds its value here.
    shfl_sent: HashMap<(u32, (u32, u32), usize), Val>,
    /// Numbers for shared addresses whose bits the kernel takes apart.
    layout: crate::desc::Layout,
}

impl<'m> Interp<'m> {
    pub fn new(m: &'m Module) -> Interp<'m> {
        let cfgs = m
            .functions
            .iter()
            .filter(|f| !f.body.is_empty())
            .map(|f| (f.name.clone(), Cfg::new(f)))
            .collect();
        Interp {
            m,
            cfgs,
            facts: Facts::default(),
            shfl_sent: HashMap::new(),
            layout: crate::desc::Layout::new(m),
        }
    }

    /// Is the loop around instruction `i` of `f` a loop that only polls it?
    fn polling_loop(&self, f: &Function, i: usize) -> Option<bool> {
        let cfg = self.cfgs.get(&f.name)?;
        let l = cfg.innermost_loop(i)?;
        let pure = cfg.loop_instrs(l).into_iter().all(|k| {
            let ins = &f.body[k];
            k == i
                || matches!(
                    ins.parts()[0],
                    "bra" | "setp" | "selp" | "mov" | "add" | "sub" | "and" | "or" | "xor" | "not" | "cvt" | "nanosleep"
                        // a back-off's arithmetic (libcu++ halves the time since the first poll)
                        | "shr" | "shl" | "mul" | "min" | "max"
                )
        });
        Some(pure)
    }

    /// A `bra` at `i` whose predicate is unknown, and which the importer can still decide:
    /// whether it is taken, and the fact (what, why). Two such branches:
    ///
    /// - one of its two ways runs straight into `trap` (a kernel's own check that aborts, such
    ///   as cooperative groups' `grid.sync()` on a grid that was not launched cooperatively, or
    ///   an `assert`): the other way is taken, as on every run that does not abort;
    /// - it leaves (or stays in) a loop whose only effects are loads of global memory (`.global`,
    ///   or generic at `.gpu`/`.sys` scope: a spin on a flag another CTA sets, as `grid.sync()`'s
    ///   wait for the other blocks): the loop is taken as ending, since what other CTAs write is
    ///   outside a one-CTA import.
    ///
    /// Every other unknown branch stays `unresolved`.
    fn unknown_branch(&self, f: &Function, i: usize) -> Option<(bool, String, String)> {
        let ins = &f.body[i];
        let target = *f.labels.get(crate::cfg::branch_target(ins)?)?;
        let aborts = |mut k: usize| -> bool {
            let mut seen = 0;
            while let Some(x) = f.body.get(k) {
                if x.guard.is_some() || seen > 64 {
                    return false;
                }
                match x.parts()[0] {
                    "trap" => return true,
                    // the message an assert prints before it aborts
                    "call" => {
                        let callee = x.operands.iter().find_map(|o| match o {
                            Operand::Sym(s) if self.m.function(s).map_or(true, |g| g.body.is_empty()) => Some(s.as_str()),
                            _ => None,
                        });
                        if !matches!(callee, Some("__assertfail" | "vprintf")) {
                            return false;
                        }
                    }
                    h if PURE.contains(&h) || (h == "st" || h == "ld") && x.has("param") || h == "cvta" => {}
                    _ => return false,
                }
                seen += 1;
                k += 1;
            }
            false
        };
        let (to_trap, other) = (aborts(target), aborts(i + 1));
        if to_trap != other {
            return Some((
                !to_trap,
                format!("`{}` on an unknown value, one way to `trap`", ins.opcode),
                "the kernel's own check does not abort (the way to `trap` is not imported)".into(),
            ));
        }
        let cfg = self.cfgs.get(&f.name)?;
        let l = cfg.innermost_loop(i)?;
        let body = cfg.loop_instrs(l);
        let spin = body.iter().all(|&k| {
            let x = &f.body[k];
            let h = x.parts()[0];
            // a load of global memory: `.global`, or a generic load at GPU or system scope (what
            // other CTAs write; `grid.sync()`'s `ld.acquire.gpu`); a generic load without a
            // scope may read shared memory, a flag of this CTA's, so such a loop is not decided
            let global = x.has("global") || x.has("gpu") || x.has("sys");
            PURE.contains(&h) || h == "ld" && global && !x.has("shared") && !x.has("param") && !x.has("local") || h == "nanosleep"
        }) && body.iter().any(|&k| f.body[k].parts()[0] == "ld");
        if !spin {
            return None;
        }
        let stays = body.contains(&target);
        let leaves_too = body.contains(&(i + 1));
        if stays == leaves_too {
            return None;
        }
        Some((
            !stays,
            format!("`{}` on an unknown value: a loop that only polls global memory", ins.opcode),
            "the loop is taken as ending (what other CTAs write is outside a one-CTA import)".into(),
        ))
    }

    /// Run thread `tid` (x, y, z) of the block through entry `entry`.
    pub fn run(&mut self, entry: &'m Function, tid: [u32; 3], launch: &Launch) -> ThreadRun {
        let mut run = ThreadRun::default();
        let b = launch.block;
        let linear = tid[0] + tid[1] * b[0] + tid[2] * b[0] * b[1];
        let lane = linear % 32;
        let mut tokens = 0usize;
        let mut shfl_runs: HashMap<(u32, u32), usize> = HashMap::new();
        // the shared-memory operands of the wgmma group being built (closed by its commit)
        let mut wgmma_bufs: Vec<(String, i64)> = Vec::new();
        let mut wgmma_lost = false;
        // the params' values by key: a whole param (`NAME`) or a field of a struct param
        // (`NAME+OFF`), as `--param` gave them; a field not given is unknown
        let mut kparams = HashMap::new();
        for p in &entry.params {
            kparams.insert(p.clone(), Val::Unknown);
        }
        for (k, v) in launch.params {
            if let Some(key) = crate::events::entry_param_key(entry, k) {
                kparams.insert(key, Val::Int(*v));
            }
        }
        let mut stack = vec![Frame {
            f: entry,
            pc: 0,
            regs: HashMap::new(),
            params: kparams,
            ret_to: Vec::new(),
        }];
        let mut steps = 0;
        let special = |name: &str| -> Option<Val> {
            let v = match name {
                "%tid.x" => tid[0] as i64,
                "%tid.y" => tid[1] as i64,
                "%tid.z" => tid[2] as i64,
                "%ntid.x" => b[0] as i64,
                "%ntid.y" => b[1] as i64,
                "%ntid.z" => b[2] as i64,
                "%laneid" => lane as i64,
                "%warpid" => (linear / 32) as i64,
                "%nwarpid" => 48,
                "%ctaid.x" | "%ctaid.y" | "%ctaid.z" | "%cluster_ctarank" => 0,
                "%clusterid.x" | "%clusterid.y" | "%clusterid.z" => 0,
                "%cluster_ctaid.x" | "%cluster_ctaid.y" | "%cluster_ctaid.z" => 0,
                "%nctaid.x" | "%nctaid.y" | "%nctaid.z" | "%cluster_nctarank" => 1,
                "%cluster_nctaid.x" | "%cluster_nctaid.y" | "%cluster_nctaid.z" => 1,
                "%nclusterid.x" | "%nclusterid.y" | "%nclusterid.z" => 1,
                "%lanemask_eq" => 1i64 << lane,
                "%lanemask_lt" => (1i64 << lane) - 1,
                "%lanemask_le" => (1i64 << (lane + 1)) - 1,
                _ => return None,
            };
            Some(Val::Int(v))
        };
        loop {
            let depth = stack.len();
            let Some(fr) = stack.last_mut() else { break };
            steps += 1;
            if steps > STEP_LIMIT {
                self.facts.unresolved(
                    format!("thread {linear} did not finish"),
                    format!("{STEP_LIMIT} instructions ran: a loop on a value the importer cannot compute?"),
                    fr.f.pos,
                    SrcLoc::default(),
                );
                break;
            }
            let f = fr.f;
            if fr.pc >= f.body.len() {
                // falls off the end: a return
                let done = stack.pop().unwrap();
                if let Some(caller) = stack.last_mut() {
                    for (k, r) in done.ret_to.iter().enumerate() {
                        let v = f.rets.get(k).and_then(|n| done.params.get(n)).cloned().unwrap_or(Val::Unknown);
                        caller.params.insert(r.clone(), v);
                    }
                }
                continue;
            }
            let i = fr.pc;
            let ins = &f.body[i];
            fr.pc += 1;
            let get = |fr: &Frame, o: &Operand| -> Val {
                match o {
                    Operand::Imm(v) => Val::Int(*v),
                    Operand::Reg(r) => special(r).unwrap_or_else(|| fr.regs.get(r).cloned().unwrap_or(Val::Unknown)),
                    Operand::Sym(s) => {
                        if self.m.shared_var(s).is_some() {
                            Val::Sh(s.clone(), 0)
                        } else if fr.f.is_entry && fr.f.params.contains(s) {
                            Val::Param(s.clone())
                        } else {
                            Val::Unknown
                        }
                    }
                    _ => Val::Unknown,
                }
            };
            // The address an operand `[x+off]` names.
            // a number in a shared-memory operand is an address under the assumed layout
            let shared_space = ins.opcode.split('.').any(|p| p.starts_with("shared")) || ins.opcode.starts_with("mbarrier");
            let addr = |fr: &Frame, o: &Operand| -> Val {
                match o {
                    Operand::Addr(base, off) => match get(fr, base) {
                        Val::Sh(s, k) => Val::Sh(s, k + off),
                        Val::Param(p) => match p.rsplit_once('+').and_then(|(b, o)| Some((b, o.parse::<i64>().ok()?))) {
                            Some((b, o)) => Val::Param(crate::events::param_key(b, o + off)),
                            None => Val::Param(crate::events::param_key(&p, *off)),
                        },
                        Val::Int(a) if shared_space => match self.layout.symbol(a + off) {
                            Some((s, k)) => Val::Sh(s, k),
                            None => Val::Unknown,
                        },
                        _ => Val::Unknown,
                    },
                    _ => Val::Unknown,
                }
            };
            if let Some((g, neg)) = &ins.guard {
                match get(fr, &Operand::Reg(g.clone())) {
                    Val::Int(v) => {
                        if (v != 0) == *neg {
                            continue;
                        }
                    }
                    // A branch on an unknown value may still be decided (unknown_branch: a branch
                    // to `trap`, a spin on global memory); any other unknown guard is unresolved.
                    _ => match if head_is_bra(ins) { self.unknown_branch(f, i) } else { None } {
                        Some((taken, what, why)) => {
                            self.facts.assumed(what, why, ins.pos, ins.src);
                            if !taken {
                                continue;
                            }
                        }
                        None => {
                            self.facts.unresolved(
                                format!("guard @{}{g} of `{}`", if *neg { "!" } else { "" }, ins.opcode),
                                "the predicate depends on a value the importer cannot compute; the instruction is taken as not executed",
                                ins.pos,
                                ins.src,
                            );
                            continue;
                        }
                    },
                }
            }
            let ops = &ins.operands;
            let head = ins.parts()[0];
            let (bits, signed) = ty_of(ins);
            let emit = |op: Op, run: &mut ThreadRun| {
                run.events.push(Event {
                    op,
                    pos: ins.pos,
                    src: ins.src,
                })
            };
            let set = |fr: &mut Frame, o: &Operand, v: Val| {
                if let Operand::Reg(r) = o {
                    fr.regs.insert(r.clone(), v);
                }
            };
            let int = |v: &Val| match v {
                Val::Int(x) => Some(*x),
                _ => None,
            };
            let bar_of = |fr: &Frame, o: Option<&Operand>| -> Option<Bar> {
                match o.map(|o| addr(fr, o)) {
                    Some(Val::Sh(s, k)) => Some((s, k)),
                    _ => None,
                }
            };
            let unresolved_bar = |this: &mut Self, why: &str| {
                this.facts
                    .unresolved(format!("`{}`", ins.opcode), why.to_string(), ins.pos, ins.src);
            };
            match head {
                "mov" => {
                    match (&ops[0], ops.get(1)) {
                        // mov.b64 d, {lo, hi}: the halves packed
                        (_, Some(Operand::List(v))) if v.len() == 2 => {
                            let half = (bits / 2).max(1);
                            let m = if half >= 64 { -1i64 } else { (1i64 << half) - 1 };
                            let r = match (get(fr, &v[0]), get(fr, &v[1])) {
                                (Val::Int(lo), Val::Int(hi)) => Val::Int((lo & m) | (hi & m).wrapping_shl(half)),
                                _ => Val::Unknown,
                            };
                            set(fr, &ops[0], r);
                        }
                        // mov.b64 {lo, hi}, s: the halves taken apart
                        (Operand::List(d), Some(src)) if d.len() == 2 => {
                            let half = (bits / 2).max(1);
                            let m = if half >= 64 { -1i64 } else { (1i64 << half) - 1 };
                            match get(fr, src) {
                                Val::Int(x) => {
                                    set(fr, &d[0], Val::Int(x & m));
                                    set(fr, &d[1], Val::Int(x.wrapping_shr(half) & m));
                                }
                                _ => d.iter().for_each(|o| set(fr, o, Val::Unknown)),
                            }
                        }
                        _ => {
                            let v = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                            let v = match v {
                                Val::Int(x) => Val::Int(norm(x, bits, signed)),
                                v => v,
                            };
                            set(fr, &ops[0], v);
                        }
                    }
                }
                "add" | "sub" | "mul" | "mad" | "div" | "rem" | "and" | "or" | "xor" | "shl" | "shr" | "min" | "max" => {
                    let wide = ins.has("wide");
                    let (sb, sg) = (bits, signed);
                    let a = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let bv = ops.get(2).map_or(Val::Unknown, |o| get(fr, o));
                    let na = |x: i64| norm(x, sb, sg);
                    // an address taken apart (masked, shifted, packed into a descriptor) or
                    // combined with another symbol's is a number under the assumed layout
                    let follows = matches!(
                        (head, &a, &bv),
                        ("add", Val::Sh(..), Val::Int(_))
                            | ("add", Val::Int(_), Val::Sh(..))
                            | ("sub", Val::Sh(..), Val::Int(_))
                    ) || matches!((head, &a, &bv), ("sub", Val::Sh(s, _), Val::Sh(t, _)) if s == t);
                    let (a, bv) = if !follows && (matches!(a, Val::Sh(..)) || matches!(bv, Val::Sh(..))) {
                        let num = |v: Val| match v {
                            Val::Sh(s, k) => self.layout.address(&s, k).map_or(Val::Unknown, Val::Int),
                            v => v,
                        };
                        let (a, bv) = (num(a), num(bv));
                        if matches!((&a, &bv), (Val::Int(_), Val::Int(_))) {
                            self.facts.assumed(
                                format!("`{}` on a shared address -> a number", ins.opcode),
                                "the address is taken as the compiler's layout would place it (static symbols in order at their alignment, dynamic shared memory after them)",
                                ins.pos,
                                ins.src,
                            );
                        }
                        (a, bv)
                    } else {
                        (a, bv)
                    };
                    let r = match (head, &a, &bv) {
                        ("add", Val::Sh(s, k), Val::Int(x)) | ("add", Val::Int(x), Val::Sh(s, k)) => Val::Sh(s.clone(), k + x),
                        ("sub", Val::Sh(s, k), Val::Int(x)) => Val::Sh(s.clone(), k - x),
                        ("sub", Val::Sh(s, k), Val::Sh(t, j)) if s == t => Val::Int(k - j),
                        (_, Val::Int(x), Val::Int(y)) => {
                            let (x, y) = (na(*x), na(*y));
                            let res = match head {
                                "add" => Some(x.wrapping_add(y)),
                                "sub" => Some(x.wrapping_sub(y)),
                                "mul" if ins.has("hi") => None,
                                "mul" => Some(x.wrapping_mul(y)),
                                "mad" => ops.get(3).and_then(|o| int(&get(fr, o))).map(|c| x.wrapping_mul(y).wrapping_add(c)),
                                "div" if y != 0 => Some(if sg { x / y } else { (x as u64 / y as u64) as i64 }),
                                "rem" if y != 0 => Some(if sg { x % y } else { (x as u64 % y as u64) as i64 }),
                                "and" => Some(x & y),
                                "or" => Some(x | y),
                                "xor" => Some(x ^ y),
                                "shl" => Some(x.wrapping_shl(y as u32)),
                                "shr" if sg => Some(x.wrapping_shr(y as u32)),
                                "shr" => Some(((x as u64).wrapping_shr(y as u32)) as i64),
                                "min" => Some(x.min(y)),
                                "max" => Some(x.max(y)),
                                _ => None,
                            };
                            match res {
                                Some(v) if wide => Val::Int(v),
                                Some(v) => Val::Int(norm(v, bits, signed)),
                                None => Val::Unknown,
                            }
                        }
                        _ => Val::Unknown,
                    };
                    if r == Val::Unknown {
                        self.facts.drop_instr("arithmetic", ins.pos);
                    }
                    set(fr, &ops[0], r);
                }
                "not" | "neg" | "abs" | "cnot" => {
                    let a = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let r = int(&a).map_or(Val::Unknown, |x| {
                        Val::Int(norm(
                            match head {
                                "not" if bits == 1 => (x == 0) as i64,
                                "not" => !x,
                                "neg" => x.wrapping_neg(),
                                "cnot" => (x == 0) as i64,
                                _ => x.abs(),
                            },
                            bits,
                            signed,
                        ))
                    });
                    set(fr, &ops[0], r);
                }
                "setp" => {
                    let cmp = ins.parts()[1];
                    let p = ins.parts();
                    let ty = p
                        .iter()
                        .rev()
                        .find(|t| type_bytes(&format!(".{t}")).is_some())
                        .copied()
                        .unwrap_or("s64");
                    let tb = type_bytes(&format!(".{ty}")).unwrap_or(8) as u32 * 8;
                    let sg = ty.starts_with('s');
                    let a = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let bv = ops.get(2).map_or(Val::Unknown, |o| get(fr, o));
                    let r = match (&a, &bv) {
                        (Val::Int(x), Val::Int(y)) => {
                            let (x, y) = (norm(*x, tb, sg), norm(*y, tb, sg));
                            let (ux, uy) = (x as u64, y as u64);
                            let c = match cmp {
                                "eq" => Some(x == y),
                                "ne" => Some(x != y),
                                "lt" => Some(x < y),
                                "le" => Some(x <= y),
                                "gt" => Some(x > y),
                                "ge" => Some(x >= y),
                                "lo" => Some(ux < uy),
                                "ls" => Some(ux <= uy),
                                "hi" => Some(ux > uy),
                                "hs" => Some(ux >= uy),
                                _ => None,
                            };
                            c.map_or(Val::Unknown, |c| Val::Int(c as i64))
                        }
                        (Val::Sh(s, k), Val::Sh(t, j)) if s == t && (cmp == "eq" || cmp == "ne") => {
                            Val::Int(((k == j) == (cmp == "eq")) as i64)
                        }
                        _ => Val::Unknown,
                    };
                    // an optional boolean combine: setp.CMP.BOOL.T p, a, b, c
                    let r = match (p.get(2).copied(), ops.get(3).map(|o| get(fr, o)), &r) {
                        (Some("and"), Some(Val::Int(c)), Val::Int(x)) => Val::Int(((*x != 0) && c != 0) as i64),
                        (Some("or"), Some(Val::Int(c)), Val::Int(x)) => Val::Int(((*x != 0) || c != 0) as i64),
                        (Some("and" | "or" | "xor"), _, _) => Val::Unknown,
                        _ => r,
                    };
                    match &ops[0] {
                        Operand::Pair(pp, q) => {
                            set(fr, pp, r.clone());
                            set(fr, q, int(&r).map_or(Val::Unknown, |x| Val::Int((x == 0) as i64)));
                        }
                        o => set(fr, o, r),
                    }
                }
                "selp" => {
                    let c = ops.get(3).map_or(Val::Unknown, |o| get(fr, o));
                    let r = match c {
                        Val::Int(c) => get(fr, &ops[if c != 0 { 1 } else { 2 }]),
                        _ => Val::Unknown,
                    };
                    set(fr, &ops[0], r);
                }
                "cvt" | "cvta" => {
                    let v = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let v = match v {
                        Val::Int(x) if head == "cvt" => Val::Int(norm(norm(x, 64, true), bits, signed)),
                        Val::Sh(..) if ins.has("global") => Val::Unknown,
                        v => v,
                    };
                    set(fr, &ops[0], v);
                }
                "mapa" => {
                    // the import is of a cluster of one CTA: rank 0 is the CTA itself
                    let a = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let rank = ops.get(2).map(|o| get(fr, o)).as_ref().and_then(int);
                    let v = match (a, rank) {
                        (Val::Sh(s, k), Some(0)) => {
                            self.facts.assumed(
                                "mapa of rank 0 -> the CTA's own shared address",
                                "the cluster is one CTA (the import's launch): rank 0 is this CTA, and no peer CTA is imported",
                                ins.pos,
                                ins.src,
                            );
                            Val::Sh(s, k)
                        }
                        (_, Some(r)) if r != 0 => {
                            unresolved_bar(self, "a peer CTA's shared memory (the import is of a cluster of one CTA)");
                            Val::Unknown
                        }
                        _ => {
                            unresolved_bar(self, "the address or the CTA rank is not a value the importer can compute");
                            Val::Unknown
                        }
                    };
                    set(fr, &ops[0], v);
                }
                "ld" | "ldu" => {
                    let a = ops.get(1).map_or(Val::Unknown, |o| addr(fr, o));
                    let v = match (&a, ins.has("param")) {
                        (Val::Param(p), true) => fr.params.get(p).cloned().unwrap_or(Val::Unknown),
                        (_, true) => match ops.get(1) {
                            Some(Operand::Addr(b, off)) => match &**b {
                                Operand::Sym(s) => fr.params.get(&crate::events::param_key(s, *off)).cloned().unwrap_or(Val::Unknown),
                                _ => Val::Unknown,
                            },
                            _ => Val::Unknown,
                        },
                        (Val::Sh(s, k), false) => {
                            let n = (bits as i64 / 8).max(1) * vec_len(ins);
                            emit(
                                Op::Read {
                                    buf: s.clone(),
                                    off: *k,
                                    bytes: n,
                                },
                                &mut run,
                            );
                            Val::Unknown
                        }
                        _ => {
                            if ins.has("shared") {
                                unresolved_bar(self, "a shared-memory load from an address the importer cannot compute");
                            } else {
                                self.facts.drop_instr("ld (global/local)", ins.pos);
                            }
                            Val::Unknown
                        }
                    };
                    match &ops[0] {
                        Operand::List(v) => v.iter().for_each(|o| set(fr, o, Val::Unknown)),
                        o => set(fr, o, v),
                    }
                }
                "st" => {
                    let a = ops.first().map_or(Val::Unknown, |o| addr(fr, o));
                    if ins.has("param") {
                        if let Some(Operand::Addr(b, 0)) = ops.first() {
                            if let Operand::Sym(s) = &**b {
                                let v = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                                fr.params.insert(s.clone(), v);
                            }
                        }
                    } else if let Val::Sh(s, k) = a {
                        let n = (bits as i64 / 8).max(1) * vec_len(ins);
                        emit(Op::Write { buf: s, off: k, bytes: n }, &mut run);
                    } else if ins.has("shared") {
                        unresolved_bar(self, "a shared-memory store to an address the importer cannot compute");
                    } else {
                        self.facts.drop_instr("st (global/local)", ins.pos);
                    }
                }
                "bra" => {
                    if let Some(Operand::Sym(t)) = ops.first() {
                        match f.labels.get(t) {
                            Some(&at) => fr.pc = at,
                            None => {
                                unresolved_bar(self, "a branch to a label this function does not define");
                                stack.clear();
                            }
                        }
                    }
                }
                "ret" | "exit" | "trap" => {
                    if head != "ret" || depth == 1 {
                        stack.clear();
                        continue;
                    }
                    fr.pc = f.body.len();
                }
                "call" => {
                    let (mut rets, mut callee, mut args) = (Vec::new(), None, Vec::new());
                    for o in ops {
                        match o {
                            Operand::List(v) if callee.is_none() => rets = v.clone(),
                            Operand::List(v) => args = v.clone(),
                            Operand::Sym(s) if callee.is_none() => callee = Some(s.clone()),
                            _ => {}
                        }
                    }
                    match callee.as_deref().and_then(|c| self.m.function(c)) {
                        Some(g) => {
                            let mut params = HashMap::new();
                            for (k, p) in g.params.iter().enumerate() {
                                let v = match args.get(k) {
                                    Some(Operand::Sym(s)) => fr.params.get(s).cloned().unwrap_or(Val::Unknown),
                                    Some(o) => get(fr, o),
                                    None => Val::Unknown,
                                };
                                params.insert(p.clone(), v);
                            }
                            let ret_to = rets
                                .iter()
                                .filter_map(|o| match o {
                                    Operand::Sym(s) | Operand::Reg(s) => Some(s.clone()),
                                    _ => None,
                                })
                                .collect();
                            stack.push(Frame {
                                f: g,
                                pc: 0,
                                regs: HashMap::new(),
                                params,
                                ret_to,
                            });
                        }
                        None => {
                            unresolved_bar(
                                self,
                                "a call of a function whose body is not in this PTX (its barrier operations are unknown)",
                            );
                        }
                    }
                }
                "mbarrier" => {
                    let p = ins.parts();
                    let what = p[1];
                    if !matches!(
                        what,
                        "init" | "inval" | "arrive" | "arrive_drop" | "expect_tx" | "complete_tx" | "try_wait" | "test_wait"
                    ) {
                        unresolved_bar(self, "an mbarrier operation the importer does not map");
                        continue;
                    }
                    let bar_at = match what {
                        "init" | "inval" | "expect_tx" | "complete_tx" => 0,
                        _ => 1,
                    };
                    let Some(bar) = bar_of(fr, ops.get(bar_at)) else {
                        unresolved_bar(
                            self,
                            "the barrier address is not a shared-memory symbol + offset the importer can compute",
                        );
                        continue;
                    };
                    let arg = |k: usize| ops.get(k).map(|o| get(fr, o));
                    let f_name = family(&ins.opcode);
                    match what {
                        "init" => match arg(1).as_ref().and_then(int) {
                            Some(n) => {
                                self.facts.exact(format!("{f_name} -> init, count {n}"), ins.pos, ins.src);
                                emit(Op::Init { bar, count: n }, &mut run);
                            }
                            None => unresolved_bar(self, "the init count is not a value the importer can compute"),
                        },
                        "inval" => emit(Op::Inval { bar }, &mut run),
                        "arrive" | "arrive_drop" => {
                            let tx = ins.has("expect_tx");
                            let n = arg(2).as_ref().and_then(int);
                            if ins.has("noComplete") {
                                unresolved_bar(self, "`.noComplete` arrivals are not modelled");
                                continue;
                            }
                            if what == "arrive_drop" {
                                if tx || ops.len() > 2 {
                                    unresolved_bar(self, "arrive_drop with a count or expect_tx is not modelled");
                                } else {
                                    self.facts.exact(format!("{f_name} -> arrive_and_drop"), ins.pos, ins.src);
                                    emit(Op::ArriveDrop { bar }, &mut run);
                                }
                            } else if tx && matches!(ops.first(), Some(Operand::Reg(_))) {
                                // the token is kept: an expect-tx then an arrive-on (what the
                                // instruction is), so the wait on the token has its arrive
                                match n {
                                    Some(b) => {
                                        tokens += 1;
                                        if let Some(o) = ops.first() {
                                            set(fr, o, Val::Token(tokens));
                                        }
                                        self.facts.exact(
                                            format!("{f_name}.expect_tx with its token -> expect_tx, let tok = arrive"),
                                            ins.pos,
                                            ins.src,
                                        );
                                        emit(
                                            Op::ExpectTx {
                                                bar: bar.clone(),
                                                bytes: b,
                                            },
                                            &mut run,
                                        );
                                        emit(
                                            Op::Arrive {
                                                bar,
                                                count: 1,
                                                token: Some(tokens),
                                            },
                                            &mut run,
                                        );
                                    }
                                    None => unresolved_bar(self, "the tx byte count is not a value the importer can compute"),
                                }
                            } else if tx {
                                match n {
                                    Some(b) => {
                                        self.facts
                                            .exact(format!("{f_name}.expect_tx -> arrive_expect_tx"), ins.pos, ins.src);
                                        emit(Op::ArriveExpectTx { bar, bytes: b }, &mut run);
                                    }
                                    None => unresolved_bar(self, "the tx byte count is not a value the importer can compute"),
                                }
                            } else {
                                let count = if ops.len() > 2 { n } else { Some(1) };
                                match count {
                                    Some(c) => {
                                        let token = match ops.first() {
                                            Some(Operand::Reg(_)) => {
                                                tokens += 1;
                                                Some(tokens)
                                            }
                                            _ => None,
                                        };
                                        if let (Some(t), Some(o)) = (token, ops.first()) {
                                            set(fr, o, Val::Token(t));
                                        }
                                        self.facts.exact(format!("{f_name} -> arrive"), ins.pos, ins.src);
                                        emit(Op::Arrive { bar, count: c, token }, &mut run);
                                    }
                                    None => unresolved_bar(self, "the arrival count is not a value the importer can compute"),
                                }
                            }
                        }
                        "expect_tx" | "complete_tx" => match arg(1).as_ref().and_then(int) {
                            Some(b) => {
                                self.facts.exact(format!("{f_name} -> {what}"), ins.pos, ins.src);
                                emit(
                                    if what == "expect_tx" {
                                        Op::ExpectTx { bar, bytes: b }
                                    } else {
                                        Op::CompleteTx { bar, bytes: b }
                                    },
                                    &mut run,
                                );
                            }
                            None => unresolved_bar(self, "the tx byte count is not a value the importer can compute"),
                        },
                        "try_wait" | "test_wait" => {
                            let parity = ins.has("parity");
                            let v = arg(2).unwrap_or(Val::Unknown);
                            let op = match (parity, &v) {
                                (true, Val::Int(p)) => Some(Op::WaitParity { bar, parity: p & 1 }),
                                (false, Val::Token(t)) => Some(Op::WaitToken { bar, token: *t }),
                                _ => None,
                            };
                            let Some(op) = op else {
                                unresolved_bar(
                                    self,
                                    if parity {
                                        "the parity is not a value the importer can compute"
                                    } else {
                                        "the state is not a token an mbarrier.arrive of this thread returned"
                                    },
                                );
                                continue;
                            };
                            let stmt = if parity { "wait_parity" } else { "wait" };
                            match self.polling_loop(f, i) {
                                Some(true) => self.facts.exact(
                                    format!("{f_name}{} polling loop -> {stmt}", if parity { ".parity" } else { "" }),
                                    ins.pos,
                                    ins.src,
                                ),
                                Some(false) => self.facts.assumed(
                                    format!("{f_name} in a loop -> {stmt}"),
                                    "the loop around it does more than poll; the wait is taken as the loop's exit condition",
                                    ins.pos,
                                    ins.src,
                                ),
                                None => self.facts.assumed(
                                    format!("{f_name} outside a loop -> {stmt}"),
                                    "a single try_wait is taken as succeeding (the path where it fails is not imported)",
                                    ins.pos,
                                    ins.src,
                                ),
                            }
                            emit(op, &mut run);
                            if let Some(o) = ops.first() {
                                set(fr, o, Val::Int(1));
                            }
                        }
                        _ => unresolved_bar(self, "an mbarrier operation the importer does not map"),
                    }
                }
                "cp" => {
                    let p = ins.parts();
                    let f_name = ins.opcode.clone();
                    if p.get(1) == Some(&"async") && p.get(2) == Some(&"bulk") {
                        if ins.has("commit_group") {
                            emit(Op::CommitGroup, &mut run);
                            self.facts.exact("cp.async.bulk.commit_group -> commit_group", ins.pos, ins.src);
                        } else if ins.has("wait_group") || p.iter().any(|x| x.starts_with("wait_group")) {
                            match ops.first().map(|o| get(fr, o)).as_ref().and_then(int) {
                                Some(n) => {
                                    let read = ins.has("read");
                                    self.facts.exact(
                                        format!("cp.async.bulk.wait_group{} -> wait_group", if read { ".read" } else { "" }),
                                        ins.pos,
                                        ins.src,
                                    );
                                    emit(Op::WaitGroup { n, read }, &mut run);
                                }
                                None => unresolved_bar(self, "the group count is not a constant"),
                            }
                        } else if ins.has("prefetch") || p.get(3).is_some_and(|x| x.starts_with("prefetch")) {
                            self.facts.drop_instr("cp.async.bulk.prefetch", ins.pos);
                        } else if ins.has("mbarrier::complete_tx::bytes") {
                            if ins.has("multicast::cluster") {
                                // the CTA mask comes last, before a cache policy
                                let at = ops.len().saturating_sub(if ins.has("L2::cache_hint") { 2 } else { 1 });
                                match ops.get(at).map(|o| get(fr, o)).as_ref().and_then(int) {
                                    Some(m) if m & 1 == 1 => self.facts.assumed(
                                        format!("multicast mask {m:#x} -> a copy into this CTA"),
                                        "the cluster is one CTA (the import's launch): the copy lands in CTA 0 alone",
                                        ins.pos,
                                        ins.src,
                                    ),
                                    Some(_) => {
                                        unresolved_bar(self, "a multicast that leaves out CTA 0 (the import is of a cluster of one CTA)");
                                        continue;
                                    }
                                    None => {
                                        unresolved_bar(self, "the multicast CTA mask is not a value the importer can compute");
                                        continue;
                                    }
                                }
                            }
                            let tensor = ins.has("tensor");
                            let dst = ops.first().map(|o| addr(fr, o));
                            let Some(Val::Sh(buf, off)) = dst else {
                                unresolved_bar(
                                    self,
                                    "the destination is not a shared-memory symbol + offset the importer can compute",
                                );
                                continue;
                            };
                            let bar_op = if tensor { ops.get(2) } else { ops.get(3) };
                            let Some(bar) = bar_of(fr, bar_op) else {
                                unresolved_bar(self, "the completion barrier is not a shared-memory symbol + offset");
                                continue;
                            };
                            let bytes = if tensor {
                                let tmap = match ops.get(1) {
                                    Some(Operand::Addr(b, _)) => match get(fr, b) {
                                        Val::Param(p) => Some(p),
                                        _ => None,
                                    },
                                    _ => None,
                                };
                                let name = crate::names::demangle(&buf);
                                match given_bytes(launch, entry, tmap.as_ref(), &buf).as_ref() {
                                    Some(b) => {
                                        self.facts
                                            .exact(format!("{f_name} -> copy_async, {b} bytes from --tma-bytes"), ins.pos, ins.src);
                                        *b
                                    }
                                    None => {
                                        let b = expected_tx(&run, &bar);
                                        self.facts.assumed(
                                            format!("{f_name} -> copy_async, {b} bytes"),
                                            format!("a tensor copy's bytes are not in the PTX: taken from the expect_tx on the same barrier (pass --tma-bytes {}=B)", tmap.unwrap_or(name)),
                                            ins.pos,
                                            ins.src,
                                        );
                                        b
                                    }
                                }
                            } else {
                                match ops.get(2).map(|o| get(fr, o)).as_ref().and_then(int) {
                                    Some(b) => {
                                        self.facts
                                            .exact(format!("cp.async.bulk (complete_tx) -> copy_async"), ins.pos, ins.src);
                                        b
                                    }
                                    None => {
                                        unresolved_bar(self, "the copy size is not a value the importer can compute");
                                        continue;
                                    }
                                }
                            };
                            emit(Op::Copy { buf, off, bytes, bar }, &mut run);
                        } else if ins.has("bulk_group")
                            && (p.get(3) == Some(&"global") || (p.get(3) == Some(&"tensor") && p.get(5) == Some(&"global")))
                        {
                            // a tensor store's box is in the tensor map: it reads the whole buffer
                            let tensor = p.get(3) == Some(&"tensor");
                            match ops.get(1).map(|o| addr(fr, o)) {
                                Some(Val::Sh(buf, off)) => {
                                    self.facts.exact(
                                        format!(
                                            "cp.async.bulk{} (bulk_group store) -> copy_store_async",
                                            if tensor { ".tensor" } else { "" }
                                        ),
                                        ins.pos,
                                        ins.src,
                                    );
                                    let bytes = if tensor {
                                        // the box is in the tensor map: --tma-bytes, else the whole buffer
                                        let tmap = match ops.first() {
                                            Some(Operand::Addr(b, _)) => match get(fr, b) {
                                                Val::Param(p) => Some(p),
                                                _ => None,
                                            },
                                            _ => None,
                                        };
                                        given_bytes(launch, entry, tmap.as_ref(), &buf).unwrap_or(0)
                                    } else {
                                        ops.get(2).map(|o| get(fr, o)).as_ref().and_then(int).unwrap_or(0)
                                    };
                                    emit(Op::Store { buf, off, bytes }, &mut run);
                                }
                                _ => unresolved_bar(self, "the source of the store is not a shared-memory symbol + offset"),
                            }
                        } else {
                            unresolved_bar(self, "a bulk copy form the importer does not map");
                        }
                    } else if p.get(1) == Some(&"async") && p.get(2) == Some(&"mbarrier") {
                        match bar_of(fr, ops.first()) {
                            Some(bar) => {
                                let noinc = ins.has("noinc");
                                self.facts.exact(
                                    format!("{f_name} -> cp_async_arrive{}", if noinc { "_noinc" } else { "" }),
                                    ins.pos,
                                    ins.src,
                                );
                                emit(Op::CpAsyncArrive { bar, noinc }, &mut run);
                            }
                            None => unresolved_bar(self, "the barrier address is not a shared-memory symbol + offset"),
                        }
                    } else if p.get(1) == Some(&"async") && (p.get(2) == Some(&"ca") || p.get(2) == Some(&"cg")) {
                        let dst = ops.first().map(|o| addr(fr, o));
                        let n = ops.get(2).map(|o| get(fr, o)).as_ref().and_then(int);
                        match (dst, n) {
                            (Some(Val::Sh(buf, off)), Some(bytes)) => {
                                self.facts.exact("cp.async -> cp_async", ins.pos, ins.src);
                                emit(Op::CpAsync { buf, off, bytes }, &mut run);
                            }
                            _ => unresolved_bar(
                                self,
                                "the destination or size of the cp.async is not a value the importer can compute",
                            ),
                        }
                    } else if p.get(1) == Some(&"async") && p.get(2) == Some(&"commit_group") {
                        self.facts.exact("cp.async.commit_group -> cp_async_commit_group", ins.pos, ins.src);
                        emit(Op::CpAsyncCommit, &mut run);
                    } else if p.get(1) == Some(&"async") && p.get(2) == Some(&"wait_all") {
                        self.facts.exact("cp.async.wait_all -> cp_async_wait_all", ins.pos, ins.src);
                        emit(Op::CpAsyncWait { n: None }, &mut run);
                    } else if p.get(1) == Some(&"async") && p.get(2) == Some(&"wait_group") {
                        match ops.first().map(|o| get(fr, o)).as_ref().and_then(int) {
                            Some(n) => {
                                self.facts.exact("cp.async.wait_group -> cp_async_wait_group", ins.pos, ins.src);
                                emit(Op::CpAsyncWait { n: Some(n) }, &mut run);
                            }
                            None => unresolved_bar(self, "the group count is not a constant"),
                        }
                    } else {
                        unresolved_bar(self, "a cp.async form the importer does not map");
                    }
                }
                "fence" | "membar" => {
                    if ins.has("mbarrier_init") {
                        self.facts.exact("fence.mbarrier_init -> fence_mbarrier_init", ins.pos, ins.src);
                        emit(Op::FenceInit, &mut run);
                    } else if ins.has("proxy") && ins.has("async") {
                        self.facts.exact("fence.proxy.async -> fence_proxy_async", ins.pos, ins.src);
                        emit(Op::FenceProxy, &mut run);
                    } else {
                        self.facts.assumed(
                            format!("`{}` dropped", ins.opcode),
                            "memory fences between generic accesses are not modelled (barriers order what the model checks)",
                            ins.pos,
                            ins.src,
                        );
                    }
                }
                "bar" | "barrier" => {
                    let p = ins.parts();
                    if p.get(1) == Some(&"warp") {
                        let mask = ops.first().map(|o| get(fr, o)).as_ref().and_then(int);
                        match mask {
                            Some(m) => {
                                self.facts.exact("bar.warp.sync -> syncwarp", ins.pos, ins.src);
                                emit(Op::SyncWarp { mask: m & 0xffff_ffff }, &mut run)
                            }
                            None => unresolved_bar(self, "the syncwarp mask is not a constant"),
                        }
                        continue;
                    }
                    if p.get(1) == Some(&"cluster") {
                        match p.get(2) {
                            Some(&"arrive") if ins.has("relaxed") => {
                                self.facts.assumed(
                                    "barrier.cluster.arrive.relaxed -> cluster_arrive",
                                    "the spec's cluster_arrive also releases the thread's earlier writes, which .relaxed does not: a race that only this arrive orders is not reported",
                                    ins.pos,
                                    ins.src,
                                );
                                emit(Op::ClusterArrive, &mut run);
                            }
                            Some(&"arrive") => {
                                self.facts.exact("barrier.cluster.arrive -> cluster_arrive", ins.pos, ins.src);
                                emit(Op::ClusterArrive, &mut run);
                            }
                            Some(&"wait") => {
                                // in a cluster of one CTA an arrive and the wait right after it
                                // are the block's barrier: every thread of the block takes part
                                if run.events.last().is_some_and(|e| e.op == Op::ClusterArrive) {
                                    let e = run.events.pop().unwrap();
                                    self.facts.exact(
                                        "barrier.cluster.arrive + barrier.cluster.wait -> syncthreads (a cluster of one CTA: every thread of the block)",
                                        ins.pos,
                                        ins.src,
                                    );
                                    run.events.push(Event { op: Op::SyncThreads, ..e });
                                } else {
                                    self.facts.exact("barrier.cluster.wait -> cluster_wait", ins.pos, ins.src);
                                    emit(Op::ClusterWait, &mut run);
                                }
                            }
                            _ => unresolved_bar(self, "a cluster barrier form the importer does not map"),
                        }
                        continue;
                    }
                    let kind = if p.len() == 1 || p[1] == "sync" || p[1] == "aligned" {
                        "sync"
                    } else {
                        p[1]
                    };
                    let id = ops.first().map(|o| get(fr, o)).as_ref().and_then(int);
                    let total = (b[0] * b[1] * b[2]) as i64;
                    let count = match ops.get(1) {
                        None => Some(total),
                        Some(o) => int(&get(fr, o)),
                    };
                    match (kind, id, count) {
                        ("sync", Some(0), Some(c)) if c == total => {
                            self.facts.exact(format!("{} 0 -> syncthreads", ins.opcode), ins.pos, ins.src);
                            emit(Op::SyncThreads, &mut run);
                        }
                        ("sync", Some(id), Some(c)) => {
                            self.facts.exact(format!("{} {id}, {c} -> bar_sync", ins.opcode), ins.pos, ins.src);
                            emit(Op::BarSync { id, count: c }, &mut run);
                        }
                        ("arrive", Some(id), Some(c)) => {
                            self.facts
                                .exact(format!("{} {id}, {c} -> bar_arrive", ins.opcode), ins.pos, ins.src);
                            emit(Op::BarArrive { id, count: c }, &mut run);
                        }
                        ("sync" | "arrive", _, _) => unresolved_bar(self, "the barrier id or thread count is not a constant"),
                        _ => unresolved_bar(self, "a barrier instruction the importer does not map (bar.red, ...)"),
                    }
                }
                "elect" => {
                    // elect.sync d|p, membermask: the lowest lane of the warp is taken
                    let leader = 0;
                    let me = lane == leader;
                    if me {
                        run.elected = true;
                    }
                    self.facts.assumed(
                        "elect.sync -> elect()",
                        "every lane of the warp takes part (the full mask); the lowest lane is the PTX-level leader",
                        ins.pos,
                        ins.src,
                    );
                    match &ops[0] {
                        Operand::Pair(d, pp) => {
                            set(fr, d, Val::Int(leader as i64));
                            set(fr, pp, Val::Int(me as i64));
                        }
                        o => set(fr, o, Val::Int(me as i64)),
                    }
                }
                "wgmma" => match ins.parts().get(1).copied() {
                    Some("fence") => self.facts.exact(
                        "wgmma.fence: no statement of its own (it orders the warpgroup's accesses before its next wgmma, which wgmma_async carries)",
                        ins.pos,
                        ins.src,
                    ),
                    Some("mma_async") => {
                        // operands: d, a (a descriptor, or registers), b (a descriptor), ...
                        let mut found = true;
                        for o in [ops.get(1), ops.get(2)].into_iter().flatten() {
                            let operand = match o {
                                Operand::List(_) => Some(crate::desc::Operand::Registers),
                                o => crate::desc::operand_buffer(&self.layout, &get(fr, o)),
                            };
                            match operand {
                                Some(crate::desc::Operand::Shared(buf, off)) => {
                                    if !wgmma_bufs.contains(&(buf.clone(), off)) {
                                        wgmma_bufs.push((buf, off))
                                    }
                                }
                                Some(crate::desc::Operand::Registers) => {}
                                None => found = false,
                            }
                        }
                        if found && !wgmma_bufs.is_empty() {
                            self.facts.exact("wgmma.mma_async -> an operand of wgmma_async", ins.pos, ins.src);
                        } else if found {
                            // register operands only (a d = a * b from registers is not possible:
                            // b is always a descriptor)
                            unresolved_bar(self, "a wgmma without a shared-memory operand");
                        } else {
                            unresolved_bar(self, "the operand descriptor does not name a shared-memory symbol the importer can compute");
                            wgmma_lost = true;
                        }
                    }
                    Some("commit_group") => {
                        if wgmma_lost {
                            unresolved_bar(self, "a wgmma group with an operand the importer could not follow");
                        } else if wgmma_bufs.is_empty() {
                            unresolved_bar(self, "a wgmma group without a shared-memory operand is not a wgmma_async");
                        } else {
                            self.facts.exact("wgmma.commit_group -> wgmma_async (the group's operands)", ins.pos, ins.src);
                            emit(Op::Wgmma { bufs: std::mem::take(&mut wgmma_bufs) }, &mut run);
                        }
                        wgmma_bufs.clear();
                        wgmma_lost = false;
                    }
                    Some("wait_group") => match ops.first().map(|o| get(fr, o)).as_ref().and_then(int) {
                        Some(n) => {
                            self.facts.exact("wgmma.wait_group -> wgmma_wait", ins.pos, ins.src);
                            emit(Op::WgmmaWait { n }, &mut run);
                        }
                        None => unresolved_bar(self, "the group count is not a constant"),
                    },
                    _ => unresolved_bar(self, "a wgmma form the importer does not map"),
                },
                "tcgen05" => unresolved_bar(
                    self,
                    "tcgen05 reads shared memory through descriptors the importer does not follow",
                ),
                "stmatrix" | "ldmatrix" => {
                    // .xN: lanes 0..8N each give the address of one 16-byte row
                    let n = ins.parts().iter().find_map(|p| p.strip_prefix('x').and_then(|k| k.parse::<u32>().ok())).unwrap_or(1);
                    let at = if head == "stmatrix" { ops.first() } else { ops.get(1) };
                    let gives = lane < 8 * n;
                    match (at.map(|o| addr(fr, o)), gives) {
                        (Some(Val::Sh(buf, off)), _) => {
                            self.facts.exact(
                                format!("{head} -> {} of the warp's rows", if head == "stmatrix" { "write" } else { "read" }),
                                ins.pos,
                                ins.src,
                            );
                            let bytes = if gives { 16 } else { 0 };
                            let op = if head == "stmatrix" {
                                Op::WarpWrite { buf, off, bytes }
                            } else {
                                Op::Read { buf, off, bytes }
                            };
                            if head == "stmatrix" || gives {
                                emit(op, &mut run);
                            }
                        }
                        // a lane whose address the instruction does not use
                        (_, false) if head == "stmatrix" => {
                            if let Some(Op::WarpWrite { buf, off, .. }) = run.events.iter().rev().find_map(|e| match &e.op {
                                o @ Op::WarpWrite { .. } => Some(o.clone()),
                                _ => None,
                            }) {
                                emit(Op::WarpWrite { buf, off, bytes: 0 }, &mut run);
                            } else {
                                unresolved_bar(self, "a shared-memory matrix store whose buffer the importer cannot tell");
                            }
                        }
                        (_, false) => {}
                        _ => unresolved_bar(self, "a shared-memory matrix access at an address the importer cannot compute"),
                    }
                    if head == "ldmatrix" {
                        if let Some(Operand::List(v)) = ops.first() {
                            v.iter().for_each(|o| set(fr, o, Val::Unknown));
                        }
                    }
                }
                "shfl" => {
                    // shfl.sync.MODE.b32 d[|p], a, b, c, membermask: lane j's `a`, where j follows
                    // from b and c as the PTX ISA says; j's value is known when j ran first
                    let key = (ins.pos.line, ins.pos.col);
                    let n = shfl_runs.entry(key).or_insert(0);
                    let occurrence = *n;
                    *n += 1;
                    let a = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    self.shfl_sent.insert((linear, key, occurrence), a.clone());
                    let b = ops.get(2).map(|o| get(fr, o)).as_ref().and_then(int);
                    let c = ops.get(3).map(|o| get(fr, o)).as_ref().and_then(int);
                    let mask = ops.get(4).map(|o| get(fr, o)).as_ref().and_then(int);
                    let mode = ins.parts().get(2).copied().unwrap_or("");
                    let src = match (b, c, mask) {
                        (Some(b), Some(c), Some(m)) if m & 0xffff_ffff == 0xffff_ffff && ins.has("sync") => {
                            shfl_source(mode, lane as i64, b, c)
                        }
                        _ => None,
                    };
                    let v = match src {
                        Some(j) if j == lane as i64 => a,
                        Some(j) if j < lane as i64 => {
                            let from = linear - lane + j as u32;
                            self.shfl_sent.get(&(from, key, occurrence)).cloned().unwrap_or(Val::Unknown)
                        }
                        _ => Val::Unknown,
                    };
                    if !matches!(v, Val::Unknown) {
                        self.facts.assumed(
                            "shfl.sync: the source lane's value",
                            "the lanes are converged (the full-mask .sync): a lane's n-th shuffle meets the source lane's n-th",
                            ins.pos,
                            ins.src,
                        );
                    } else {
                        self.facts.drop_instr("shfl (value unknown)", ins.pos);
                    }
                    match ops.first() {
                        Some(Operand::Pair(d, p)) => {
                            set(fr, d, v);
                            set(fr, p, if src.is_some() { Val::Int(1) } else { Val::Unknown });
                        }
                        Some(o) => set(fr, o, v),
                        None => {}
                    }
                }
                "nanosleep" | "pmevent" | "prefetch" | "prefetchu" | "setmaxnreg" | "griddepcontrol" | "discard" | "createpolicy"
                | "applypriority" => self.facts.drop_instr(head, ins.pos),
                _ => {
                    // data path: math, shuffles, votes, atomics on global memory, ...
                    self.facts.drop_instr(
                        if ins.has("shared") {
                            "atomics on shared"
                        } else {
                            "math and other data-path"
                        },
                        ins.pos,
                    );
                    if ins.has("shared") && (head == "atom" || head == "red") {
                        self.facts.assumed(
                            format!("`{}` dropped", ins.opcode),
                            "shared-memory atomics are not modelled",
                            ins.pos,
                            ins.src,
                        );
                    }
                    match ops.first() {
                        Some(Operand::Pair(a, c)) => {
                            set(fr, a, Val::Unknown);
                            set(fr, c, Val::Unknown);
                        }
                        Some(Operand::List(v)) => v.iter().for_each(|o| set(fr, o, Val::Unknown)),
                        Some(o) => set(fr, o, Val::Unknown),
                        None => {}
                    }
                }
            }
        }
        run
    }
}
