//! Runs the kernel once per thread of the block on a per-register value domain: constants,
//! thread indices, kernel params given with `--param`, shared-memory symbol + offset and
//! arrival tokens are known; everything else (global memory, clocks, shuffles) is unknown. The
//! thread's path is thereby exact wherever its branches depend on known values (the role
//! structure, loop trips, phase bits flipped each round), and a branch on an unknown value is
//! reported `unresolved`. Barrier operations become [`Event`]s; data-path code is dropped and
//! counted.

use crate::cfg::Cfg;
use crate::facts::Facts;
use crate::ptx::{type_bytes, Function, Instr, Module, Operand, Pos, SrcLoc};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Int(i64),
    /// An address in shared memory: symbol + byte offset.
    Sh(String, i64),
    /// The address of a kernel param (a `__grid_constant__` tensor map).
    Param(String),
    /// The state an `mbarrier.arrive` returned: the thread's token number.
    Token(usize),
    Unknown,
}

/// A barrier: shared symbol + byte offset.
pub type Bar = (String, i64);

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Init {
        bar: Bar,
        count: i64,
    },
    Arrive {
        bar: Bar,
        count: i64,
        token: Option<usize>,
    },
    ArriveExpectTx {
        bar: Bar,
        bytes: i64,
    },
    ExpectTx {
        bar: Bar,
        bytes: i64,
    },
    CompleteTx {
        bar: Bar,
        bytes: i64,
    },
    ArriveDrop {
        bar: Bar,
    },
    WaitParity {
        bar: Bar,
        parity: i64,
    },
    WaitToken {
        bar: Bar,
        token: usize,
    },
    Inval {
        bar: Bar,
    },
    Copy {
        buf: String,
        off: i64,
        bytes: i64,
        bar: Bar,
    },
    CpAsync {
        buf: String,
        off: i64,
        bytes: i64,
    },
    CpAsyncArrive {
        bar: Bar,
        noinc: bool,
    },
    /// A bulk store reading `bytes` from `off` (`bytes` is 0 when the size is not a constant:
    /// the whole buffer is taken as read).
    Store {
        buf: String,
        off: i64,
        bytes: i64,
    },
    CommitGroup,
    WaitGroup {
        n: i64,
        read: bool,
    },
    FenceProxy,
    FenceInit,
    SyncThreads,
    BarSync {
        id: i64,
        count: i64,
    },
    BarArrive {
        id: i64,
        count: i64,
    },
    SyncWarp {
        mask: i64,
    },
    Read {
        buf: String,
        off: i64,
        bytes: i64,
    },
    Write {
        buf: String,
        off: i64,
        bytes: i64,
    },
}

#[derive(Clone, Debug)]
pub struct Event {
    pub op: Op,
    pub pos: Pos,
    pub src: SrcLoc,
}

/// What one thread did.
#[derive(Clone, Debug, Default)]
pub struct ThreadRun {
    pub events: Vec<Event>,
    /// The thread's `elect.sync` returned true at least once.
    pub elected: bool,
}

pub struct Launch<'a> {
    pub block: [u32; 3],
    pub params: &'a HashMap<String, i64>,
    pub tma_bytes: &'a HashMap<String, i64>,
}

const STEP_LIMIT: usize = 2_000_000;

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
}

fn ty_of(ins: &Instr) -> (u32, bool) {
    // The first type suffix: what the destination is.
    for p in ins.parts().iter().skip(1) {
        let s = format!(".{p}");
        if *p == "pred" {
            return (1, false);
        }
        if let Some(b) = type_bytes(&s) {
            return ((b * 8) as u32, p.starts_with('s'));
        }
    }
    (64, false)
}

fn norm(v: i64, bits: u32, signed: bool) -> i64 {
    match (bits, signed) {
        (1, _) => (v != 0) as i64,
        (8, false) => v as u8 as i64,
        (8, true) => v as i8 as i64,
        (16, false) => v as u16 as i64,
        (16, true) => v as i16 as i64,
        (32, false) => v as u32 as i64,
        (32, true) => v as i32 as i64,
        _ => v,
    }
}

/// The innermost `mbarrier.*` / `cp.async.*` family a fact is filed under.
fn family(op: &str) -> String {
    let p: Vec<&str> = op.split('.').collect();
    p.iter().take(2).copied().collect::<Vec<_>>().join(".")
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

    /// Run thread `tid` (x, y, z) of the block through entry `entry`.
    pub fn run(&mut self, entry: &'m Function, tid: [u32; 3], launch: &Launch) -> ThreadRun {
        let mut run = ThreadRun::default();
        let b = launch.block;
        let linear = tid[0] + tid[1] * b[0] + tid[2] * b[0] * b[1];
        let lane = linear % 32;
        let mut tokens = 0usize;
        let mut kparams = HashMap::new();
        for (k, p) in entry.params.iter().enumerate() {
            let v = launch
                .params
                .get(p)
                .or_else(|| launch.params.get(&k.to_string()))
                .map_or(Val::Unknown, |v| Val::Int(*v));
            kparams.insert(p.clone(), v);
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
                "%ctaid.x" | "%ctaid.y" | "%ctaid.z" | "%cluster_ctarank" | "%clusterid.x" => 0,
                "%nctaid.x" | "%nctaid.y" | "%nctaid.z" | "%cluster_nctarank" => 1,
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
            let addr = |fr: &Frame, o: &Operand| -> Val {
                match o {
                    Operand::Addr(base, off) => match get(fr, base) {
                        Val::Sh(s, k) => Val::Sh(s, k + off),
                        Val::Param(p) => Val::Param(p),
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
                    _ => {
                        self.facts.unresolved(
                            format!("guard @{}{g} of `{}`", if *neg { "!" } else { "" }, ins.opcode),
                            "the predicate depends on a value the importer cannot compute; the instruction is taken as not executed",
                            ins.pos,
                            ins.src,
                        );
                        continue;
                    }
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
                    let v = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let v = match v {
                        Val::Int(x) => Val::Int(norm(x, bits, signed)),
                        v => v,
                    };
                    set(fr, &ops[0], v);
                }
                "add" | "sub" | "mul" | "mad" | "div" | "rem" | "and" | "or" | "xor" | "shl" | "shr" | "min" | "max" => {
                    let wide = ins.has("wide");
                    let (sb, sg) = (bits, signed);
                    let a = ops.get(1).map_or(Val::Unknown, |o| get(fr, o));
                    let bv = ops.get(2).map_or(Val::Unknown, |o| get(fr, o));
                    let na = |x: i64| norm(x, sb, sg);
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
                    unresolved_bar(self, "a peer CTA's shared memory (clusters are not imported)");
                    set(fr, &ops[0], Val::Unknown);
                }
                "ld" | "ldu" => {
                    let a = ops.get(1).map_or(Val::Unknown, |o| addr(fr, o));
                    let v = match (&a, ins.has("param")) {
                        (Val::Param(p), true) => fr.params.get(p).cloned().unwrap_or(Val::Unknown),
                        (_, true) => match ops.get(1) {
                            Some(Operand::Addr(b, 0)) => match &**b {
                                Operand::Sym(s) => fr.params.get(s).cloned().unwrap_or(Val::Unknown),
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
                                unresolved_bar(self, "multicast copies (clusters) are not imported");
                                continue;
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
                                let index = tmap
                                    .as_ref()
                                    .and_then(|t| entry.params.iter().position(|p| p == t))
                                    .map(|k| k.to_string());
                                let given = tmap
                                    .as_ref()
                                    .and_then(|t| launch.tma_bytes.get(t))
                                    .or_else(|| index.as_ref().and_then(|k| launch.tma_bytes.get(k)))
                                    .or_else(|| launch.tma_bytes.get(&name))
                                    .or_else(|| launch.tma_bytes.get(&buf));
                                match given {
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
                                        0
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
                    } else {
                        unresolved_bar(
                            self,
                            "cp.async groups (commit_group / wait_group of sm_80 cp.async) are not modelled",
                        );
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
                        unresolved_bar(self, "cluster barriers are not imported");
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
                "wgmma" | "tcgen05" => unresolved_bar(
                    self,
                    "wgmma/tcgen05 read shared memory through descriptors the importer does not follow",
                ),
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

fn vec_len(ins: &Instr) -> i64 {
    for p in ins.parts() {
        if let Some(n) = p.strip_prefix('v') {
            if let Ok(n) = n.parse::<i64>() {
                return n;
            }
        }
    }
    1
}

/// The bytes the thread announced on `bar` most recently (for a tensor copy without
/// `--tma-bytes`).
fn expected_tx(run: &ThreadRun, bar: &Bar) -> i64 {
    run.events
        .iter()
        .rev()
        .find_map(|e| match &e.op {
            Op::ArriveExpectTx { bar: b, bytes } | Op::ExpectTx { bar: b, bytes } if b == bar => Some(*bytes),
            _ => None,
        })
        .unwrap_or(0)
}
