//! From the syntax tree to what the counting laws need: for each class of threads (a role whose
//! threads all run the same code, or one thread of a role whose code reads its identity), the
//! barrier operations it performs, each with the guard under which it runs, the loop it sits in
//! and the barrier element it names, all as symbolic terms of the parameters and loop variables.
//!
//! Anything whose count cannot be written exactly in that form is refused with the statement's
//! span and the reason, so that `prove` answers `unknown` rather than prove something else.

use crate::sym::{int, var, Cmp, B, T};
use phasecheck_model::lang::ast::{self, BinOp, ExprKind, OpKind, Span, StmtKind, UnOp};
use std::collections::{BTreeMap, HashMap};
use walk::{block_assigns, block_calls, block_has_barrier_ops, block_returns, block_returns_always, block_syncs_cta, uses_identity};

mod walk;

/// Why a construct is outside the encodable fragment.
#[derive(Clone, Debug)]
pub struct Unsupported {
    pub span: Span,
    pub why: String,
}

fn unsupported<X>(span: Span, why: impl Into<String>) -> Result<X, Unsupported> {
    Err(Unsupported { span, why: why.into() })
}

/// A ranged parameter that had to be given concrete values (a divisor, an array length, the size
/// of a role whose threads differ): the caller enumerates its range and tries again.
#[derive(Clone, Debug)]
pub enum BuildError {
    Unsupported(Unsupported),
    NeedConcrete(String, Span),
}

impl From<Unsupported> for BuildError {
    fn from(u: Unsupported) -> Self {
        BuildError::Unsupported(u)
    }
}

type R<X> = Result<X, BuildError>;

/// The barrier that stands for `syncthreads`: every thread of the CTA arrives and waits.
pub const SYNCTHREADS: &str = "syncthreads";

/// The most iterations an unrolled loop may have.
pub const UNROLL: i64 = 64;

#[derive(Clone, Debug)]
pub enum SiteKind {
    Arrive {
        n: T,
        drop: bool,
    },
    /// Waits on the phase of the token made by the arrival site with this index (same iteration).
    WaitToken {
        arrive: usize,
    },
    WaitParity {
        parity: T,
    },
    Expect {
        bytes: T,
    },
    Land {
        bytes: T,
    },
}

/// Which threads of a class run a site: all of them, or, inside `if e == 1` on an `elect()`
/// result, one lane per warp (or, in its `else`, the other lanes). Counting does not depend on
/// which lane is elected, only on how many run the site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    All,
    Elected,
    Others,
}

#[derive(Clone, Debug)]
pub struct Site {
    pub span: Span,
    pub share: Share,
    /// Segment of the class body: a maximal run of top-level statements, or one loop.
    pub seg: usize,
    /// Position in program order within the class.
    pub pos: usize,
    pub guard: B,
    pub group: String,
    pub index: T,
    pub kind: SiteKind,
}

#[derive(Clone, Debug)]
pub struct Loop {
    pub var: String,
    pub lo: T,
    pub hi: T,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Class {
    /// `producer` or `consumer#3`.
    pub label: String,
    /// How many threads run this code: a role count (possibly symbolic), or 1.
    pub mult: T,
    /// For a class of whole warps (a `warps`/`warpgroups` role whose code reads no identity):
    /// how many warps, the threads an elected site runs on.
    pub warps: Option<T>,
    /// One entry per segment: `Some` for a loop.
    pub segs: Vec<Option<Loop>>,
    pub sites: Vec<Site>,
}

#[derive(Clone, Debug)]
pub struct GroupInfo {
    pub name: String,
    pub len: i64,
    pub count: T,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Summary {
    pub groups: Vec<GroupInfo>,
    pub classes: Vec<Class>,
    /// Symbolic variables (ranged params and role counts) with their ranges.
    pub symbols: Vec<(String, i64, i64)>,
    /// A statement left out of the encoding that can only block (`syncwarp`): the laws may
    /// still be refuted (the explicit search confirms every refutation on the real program), but
    /// a proof would not cover it, so `prove` answers `unknown` instead of `proved`.
    pub refute_only: Option<Unsupported>,
}

/// What each parameter or role count stands for in this build.
#[derive(Clone, Debug)]
pub enum Binding {
    Fixed(i64),
    /// Symbolic over this inclusive range.
    Range(i64, i64),
}

pub struct Builder {
    /// Unroll loops with constant bounds (at most `UNROLL` iterations) instead of encoding them:
    /// the fallback for loop-carried locals, loops under conditions and returns inside loops.
    unroll: bool,
    params: HashMap<String, T>,
    roles: HashMap<String, T>,
    buffers: HashMap<String, T>,
    groups: Vec<GroupInfo>,
    vars: Vec<String>,
    refute_only: std::cell::RefCell<Option<Unsupported>>,
    /// Named barriers met in the role bodies (`bar N`), each with its one thread count.
    named: std::cell::RefCell<Vec<GroupInfo>>,
    /// Inline functions, expanded at each call.
    fns: HashMap<String, ast::FnDecl>,
    /// CTAs of the cluster (1 without `cluster`).
    ctas: i64,
    /// Barriers the program initialises (`manual_init`), and the inits met: element, span.
    manual: std::collections::HashSet<String>,
    /// The modelled lanes of each warp (where every role before it has a constant size).
    warp_lanes: HashMap<i64, Vec<i64>>,
    inits: std::cell::RefCell<Vec<(String, T, Span)>>,
    /// An init not followed by a proxy fence before its thread's first `syncthreads`.
    unfenced_init: std::cell::Cell<Option<Span>>,
    /// Whether a role uses the cluster barrier.
    cluster_barrier: std::cell::Cell<bool>,
}

/// Locals: a term, or the token of an arrival site.
#[derive(Clone)]
enum Local {
    Term(T),
    Token(usize),
    /// The result of `elect()`: 1 in one lane of the warp, 0 in the others.
    Elect,
}

struct Ctx {
    /// Some((tid, gtid, warp size)) for a per-thread class.
    me: Option<(i64, i64, i64)>,
    locals: Vec<HashMap<String, Local>>,
    guard: Vec<B>,
    seg: usize,
    in_loop: Option<String>,
    /// The first scope of `locals` that belongs to one iteration of the symbolic loop
    /// (`in_loop`): locals from there on are recomputed every iteration, so assigning them is
    /// straight-line code; locals below it are carried from one iteration to the next.
    loop_scope: usize,
    segs: Vec<Option<Loop>>,
    sites: Vec<Site>,
    dead: bool,
    /// Warp size, when the class is whole warps whose lanes all run the same code (a `warps` or
    /// `warpgroups` role that reads no identity): then `elect()`, `syncwarp` and named
    /// barriers have an exact count.
    whole_warps: Option<i64>,
    /// The lanes the current statement runs on.
    share: Share,
    /// The first scope of `locals` inside the current elected block.
    share_scope: usize,
    /// Sites of `cp_async_arrive_noinc`: arrivals that happen when the thread's copies land.
    async_arrivals: Vec<usize>,
    /// The loop variables in scope (an inline function gets them by value, not by reference).
    loop_vars: Vec<String>,
    /// Depth of inline-function expansion.
    inlining: usize,
    /// The CTA of the class (0 without a cluster), and the CTA a remote operation names.
    cta: i64,
    target: Option<i64>,
    /// The thread's last `cluster_arrive`, which its `cluster_wait` waits on.
    cluster_arrive: Option<usize>,
    /// Whether the thread passed its first `syncthreads`; an init since the last proxy fence;
    /// the first use of a `manual_init` barrier before the first `syncthreads`.
    synced: bool,
    unfenced: Option<Span>,
    /// The role the class belongs to.
    role: String,
    early_use: Option<Span>,
}

impl Builder {
    pub fn build(program: &ast::Program, bind: &BTreeMap<String, Binding>, unroll: bool) -> R<Summary> {
        let mut b = Builder {
            unroll,
            params: HashMap::new(),
            roles: HashMap::new(),
            buffers: HashMap::new(),
            groups: Vec::new(),
            vars: program.vars().map(|v| v.name.name.clone()).collect(),
            refute_only: std::cell::RefCell::new(None),
            named: std::cell::RefCell::new(Vec::new()),
            fns: program.functions().map(|f| (f.name.name.clone(), f.clone())).collect(),
            ctas: 1,
            cluster_barrier: std::cell::Cell::new(false),
            manual: Default::default(),
            warp_lanes: HashMap::new(),
            inits: Default::default(),
            unfenced_init: Default::default(),
        };
        let mut symbols = Vec::new();
        for p in program.params() {
            let t = match bind.get(&p.name.name) {
                Some(Binding::Fixed(v)) => int(*v),
                Some(Binding::Range(lo, hi)) => {
                    symbols.push((p.name.name.clone(), *lo, *hi));
                    var(&p.name.name)
                }
                None => b.decl_expr(&p.value)?,
            };
            b.params.insert(p.name.name.clone(), t);
        }
        let warp_size = match program.warp_size() {
            Some(e) => b.concrete(e)?,
            None => 32,
        };
        let mut role_warps: HashMap<String, T> = HashMap::new();
        // A cluster: every CTA has its own classes and its own copy of every barrier.
        let ctas = match program.cluster() {
            Some(e) => b.concrete(e)?,
            None => 1,
        };
        if !(1..=16).contains(&ctas) {
            return unsupported(program.name.span, format!("a cluster of {ctas} CTAs: prove handles 1 to 16"))?;
        }
        b.ctas = ctas;
        for r in program.roles() {
            // A role's size is written in its unit (threads, warps, warpgroups); what counts is
            // its threads (`ROLE.count` counts lanes, and so do the arrivals of a uniform warp).
            let t = match bind.get(&r.name.name) {
                Some(Binding::Fixed(v)) => int(*v),
                Some(Binding::Range(lo, hi)) => {
                    let n = format!("{}.count", r.name.name);
                    symbols.push((n.clone(), *lo, *hi));
                    var(&n)
                }
                None => b.decl_expr(&r.count)?,
            };
            let warps = match r.unit {
                ast::RoleUnit::Threads => None,
                ast::RoleUnit::Warps => Some(t.clone()),
                ast::RoleUnit::Warpgroups => Some(t.clone().mul(int(4))),
            };
            let t = match &warps {
                None => t,
                Some(w) => w.clone().mul(int(warp_size)),
            };
            b.roles.insert(r.name.name.clone(), t);
            if let Some(w) = warps {
                role_warps.insert(r.name.name.clone(), w);
            }
        }
        for buf in program.buffers() {
            let bytes = b.decl_expr(&buf.bytes)?;
            b.buffers.insert(buf.name.name.clone(), bytes);
        }
        for bar in program.barriers() {
            if bar.manual_init {
                b.manual.insert(bar.name.name.clone());
            }
            if let Some(c) = &bar.completion {
                return Err(Unsupported {
                    span: c.span,
                    why: "a completion function's effects are modelled only by the explicit search".into(),
                }
                .into());
            }
            let len = match &bar.len {
                None => 1,
                Some(e) => b.concrete(e)?,
            };
            let count = b.decl_expr(&bar.count)?;
            b.groups.push(GroupInfo {
                name: bar.name.name.clone(),
                len,
                count,
                span: bar.span,
            });
        }
        // what a role does through the functions it calls counts as its own
        let fn_syncs = program.functions().any(|f| block_syncs_cta(&f.body));
        let fn_identity = program.functions().any(|f| uses_identity(&f.body));
        if program.roles().any(|r| block_syncs_cta(&r.body) || (fn_syncs && block_calls(&r.body))) {
            let all = T::sum(program.roles().map(|r| b.roles[&r.name.name].clone()));
            b.groups.push(GroupInfo {
                name: SYNCTHREADS.into(),
                len: 1,
                count: all,
                span: program.name.span,
            });
        }
        {
            let mut g = 0i64;
            for r in program.roles() {
                if r.unit != ast::RoleUnit::Threads {
                    g = (g + warp_size - 1) / warp_size * warp_size;
                }
                let Some(n) = b.roles[&r.name.name].as_int() else { break };
                for t in g..g + n {
                    b.warp_lanes.entry(t / warp_size).or_default().push(t % warp_size);
                }
                g += n;
            }
        }
        let mut classes = Vec::new();
        for cta in 0..ctas {
        let mut gtid: Option<i64> = Some(0);
        for r in program.roles() {
            if r.unit != ast::RoleUnit::Threads {
                // whole warps start at a warp boundary (the lanes skipped are not modelled)
                gtid = gtid.map(|g| (g + warp_size - 1) / warp_size * warp_size);
            }
            let count_t = b.roles[&r.name.name].clone();
            if uses_identity(&r.body) || (fn_identity && block_calls(&r.body)) {
                let n = match count_t.as_int() {
                    Some(n) => n,
                    None => return Err(need_concrete_of(&count_t, r.count.span)),
                };
                let first = match gtid {
                    Some(g) => g,
                    None => {
                        return unsupported(
                            r.count.span,
                            "the threads of this role read their identity, and an earlier role's size is symbolic",
                        )?
                    }
                };
                if n > 64 {
                    return unsupported(
                        r.count.span,
                        format!(
                            "role `{}` reads its thread identity and has {n} threads; prove handles at most 64 such threads",
                            r.name.name
                        ),
                    )?;
                }
                let from = classes.len();
                for tid in 0..n {
                    let (segs, sites) = b.role_body(r, Some((tid, first + tid, warp_size)), None, cta)?;
                    classes.push(Class {
                        label: format!("{}#{tid}{}", r.name.name, cta_suffix(ctas, cta)),
                        mult: int(1),
                        warps: None,
                        segs,
                        sites,
                    });
                }
                aligned_named_barriers(r, &classes[from..], first, warp_size)?;
            } else {
                let whole = (r.unit != ast::RoleUnit::Threads).then_some(warp_size);
                let (segs, sites) = b.role_body(r, None, whole, cta)?;
                classes.push(Class {
                    label: format!("{}{}", r.name.name, cta_suffix(ctas, cta)),
                    mult: count_t.clone(),
                    warps: role_warps.get(&r.name.name).cloned(),
                    segs,
                    sites,
                });
            }
            gtid = match (gtid, count_t.as_int()) {
                (Some(g), Some(n)) => Some(g + n),
                _ => None,
            };
        }
        }
        // every element of a `manual_init` barrier initialised exactly once; a TMA copy's bytes
        // need the init fenced for the async proxy
        for g in b.groups.iter().filter(|g| b.manual.contains(&g.name)) {
            for cta in 0..ctas {
                let name = format!("{}{}", g.name, cta_suffix(ctas, cta));
                let inits: Vec<(T, Span)> = b.inits.borrow().iter().filter(|x| x.0 == name).map(|x| (x.1.clone(), x.2)).collect();
                let mut seen = vec![0; g.len as usize];
                for (i, sp) in &inits {
                    match i.as_int() {
                        Some(k) if (0..g.len).contains(&k) => seen[k as usize] += 1,
                        _ => return unsupported(*sp, "an init whose element is not a constant here")?,
                    }
                }
                if seen.iter().any(|n| *n != 1) {
                    return unsupported(
                        inits.first().map(|x| x.1).unwrap_or(g.span),
                        format!("an element of `{}` is not initialised exactly once: use before init and re-init are modelled only by the explicit search", g.name),
                    )?;
                }
            }
        }
        if let Some(sp) = b.unfenced_init.get() {
            let copies = classes.iter().flat_map(|c| &c.sites).any(|x| {
                matches!(x.kind, SiteKind::Land { .. }) && b.manual.contains(x.group.split("@cta").next().unwrap_or(&x.group))
            });
            if copies {
                return unsupported(
                    sp,
                    "an init with no fence_mbarrier_init or fence_proxy_async after it, on a barrier that copies complete on: whether the async proxy sees the init is modelled only by the explicit search",
                )?;
            }
        }
        if ctas > 1 {
            let mut per_cta = Vec::new();
            for g in &b.groups {
                for cta in 0..ctas {
                    per_cta.push(GroupInfo {
                        name: format!("{}{}", g.name, cta_suffix(ctas, cta)),
                        ..g.clone()
                    });
                }
            }
            b.groups = per_cta;
        }
        if b.cluster_barrier.get() {
            // every thread of every CTA (an exited one counts as arrived in the model: a
            // shortfall here is refuted, and the explicit search then does not confirm it)
            let all = T::sum(program.roles().map(|r| b.roles[&r.name.name].clone())).mul(int(ctas));
            b.groups.push(GroupInfo {
                name: CLUSTER_BARRIER.into(),
                len: 1,
                count: all,
                span: program.name.span,
            });
        }
        let mut groups = b.groups;
        groups.extend(b.named.into_inner());
        Ok(Summary {
            groups,
            classes,
            symbols,
            refute_only: b.refute_only.into_inner(),
        })
    }

    /// An expression of a declaration: params, role counts, literals.
    fn decl_expr(&self, e: &ast::Expr) -> R<T> {
        let mut cx = Ctx {
            me: None,
            locals: vec![],
            guard: vec![],
            seg: 0,
            in_loop: None,
            loop_scope: 0,
            segs: vec![],
            sites: vec![],
            dead: false,
            whole_warps: None,
            share: Share::All,
            share_scope: 0,
            async_arrivals: vec![],
            loop_vars: vec![],
            inlining: 0,
            cta: 0,
            target: None,
            cluster_arrive: None,
            synced: false,
            role: String::new(),
            unfenced: None,
            early_use: None,
        };
        self.expr(e, &mut cx)
    }

    fn concrete(&self, e: &ast::Expr) -> R<i64> {
        let t = self.decl_expr(e)?;
        match t.as_int() {
            Some(v) => Ok(v),
            None => Err(need_concrete_of(&t, e.span)),
        }
    }

    fn role_body(&self, r: &ast::RoleDecl, me: Option<(i64, i64, i64)>, whole_warps: Option<i64>, cta: i64) -> R<(Vec<Option<Loop>>, Vec<Site>)> {
        let mut cx = Ctx {
            me,
            locals: vec![HashMap::new()],
            guard: vec![],
            seg: 0,
            in_loop: None,
            loop_scope: 0,
            segs: vec![None],
            sites: vec![],
            dead: false,
            whole_warps,
            share: Share::All,
            // (the rank is set below)
            share_scope: 0,
            async_arrivals: vec![],
            loop_vars: vec![],
            inlining: 0,
            cta: 0,
            target: None,
            cluster_arrive: None,
            synced: false,
            role: String::new(),
            unfenced: None,
            early_use: None,
        };
        cx.cta = cta;
        cx.role = r.name.name.clone();
        self.block(&r.body, &mut cx)?;
        if let Some(sp) = cx.early_use.or(cx.unfenced.filter(|_| !cx.synced)) {
            return unsupported(
                sp,
                "a `manual_init` barrier used (or initialised) with no `syncthreads` ordering its init before the use: init order is modelled only by the explicit search",
            )?;
        }
        // A thread's j-th wait on a barrier names a phase by its own count of waits: the waits of
        // one barrier must run on the same lanes (all, or the elected one, or the others).
        for w in cx.sites.iter().filter(|x| matches!(x.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. })) {
            if let Some(x) = cx.sites.iter().find(|x| {
                x.group == w.group && x.share != w.share && matches!(x.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. })
            }) {
                return unsupported(
                    x.span,
                    format!("waits on `{}` from an elected block and from other lanes: the lanes then count their waits differently", w.group),
                )?;
            }
        }
        // An arrive-on happens when the copies land, possibly after the thread's later
        // arrivals: the j-th arrival of the thread is the j-th phase's only if all its
        // arrivals on that barrier are arrive-ons (then which is j-th does not matter).
        for &a in &cx.async_arrivals {
            let g = &cx.sites[a].group;
            if let Some(x) = cx
                .sites
                .iter()
                .find(|x| &x.group == g && matches!(x.kind, SiteKind::Arrive { .. }) && !cx.async_arrivals.contains(&x.pos))
            {
                return unsupported(
                    x.span,
                    format!("an arrival on `{g}` by a thread that also arrives on it through cp_async_arrive_noinc, whose arrive-on may come later: the order of its arrivals is modelled only by the explicit search"),
                )?;
            }
        }
        Ok((cx.segs, cx.sites))
    }

    /// Flatten a block. Returns whether control cannot continue after it (it returned on every path).
    fn block(&self, blk: &ast::Block, cx: &mut Ctx) -> R<()> {
        cx.locals.push(HashMap::new());
        for s in &blk.stmts {
            if cx.dead {
                break;
            }
            self.stmt(s, cx)?;
        }
        cx.locals.pop();
        Ok(())
    }

    fn lookup(&self, name: &str, cx: &Ctx) -> Option<Local> {
        cx.locals.iter().rev().find_map(|m| m.get(name).cloned())
    }

    fn stmt(&self, s: &ast::Stmt, cx: &mut Ctx) -> R<()> {
        match &s.kind {
            StmtKind::Let { name, value } => {
                if let ast::Value::Op(op) = value {
                    if matches!(op.kind, OpKind::Elect) {
                        self.elect(op.span, cx)?;
                        cx.locals.last_mut().unwrap().insert(name.name.clone(), Local::Elect);
                        return Ok(());
                    }
                }
                let v = match value {
                    ast::Value::Expr(e) => Local::Term(self.expr(e, cx)?),
                    ast::Value::Op(op) => match self.op(op, cx)? {
                        Some(site) => Local::Token(site),
                        None => {
                            return unsupported(
                                op.span,
                                "the result of try_wait depends on the interleaving; only the explicit search models it",
                            )?
                        }
                    },
                };
                cx.locals.last_mut().unwrap().insert(name.name.clone(), v);
            }
            StmtKind::Assign { name, value } => {
                if self.vars.contains(&name.name) {
                    return unsupported(
                        s.span,
                        format!("`{}` is a shared variable; its values depend on the interleaving", name.name),
                    )?;
                }
                let scope = cx.locals.iter().rposition(|m| m.contains_key(&name.name));
                if cx.share != Share::All && scope.is_some_and(|ix| ix < cx.share_scope) {
                    return unsupported(
                        s.span,
                        format!("`{}` is assigned inside an elected block: its lanes then hold different values", name.name),
                    )?;
                }
                if scope.is_some_and(|ix| cx.in_loop.is_none() || ix >= cx.loop_scope) {
                    // straight-line code (outside the symbolic loop, or a local of the current
                    // iteration): the new value, where this statement runs
                    if let (ast::Value::Expr(e), Some(Local::Term(old))) = (value, self.lookup(&name.name, cx)) {
                        let new = self.expr(e, cx)?;
                        let v = T::ite(B::and(cx.guard.clone()), new, old);
                        if let Some(scope) = cx.locals.iter_mut().rev().find(|m| m.contains_key(&name.name)) {
                            scope.insert(name.name.clone(), Local::Term(v));
                        }
                        return Ok(());
                    }
                }
                return unsupported(
                    s.span,
                    format!(
                        "local `{}` is reassigned; prove needs every local to be a closed form of the parameters and loop variables (write it as `let {} = ...` of the loop variable)",
                        name.name, name.name
                    ),
                )?;
            }
            StmtKind::For { var: v, lo, hi, body } => {
                let assigned = block_assigns(body);
                if assigned.contains(&v.name) {
                    return unsupported(s.span, format!("the loop variable `{}` is assigned inside its loop", v.name))?;
                }
                if !block_has_barrier_ops(body) && !block_returns(body) {
                    if let Some(n) = assigned.iter().find(|n| self.vars.contains(n) && self.lookup(n, cx).is_none()) {
                        return unsupported(s.span, format!("`{n}` is a shared variable; its values depend on the interleaving"))?;
                    }
                    let outer: Vec<String> = assigned.iter().filter(|n| self.lookup(n, cx).is_some()).cloned().collect();
                    if !outer.is_empty() {
                        return self.effect_loop(s.span, &v.name, lo, hi, body, &outer, cx);
                    }
                    if cx.in_loop.is_some() || self.unroll {
                        // no barrier operation and no local that outlives it: nothing the
                        // counting laws see
                        return Ok(());
                    }
                }
                if self.unroll && cx.in_loop.is_none() {
                    let (l, h) = (self.expr(lo, cx)?, self.expr(hi, cx)?);
                    match (l.as_int(), h.as_int()) {
                        (Some(l), Some(h)) if h - l <= UNROLL => {
                            for i in l..h {
                                cx.locals.push(HashMap::from([(v.name.clone(), Local::Term(int(i)))]));
                                cx.loop_vars.push(v.name.clone());
                                self.block(body, cx)?;
                                cx.loop_vars.pop();
                                cx.locals.pop();
                                if cx.dead {
                                    break;
                                }
                            }
                            return Ok(());
                        }
                        _ => {
                            return unsupported(
                                s.span,
                                format!("a loop to unroll needs constant bounds and at most {UNROLL} iterations"),
                            )?
                        }
                    }
                }
                if cx.in_loop.is_some() {
                    if block_has_barrier_ops(body) || block_returns(body) {
                        return unsupported(
                            s.span,
                            "a nested loop with barrier operations or a return: prove handles one loop level",
                        )?;
                    }
                    return Ok(());
                }
                if !cx.guard.is_empty() {
                    return unsupported(s.span, "a loop under a condition: prove handles loops at the top level of a role")?;
                }
                if block_returns(body) {
                    return unsupported(
                        s.span,
                        "a `return` inside a loop: the iterations that run depend on the first one that returns",
                    )?;
                }
                let lo_t = self.expr(lo, cx)?;
                let hi_t = self.expr(hi, cx)?;
                let name = format!("{}@{}", v.name, s.span.start);
                cx.segs.push(Some(Loop {
                    var: name.clone(),
                    lo: lo_t,
                    hi: hi_t,
                    span: s.span,
                }));
                cx.seg = cx.segs.len() - 1;
                cx.in_loop = Some(name.clone());
                cx.locals.push(HashMap::from([(v.name.clone(), Local::Term(var(&name)))]));
                cx.loop_scope = cx.locals.len();
                cx.loop_vars.push(v.name.clone());
                self.block(body, cx)?;
                cx.loop_vars.pop();
                cx.locals.pop();
                cx.in_loop = None;
                cx.loop_scope = 0;
                cx.segs.push(None);
                cx.seg = cx.segs.len() - 1;
            }
            StmtKind::If { cond, then, els } => {
                if let Some(elected) = self.elect_test(cond, cx) {
                    return self.elected_block(s.span, elected, then, els.as_ref(), cx);
                }
                let c = self.cond(cond, cx)?;
                // a condition known here (a thread's identity, an unrolled iteration): only one
                // branch exists, and a `return` in it ends the thread
                if let B::Const(v) = c {
                    if v {
                        self.block(then, cx)?;
                    } else if let Some(e) = els {
                        self.block(e, cx)?;
                    }
                    return Ok(());
                }
                let then_ret = block_returns_always(then);
                let else_ret = els.as_ref().is_some_and(block_returns_always);
                let base = cx.guard.len();
                cx.guard.push(c.clone());
                self.block(then, cx)?;
                cx.dead = false;
                cx.guard.truncate(base);
                if let Some(e) = els {
                    cx.guard.push(c.clone().not());
                    self.block(e, cx)?;
                    cx.dead = false;
                    cx.guard.truncate(base);
                }
                if (then_ret || else_ret) && base != 0 {
                    return unsupported(
                        s.span,
                        "a `return` under nested conditions: prove handles `if C { ...; return }` at the top level of a role",
                    )?;
                }
                if (block_returns(then) && !then_ret) || els.as_ref().is_some_and(|e| block_returns(e) && !block_returns_always(e)) {
                    return unsupported(s.span, "a `return` that only some paths of a branch reach")?;
                }
                match (then_ret, else_ret) {
                    (true, true) => cx.dead = true,
                    (true, false) => {
                        if cx.in_loop.is_some() {
                            return unsupported(s.span, "a `return` inside a loop")?;
                        }
                        cx.guard.push(c.not())
                    }
                    (false, true) => {
                        if cx.in_loop.is_some() {
                            return unsupported(s.span, "a `return` inside a loop")?;
                        }
                        cx.guard.push(c)
                    }
                    (false, false) => {}
                }
            }
            StmtKind::Op(op) => {
                self.op(op, cx)?;
            }
            StmtKind::Return => {
                if cx.in_loop.is_some() {
                    return unsupported(s.span, "a `return` inside a loop")?;
                }
                cx.dead = true;
            }
            StmtKind::Assert(_) | StmtKind::Work => {}
            // The CTA barrier: an arrival and a wait on a barrier of all the CTA's threads, so
            // that the arrivals law counts it and the wait-order law sees the cycles through it.
            StmtKind::SyncThreads => {
                if !cx.synced {
                    if !cx.guard.is_empty() || cx.in_loop.is_some() || cx.share != Share::All {
                        if let Some(sp) = cx.early_use.or(self.inits.borrow().last().map(|x| x.2)).filter(|_| !self.manual.is_empty()) {
                            return unsupported(sp, "a `manual_init` barrier whose thread's first `syncthreads` is conditional or in a loop: init order is modelled only by the explicit search")?;
                        }
                    }
                    if let Some(sp) = cx.unfenced.take() {
                        self.unfenced_init.set(Some(sp));
                    }
                    cx.synced = true;
                }
                let g = format!("{SYNCTHREADS}{}", cta_suffix(self.ctas, cx.cta));
                let a = self.push(cx, s.span, g.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
                self.push(cx, s.span, g, int(0), SiteKind::WaitToken { arrive: a });
            }
            // It adds no arrival and no byte, only blocking. In a class of whole warps every lane
            // runs the same code, so the lanes it waits for reach it unless one of them blocks
            // earlier, on a wait whose arrivals the laws account for: it adds no cycle the
            // wait-order law does not see. Elsewhere left out, and no proof stands on it.
            StmtKind::SyncWarp if cx.whole_warps.is_some() && cx.share == Share::All => {}
            // A thread of its own class: an arrival and a wait on a barrier of its warp's lanes,
            // so that the arrivals law counts who reaches it and the wait-order law sees cycles
            // through it (as for `syncthreads`).
            StmtKind::SyncWarp if cx.me.is_some() && cx.share == Share::All && self.warp_sync(s.span, None, cx)? => {}
            StmtKind::SyncWarp => {
                self.refute_only.borrow_mut().get_or_insert(Unsupported {
                    span: s.span,
                    why: "syncwarp waits for the unfinished lanes of the warp; warps are modelled only by the explicit search, so the laws can be refuted here but not proved".into(),
                });
            }
            StmtKind::While { cond, body } => self.while_loop(s.span, cond, body, cx)?,
            StmtKind::Break => {
                return unsupported(
                    s.span,
                    "a `while` loop or `break`: its trip count depends on the interleaving; only the explicit search models it",
                )?
            }
            // A mask naming every lane of the warp is `syncwarp`, in a class of whole warps.
            StmtKind::SyncWarpMask(m) => {
                let full = cx.whole_warps.filter(|ws| *ws < 63).map(|ws| (1i64 << ws) - 1);
                let mask = self.expr(m, cx).ok().and_then(|t| t.as_int());
                match (full, mask) {
                    (Some(f), Some(k)) if cx.share == Share::All && k & f == f => {}
                    (None, Some(k)) if cx.me.is_some() && cx.share == Share::All && self.warp_sync(s.span, Some(k), cx)? => {}
                    _ => return unsupported(s.span, "syncwarp(mask) with a mask other than every lane of a warp of one role is modelled only by the explicit search")?,
                }
            }
            StmtKind::Call { name, args } => self.call(s.span, name, args, cx)?,
        }
        Ok(())
    }

    /// A `while` loop, where its trip count does not depend on the interleaving: a spin on
    /// `try_wait`/`try_wait_parity` (`let ok = 0; while ok == 0 { ok = try_wait_parity(B, P) }`)
    /// ends exactly when `wait_parity(B, P)` would pass, so it is that wait; a loop whose
    /// condition is a constant at every test (locals and parameters of known value, as a
    /// persistent kernel's `while blk < BLOCKS { ...; blk = blk + 1 }`) is run as often as it
    /// runs, at most `UNROLL` times. Anything else (a shared var, a symbolic bound, `break`)
    /// depends on the interleaving or on values prove does not enumerate: refused.
    fn while_loop(&self, span: Span, cond: &ast::Expr, body: &ast::Block, cx: &mut Ctx) -> R<()> {
        let refuse = || -> R<()> {
            unsupported(
                span,
                "a `while` loop whose condition is not a constant at each test, or that holds a `break`: its trip count depends on the interleaving or on values prove does not enumerate; only the explicit search models it",
            )?
        };
        if let Some(r) = self.spin_wait(cond, body, cx) {
            return r;
        }
        if walk::block_breaks(body) || block_returns(body) {
            return refuse();
        }
        if cx.in_loop.is_some() && block_has_barrier_ops(body) {
            return unsupported(span, "a nested loop with barrier operations or a return: prove handles one loop level")?;
        }
        let mut trips = 0;
        loop {
            match self.cond(cond, cx) {
                Ok(B::Const(false)) => return Ok(()),
                Ok(B::Const(true)) if trips < UNROLL => {}
                Ok(B::Const(true)) => {
                    return unsupported(span, format!("a `while` loop that runs more than {UNROLL} times: prove unrolls at most {UNROLL}"))?
                }
                // a ranged parameter in the condition: the caller gives it each value in turn
                Ok(c) => match cond_vars(&c).into_iter().find(|v| !v.contains('@') && !v.contains('#')) {
                    Some(v) => return Err(need_concrete_of(&var(&v), cond.span)),
                    None => return refuse(),
                },
                Err(e) => return Err(e),
            }
            self.block(body, cx)?;
            trips += 1;
        }
    }

    /// The spin `while X == 0 { X = try_wait_parity(B, P) }` (or `try_wait(B, T)`) on a local
    /// that is 0 here: the wait it stands for, and X becomes 1. `None` when it is not that shape.
    fn spin_wait(&self, cond: &ast::Expr, body: &ast::Block, cx: &mut Ctx) -> Option<R<()>> {
        let x = match &cond.kind {
            ExprKind::Binary(BinOp::Eq, a, b) => match (&a.kind, &b.kind) {
                (ExprKind::Name(n), ExprKind::Int(0)) | (ExprKind::Int(0), ExprKind::Name(n)) => n,
                _ => return None,
            },
            ExprKind::Unary(UnOp::Not, a) => match &a.kind {
                ExprKind::Name(n) => n,
                _ => return None,
            },
            _ => return None,
        };
        let [stmt] = body.stmts.as_slice() else { return None };
        let StmtKind::Assign {
            name,
            value: ast::Value::Op(op),
        } = &stmt.kind
        else {
            return None;
        };
        if &name.name != x || !matches!(self.lookup(x, cx), Some(Local::Term(T::Int(0)))) {
            return None;
        }
        let scope = cx.locals.iter().rposition(|m| m.contains_key(x))?;
        if (cx.in_loop.is_some() && scope < cx.loop_scope) || (cx.share != Share::All && scope < cx.share_scope) {
            return None;
        }
        let wait = match &op.kind {
            OpKind::TryWaitParity { bar, parity } => ast::Op {
                kind: OpKind::WaitParity {
                    bar: bar.clone(),
                    parity: parity.clone(),
                },
                span: op.span,
            },
            OpKind::TryWait { bar, token } => ast::Op {
                kind: OpKind::Wait {
                    bar: bar.clone(),
                    token: token.clone(),
                },
                span: op.span,
            },
            _ => return None,
        };
        Some(self.op(&wait, cx).map(|_| {
            set_local(cx, x, Local::Term(int(1)));
        }))
    }

    /// A call of an inline function, expanded here as the lowering expands it: a parameter
    /// bound to a plain `let` local of the caller names that local (copied in, and copied out
    /// after the body, which sees nothing else of the caller's, so the two agree); any other
    /// argument is a fresh copy. A caller's local that a symbolic loop carries from one
    /// iteration to the next (or that lives outside an elected block) stays below the
    /// iteration's scope, so assigning it in the body is refused as it is in the caller.
    fn call(&self, span: Span, name: &ast::Ident, args: &[ast::Expr], cx: &mut Ctx) -> R<()> {
        let Some(f) = self.fns.get(&name.name) else {
            return unsupported(span, format!("`{}` is not a function", name.name))?;
        };
        if f.params.len() != args.len() || cx.inlining >= 64 {
            return unsupported(span, format!("`{}` cannot be expanded here (wrong arity or recursion)", name.name))?;
        }
        let mut outer: HashMap<String, Local> = HashMap::new();
        let mut carried_here: HashMap<String, Local> = HashMap::new();
        let mut inner: HashMap<String, Local> = HashMap::new();
        let mut by_ref: Vec<(String, String)> = Vec::new();
        for (prm, a) in f.params.iter().zip(args) {
            let caller = match &a.kind {
                ExprKind::Name(n) if !cx.loop_vars.contains(n) => cx.locals.iter().rposition(|m| m.contains_key(n)).map(|ix| (n.clone(), ix)),
                _ => None,
            };
            match caller {
                Some((n, ix)) => {
                    if by_ref.iter().any(|(_, m)| *m == n) {
                        return unsupported(span, format!("`{n}` is passed twice to `{}`: two names for one local", name.name))?;
                    }
                    let v = cx.locals[ix][&n].clone();
                    let outside_elected = cx.share != Share::All && ix < cx.share_scope;
                    let carried = cx.in_loop.is_some() && ix < cx.loop_scope;
                    if outside_elected {
                        &mut outer
                    } else if carried {
                        &mut carried_here
                    } else {
                        &mut inner
                    }
                    .insert(prm.name.clone(), v);
                    by_ref.push((prm.name.clone(), n));
                }
                None => {
                    let v = Local::Term(self.expr(a, cx)?);
                    inner.insert(prm.name.clone(), v);
                }
            }
        }
        // scope 0: outside the elected block; 1: carried by the symbolic loop; 2: free to assign
        let saved = std::mem::replace(&mut cx.locals, vec![outer, carried_here, inner]);
        let saved_loop_vars = std::mem::take(&mut cx.loop_vars);
        let (loop_scope, share_scope) = (cx.loop_scope, cx.share_scope);
        cx.loop_scope = 2;
        cx.share_scope = 1;
        cx.inlining += 1;
        let run = self.block(&f.body, cx);
        cx.inlining -= 1;
        let after = std::mem::replace(&mut cx.locals, saved);
        cx.loop_vars = saved_loop_vars;
        cx.loop_scope = loop_scope;
        cx.share_scope = share_scope;
        run?;
        for (prm, n) in by_ref {
            if let Some(v) = after.iter().rev().find_map(|m| m.get(&prm).cloned()) {
                set_local(cx, &n, v);
            }
        }
        Ok(())
    }

    /// `syncwarp` / `syncwarp(mask)` of a thread that is its own class: an arrival and a wait
    /// on the barrier of its warp (and mask) whose count is the modelled lanes it names. False
    /// when the warp's lanes are not known (a role of symbolic size before it).
    fn warp_sync(&self, span: Span, mask: Option<i64>, cx: &mut Ctx) -> R<bool> {
        let (_, gtid, ws) = cx.me.expect("a thread of its own class");
        let Some(lanes) = self.warp_lanes.get(&(gtid / ws)) else { return Ok(false) };
        let lane = gtid % ws;
        let named: Vec<i64> = lanes.iter().copied().filter(|l| mask.is_none_or(|m| *l < 63 && (m >> l) & 1 == 1)).collect();
        if !named.contains(&lane) {
            return unsupported(span, "a lane runs syncwarp(mask) without its own bit: undefined behaviour, which only the explicit search reports")?;
        }
        let name = match mask {
            None => format!("syncwarp w{}{}", gtid / ws, cta_suffix(self.ctas, cx.cta)),
            Some(m) => format!("syncwarp w{} {m:#x}{}", gtid / ws, cta_suffix(self.ctas, cx.cta)),
        };
        {
            let mut named_groups = self.named.borrow_mut();
            if !named_groups.iter().any(|g| g.name == name) {
                named_groups.push(GroupInfo {
                    name: name.clone(),
                    len: 1,
                    count: int(named.len() as i64),
                    span,
                });
            }
        }
        let a = self.push(cx, span, name.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
        self.push(cx, span, name, int(0), SiteKind::WaitToken { arrive: a });
        Ok(true)
    }

    /// `elect()`: a warp-wide wait and a choice of one lane. Exact only where every lane of the
    /// warp runs the class's code (whole warps of one role that read no identity): then its
    /// lanes reach it together unless one blocks earlier on a wait the laws account for, and the
    /// elected block runs on one lane per warp, whichever it is.
    fn elect(&self, span: Span, cx: &Ctx) -> R<()> {
        if cx.whole_warps.is_none() {
            return unsupported(
                span,
                "elect() in a role sized in threads, or whose lanes read their identity: which lanes of the warp take part (and which one is elected) is modelled only by the explicit search",
            )?;
        }
        if cx.share != Share::All {
            return unsupported(span, "elect() inside an elected block: only one lane of the warp reaches it")?;
        }
        if cx.whole_warps.is_some_and(|ws| ws < 2) {
            return unsupported(span, "elect() with warp_size 1: prove counts the elected lane against the others")?;
        }
        Ok(())
    }

    /// `Some(true)` for a test that holds in the elected lane (`e == 1`, `e != 0`, `e`),
    /// `Some(false)` for one that holds in the others (`e == 0`, `e != 1`), on an `elect()` result.
    fn elect_test(&self, c: &ast::Expr, cx: &Ctx) -> Option<bool> {
        let is_elect = |e: &ast::Expr| matches!(&e.kind, ExprKind::Name(n) if matches!(self.lookup(n, cx), Some(Local::Elect)));
        match &c.kind {
            ExprKind::Name(_) if is_elect(c) => Some(true),
            ExprKind::Unary(UnOp::Not, a) if is_elect(a) => Some(false),
            ExprKind::Binary(op @ (BinOp::Eq | BinOp::Ne), a, b) => {
                let (e, v) = match (&a.kind, &b.kind) {
                    (_, ExprKind::Int(v)) if is_elect(a) => (true, *v),
                    (ExprKind::Int(v), _) if is_elect(b) => (true, *v),
                    _ => (false, 0),
                };
                if !e || !(v == 0 || v == 1) {
                    return None;
                }
                Some((v == 1) == (*op == BinOp::Eq))
            }
            _ => None,
        }
    }

    fn elected_block(&self, span: Span, elected: bool, then: &ast::Block, els: Option<&ast::Block>, cx: &mut Ctx) -> R<()> {
        if block_returns(then) || els.is_some_and(block_returns) {
            return unsupported(span, "a `return` inside an elected block: the lanes then end at different points")?;
        }
        let (outer, scope) = (cx.share, cx.share_scope);
        for (blk, share) in [(Some(then), elected), (els, !elected)] {
            let Some(blk) = blk else { continue };
            cx.share = if share { Share::Elected } else { Share::Others };
            // `block` pushes the block's scope at this index
            cx.share_scope = cx.locals.len();
            self.block(blk, cx)?;
        }
        cx.share = outer;
        cx.share_scope = scope;
        Ok(())
    }

    /// The barrier a `bar_sync`/`bar_arrive` names, registered with its thread count. The id
    /// and count must be constants and the count a positive multiple of the warp size (else the
    /// model reports undefined behaviour, outside the laws); one id, one count.
    fn named_barrier(&self, span: Span, id: &ast::Expr, count: &ast::Expr, cx: &mut Ctx) -> R<String> {
        let Some(ws) = cx.whole_warps.or(cx.me.map(|m| m.2)) else {
            return unsupported(
                span,
                "a named barrier in a role sized in threads: its warps may hold other roles' lanes, and a warp arrives as warp_size threads; prove counts named barriers in roles of whole warps",
            )?;
        };
        if cx.share != Share::All {
            return unsupported(span, "a named barrier inside an elected block: the other lanes of the warp do not reach it")?;
        }
        let (id, count) = (self.expr(id, cx)?.as_int(), self.expr(count, cx)?.as_int());
        let (Some(id), Some(count)) = (id, count) else {
            return unsupported(span, "a named barrier whose id or count is not a constant")?;
        };
        if !(0..=15).contains(&id) || count <= 0 || count % ws != 0 {
            return unsupported(
                span,
                format!("named barrier {id} with count {count}: an id outside 0..=15 or a count that is not a positive multiple of the warp size is undefined behaviour, which only the explicit search reports"),
            )?;
        }
        let name = format!("{NAMED_PREFIX}{id}{}", cta_suffix(self.ctas, cx.cta));
        let mut named = self.named.borrow_mut();
        match named.iter().find(|g| g.name == name) {
            Some(g) if g.count != int(count) => {
                return unsupported(
                    span,
                    format!("named barrier {id} is used with different counts: a warp arriving with another count than the use in progress is undefined behaviour"),
                )?
            }
            Some(_) => {}
            None => named.push(GroupInfo {
                name: name.clone(),
                len: 1,
                count: int(count),
                span,
            }),
        }
        Ok(name)
    }

    /// A loop without barrier operations that assigns locals living after it: its effect on
    /// them, exactly. A constant trip count of at most `UNROLL` runs the body that many times; a
    /// longer one needs an effect that repeats with period 1 or 2 (`p = 1 - p`); a trip count of
    /// ranged parameters makes the caller give them each value in turn. Anything else is refused:
    /// skipping the loop would prove the protocol with the wrong values.
    #[allow(clippy::too_many_arguments)]
    fn effect_loop(&self, span: Span, v: &str, lo: &ast::Expr, hi: &ast::Expr, body: &ast::Block, outer: &[String], cx: &mut Ctx) -> R<()> {
        let l = self.expr(lo, cx)?;
        let trips = self.expr(hi, cx)?.sub(l.clone());
        let names = outer.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let n = match trips.as_int() {
            Some(n) => n.max(0),
            None if term_vars(&trips).iter().any(|x| x.contains('@')) => {
                return unsupported(
                    span,
                    format!("a loop without barrier operations assigns {names}, and its trip count depends on an enclosing loop's variable: prove needs a constant trip count here"),
                )?
            }
            None => return Err(need_concrete_of(&trips, span)),
        };
        let n = if n <= UNROLL {
            n
        } else {
            match self.effect_period(v, body, outer, cx)? {
                Some(p) => n % p,
                None => {
                    return unsupported(
                        span,
                        format!("a loop without barrier operations assigns {names} over {n} iterations, and its effect does not repeat with period 1 or 2: prove can neither unroll nor summarise it"),
                    )?
                }
            }
        };
        for k in 0..n {
            cx.locals.push(HashMap::from([(v.to_string(), Local::Term(l.clone().add(int(k))))]));
            cx.loop_vars.push(v.to_string());
            self.block(body, cx)?;
            cx.loop_vars.pop();
            cx.locals.pop();
        }
        Ok(())
    }

    /// 1 or 2 when running the body that many times leaves every assigned local as it was, for
    /// any value of it and of the loop variable (terms compared after normalisation).
    fn effect_period(&self, v: &str, body: &ast::Block, outer: &[String], cx: &mut Ctx) -> R<Option<i64>> {
        let saved: Vec<Option<Local>> = outer.iter().map(|n| self.lookup(n, cx)).collect();
        let fresh: Vec<T> = outer.iter().map(|n| var(&format!("{n}#effect"))).collect();
        for (n, t) in outer.iter().zip(&fresh) {
            set_local(cx, n, Local::Term(t.clone()));
        }
        let j = var(&format!("{v}#effect"));
        let mut period = None;
        for p in 1..=2 {
            cx.locals.push(HashMap::from([(v.to_string(), Local::Term(j.clone()))]));
            cx.loop_vars.push(v.to_string());
            let run = self.block(body, cx);
            cx.loop_vars.pop();
            cx.locals.pop();
            if run.is_err() {
                break;
            }
            let now: Vec<Option<Local>> = outer.iter().map(|n| self.lookup(n, cx)).collect();
            let back = now.iter().zip(&fresh).all(|(x, f)| matches!(x, Some(Local::Term(t)) if t == f));
            if back {
                period = Some(p);
                break;
            }
        }
        for (n, old) in outer.iter().zip(saved) {
            if let Some(old) = old {
                set_local(cx, n, old);
            }
        }
        Ok(period)
    }

    fn place(&self, p: &ast::Place, cx: &mut Ctx) -> R<(String, T)> {
        let idx = match &p.index {
            Some(e) => self.expr(e, cx)?,
            None => int(0),
        };
        let cta = cx.target.unwrap_or(cx.cta);
        Ok((format!("{}{}", p.name.name, cta_suffix(self.ctas, cta)), idx))
    }

    /// The CTA a remote operation names: a constant rank of the cluster.
    fn target_cta(&self, e: &ast::Expr, cx: &mut Ctx) -> R<i64> {
        match self.expr(e, cx)?.as_int() {
            Some(r) if (0..self.ctas).contains(&r) => Ok(r),
            Some(r) => unsupported(e.span, format!("CTA {r} is outside the cluster: the explicit search reports it"))?,
            None => unsupported(e.span, "a remote operation whose CTA is not a constant for each CTA's threads")?,
        }
    }

    fn push(&self, cx: &mut Ctx, span: Span, group: String, index: T, kind: SiteKind) -> usize {
        let pos = cx.sites.len();
        if !cx.synced && self.manual.contains(group.split("@cta").next().unwrap_or(&group)) {
            cx.early_use.get_or_insert(span);
        }
        cx.sites.push(Site {
            span,
            share: cx.share,
            seg: cx.seg,
            pos,
            guard: B::and(cx.guard.clone()),
            group,
            index,
            kind,
        });
        pos
    }

    fn buffer_bytes(&self, buf: &ast::Place, bytes: &Option<ast::Expr>, cx: &mut Ctx) -> R<T> {
        match bytes {
            Some(e) => self.expr(e, cx),
            None => Ok(self.buffers.get(&buf.name.name).cloned().unwrap_or(int(0))),
        }
    }

    /// Record the sites of one operation; the arrival site's index when it yields a token.
    fn op(&self, op: &ast::Op, cx: &mut Ctx) -> R<Option<usize>> {
        let sp = op.span;
        Ok(match &op.kind {
            OpKind::Arrive { bar, n } => {
                let (g, i) = self.place(bar, cx)?;
                let n = match n {
                    Some(e) => self.expr(e, cx)?,
                    None => int(1),
                };
                Some(self.push(cx, sp, g, i, SiteKind::Arrive { n, drop: false }))
            }
            OpKind::ArriveExpectTx { bar, bytes } => {
                let (g, i) = self.place(bar, cx)?;
                let b = self.expr(bytes, cx)?;
                self.push(cx, sp, g.clone(), i.clone(), SiteKind::Expect { bytes: b });
                Some(self.push(cx, sp, g, i, SiteKind::Arrive { n: int(1), drop: false }))
            }
            OpKind::Wait { bar, token } => {
                let (g, i) = self.place(bar, cx)?;
                let arrive = match &token.kind {
                    ExprKind::Name(n) => match self.lookup(n, cx) {
                        Some(Local::Token(a)) => a,
                        _ => return unsupported(token.span, "a token wait on a value that is not a token of this iteration")?,
                    },
                    _ => return unsupported(token.span, "a token wait on a computed value")?,
                };
                let a = &cx.sites[arrive];
                if a.group != g || a.seg != cx.seg {
                    return unsupported(sp, "a token from another barrier or another loop iteration")?;
                }
                self.push(cx, sp, g, i, SiteKind::WaitToken { arrive });
                None
            }
            OpKind::WaitParity { bar, parity } => {
                let (g, i) = self.place(bar, cx)?;
                let p = self.expr(parity, cx)?;
                self.push(cx, sp, g, i, SiteKind::WaitParity { parity: p });
                None
            }
            OpKind::TryWait { .. } | OpKind::TryWaitParity { .. } => {
                return unsupported(
                    sp,
                    "try_wait returns 0 or 1 depending on the interleaving; only the explicit search models it",
                )?
            }
            OpKind::ArriveAndWait { bar } => {
                let (g, i) = self.place(bar, cx)?;
                let a = self.push(cx, sp, g.clone(), i.clone(), SiteKind::Arrive { n: int(1), drop: false });
                self.push(cx, sp, g, i, SiteKind::WaitToken { arrive: a });
                None
            }
            OpKind::ArriveAndDrop { bar } => {
                if cx.in_loop.is_some() {
                    return unsupported(sp, "arrive_and_drop inside a loop: prove handles a drop at the top level of a role")?;
                }
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g, i, SiteKind::Arrive { n: int(1), drop: true });
                None
            }
            OpKind::ExpectTx { bar, bytes } => {
                let (g, i) = self.place(bar, cx)?;
                let b = self.expr(bytes, cx)?;
                self.push(cx, sp, g, i, SiteKind::Expect { bytes: b });
                None
            }
            OpKind::CompleteTx { bar, bytes } => {
                let (g, i) = self.place(bar, cx)?;
                let b = self.expr(bytes, cx)?;
                self.push(cx, sp, g, i, SiteKind::Land { bytes: b });
                None
            }
            OpKind::CopyAsync { buf, bar, bytes, .. } => {
                let b = self.buffer_bytes(buf, bytes, cx)?;
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g, i, SiteKind::Land { bytes: b });
                None
            }
            OpKind::MemcpyAsync { buf, bar, bytes, .. } => {
                let b = self.buffer_bytes(buf, bytes, cx)?;
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g.clone(), i.clone(), SiteKind::Land { bytes: b.clone() });
                self.push(cx, sp, g, i, SiteKind::Expect { bytes: b });
                None
            }
            // The threads' own accesses of shared memory never touch a barrier's counts.
            k if k.object() == ast::Object::Memory => None,
            // A part of a buffer: its bytes land on the barrier like a whole copy's.
            OpKind::CopyAsyncPart {
                buf, bar, offset, bytes, libcu, ..
            } => {
                let b = match bytes {
                    Some(e) => self.expr(e, cx)?,
                    None => self.buffer_bytes(buf, &None, cx)?.sub(self.expr(offset, cx)?),
                };
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g.clone(), i.clone(), SiteKind::Land { bytes: b.clone() });
                if *libcu {
                    self.push(cx, sp, g, i, SiteKind::Expect { bytes: b });
                }
                None
            }
            // cp.async copies land on their own and touch no barrier; a group wait waits only
            // for the thread's own copies, which land whatever the other threads do.
            OpKind::CpAsync { .. } | OpKind::CpAsyncCommitGroup | OpKind::CpAsyncWait { .. } => None,
            // The arrive-on. Without `.noinc` it raises the pending count of the phase it runs in
            // and lowers it again once the thread's copies land: no arrival of the phase's count
            // (only a delay until copies that land on their own have landed). With `.noinc` it
            // is one arrival of that thread.
            OpKind::CpAsyncArrive { bar, noinc } => {
                if *noinc {
                    let (g, i) = self.place(bar, cx)?;
                    let a = self.push(cx, sp, g, i, SiteKind::Arrive { n: int(1), drop: false });
                    cx.async_arrivals.push(a);
                }
                None
            }
            // The async proxy: TMA stores, bulk groups, wgmma and proxy fences touch no
            // mbarrier count and no tx-count, and their waits wait only for the thread's own
            // asynchronous reads, which finish whatever the other threads do. Outside the
            // counting laws (data races, lifetimes: the explicit search).
            OpKind::CopyStoreAsync { .. }
            | OpKind::CommitGroup
            | OpKind::WaitGroup { .. }
            | OpKind::WgmmaAsync { .. }
            | OpKind::WgmmaWait { .. }
            | OpKind::FenceProxyAsync
            | OpKind::FenceMbarrierInit => {
                if matches!(op.kind, OpKind::FenceProxyAsync | OpKind::FenceMbarrierInit) {
                    cx.unfenced = None;
                }
                None
            }
            // An init in the straight-line code before the thread's first `syncthreads`, which
            // every thread passes before it touches the barrier: the barrier then is what a
            // declared one is (count and phase 0), and each element must be initialised once.
            OpKind::Init { bar, count } => {
                let (g, i) = self.place(bar, cx)?;
                let declared = self.groups.iter().find(|x| x.name == bar.name.name).map(|x| x.count.clone());
                let same_count = match count {
                    None => true,
                    Some(e) => Some(self.expr(e, cx)?) == declared,
                };
                // one thread: an init by several would re-initialise a live barrier
                let single = cx.me.is_some() || self.roles.get(&cx.role).and_then(|t| t.as_int()) == Some(1);
                if !single || cx.synced || cx.in_loop.is_some() || !cx.guard.is_empty() || cx.share != Share::All || !same_count {
                    return unsupported(
                        sp,
                        "an init that is not unconditional straight-line code before the thread's first `syncthreads`, or that sets another count than the declaration: init order and re-initialisation are modelled only by the explicit search",
                    )?;
                }
                self.inits.borrow_mut().push((g, i, sp));
                cx.unfenced = Some(sp);
                None
            }
            OpKind::Inval { .. } => return unsupported(sp, "inval ends a barrier's life: modelled only by the explicit search")?,
            OpKind::Elect => {
                // its value unused: only the warp-wide wait
                self.elect(sp, cx)?;
                None
            }
            // Named barriers: a barrier of its own per id, counted per lane (a warp arrives as
            // warp_size threads, and every lane of a warp of one role runs it).
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                let g = self.named_barrier(sp, id, count, cx)?;
                let a = self.push(cx, sp, g.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
                if matches!(op.kind, OpKind::BarSync { .. }) {
                    self.push(cx, sp, g, int(0), SiteKind::WaitToken { arrive: a });
                }
                None
            }
            OpKind::Commit { .. } => {
                return unsupported(
                    sp,
                    "commit makes one arrival per converged group of lanes; convergence is modelled only by the explicit search",
                )?
            }
            // Remote arrives, expects and accesses count on the target CTA's objects; a multicast
            // copy lands its bytes on the barrier of every CTA of the mask.
            OpKind::Remote { target, op: inner } => {
                let targets = match target {
                    ast::ClusterTarget::Cta(e) => vec![self.target_cta(e, cx)?],
                    ast::ClusterTarget::Multicast(e) => {
                        let m = self.expr(e, cx)?.as_int();
                        match m {
                            Some(m) if m > 0 && m < (1 << self.ctas) => (0..self.ctas).filter(|c| (m >> c) & 1 == 1).collect(),
                            _ => return unsupported(e.span, "a multicast mask that is not a constant naming CTAs of the cluster")?,
                        }
                    }
                };
                let mut last = None;
                for t in targets {
                    cx.target = Some(t);
                    let r = self.op(inner, cx);
                    cx.target = None;
                    last = r?;
                }
                last
            }
            // The cluster barrier: an arrival (and a wait on it) on one barrier of every thread
            // of the cluster.
            OpKind::ClusterArrive | OpKind::ClusterWait | OpKind::ClusterSync => {
                self.cluster_barrier.set(true);
                if !matches!(op.kind, OpKind::ClusterWait) {
                    let a = self.push(cx, sp, CLUSTER_BARRIER.into(), int(0), SiteKind::Arrive { n: int(1), drop: false });
                    cx.cluster_arrive = Some(a);
                }
                if !matches!(op.kind, OpKind::ClusterArrive) {
                    match cx.cluster_arrive.take() {
                        Some(a) if cx.sites[a].seg == cx.seg => {
                            self.push(cx, sp, CLUSTER_BARRIER.into(), int(0), SiteKind::WaitToken { arrive: a });
                        }
                        _ => {
                            return unsupported(
                                sp,
                                "a cluster_wait without a cluster_arrive before it in the same loop iteration: prove pairs each wait with its arrive",
                            )?
                        }
                    }
                }
                None
            }
            // Anything the summary was not taught is a statement it does not understand: the proof
            // is `unknown` there, never a guess.
            #[allow(unreachable_patterns)]
            other => return unsupported(sp, &format!("`{}` is modelled only by the explicit search", other.keyword()))?,
        })
    }

    fn cond(&self, e: &ast::Expr, cx: &mut Ctx) -> R<B> {
        Ok(match &e.kind {
            ExprKind::Binary(op, a, b) => match op {
                BinOp::And => B::and(vec![self.cond(a, cx)?, self.cond(b, cx)?]),
                BinOp::Or => B::or(vec![self.cond(a, cx)?, self.cond(b, cx)?]),
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    let c = match op {
                        BinOp::Eq => Cmp::Eq,
                        BinOp::Ne => Cmp::Ne,
                        BinOp::Lt => Cmp::Lt,
                        BinOp::Le => Cmp::Le,
                        BinOp::Gt => Cmp::Gt,
                        _ => Cmp::Ge,
                    };
                    self.expr(a, cx)?.cmp(c, self.expr(b, cx)?)
                }
                _ => self.expr(e, cx)?.cmp(Cmp::Ne, int(0)),
            },
            ExprKind::Unary(UnOp::Not, a) => self.cond(a, cx)?.not(),
            _ => self.expr(e, cx)?.cmp(Cmp::Ne, int(0)),
        })
    }

    fn expr(&self, e: &ast::Expr, cx: &mut Ctx) -> R<T> {
        Ok(match &e.kind {
            ExprKind::Int(v) => int(*v),
            ExprKind::Name(n) => {
                if let Some(l) = self.lookup(n, cx) {
                    match l {
                        Local::Term(t) => t,
                        Local::Token(_) => return unsupported(e.span, "a token used as a number")?,
                        Local::Elect => {
                            return unsupported(
                                e.span,
                                "an elect() result used other than as the condition of an `if`: prove counts the elected block, not the values",
                            )?
                        }
                    }
                } else if let Some(t) = self.params.get(n) {
                    t.clone()
                } else if self.vars.contains(n) {
                    return unsupported(e.span, format!("`{n}` is a shared variable; its value depends on the interleaving"))?;
                } else if n == "cta" {
                    int(cx.cta)
                } else {
                    let (tid, gtid, ws) = match cx.me {
                        Some(m) => m,
                        None => return unsupported(e.span, format!("`{n}` is not a parameter or a local known to prove"))?,
                    };
                    match n.as_str() {
                        "tid" => int(tid),
                        "gtid" => int(gtid),
                        "lane" => int(gtid % ws),
                        "warp" => int(gtid / ws),
                        _ => return unsupported(e.span, format!("`{n}` is not a parameter or a local known to prove"))?,
                    }
                }
            }
            ExprKind::RoleCount(r) => match self.roles.get(r) {
                Some(t) => t.clone(),
                None => return unsupported(e.span, format!("`{r}.count` is not known here"))?,
            },
            ExprKind::Unary(UnOp::Neg, a) => self.expr(a, cx)?.neg(),
            ExprKind::Unary(UnOp::Not, _) => T::ite(self.cond(e, cx)?, int(1), int(0)),
            ExprKind::Binary(op, a, b) => {
                let x = self.expr(a, cx)?;
                match op {
                    BinOp::Add => x.add(self.expr(b, cx)?),
                    BinOp::Sub => x.sub(self.expr(b, cx)?),
                    BinOp::Mul => x.mul(self.expr(b, cx)?),
                    BinOp::Div | BinOp::Rem => {
                        let y = self.expr(b, cx)?;
                        let m = match y.as_int() {
                            Some(m) => m,
                            None => return Err(need_concrete_of(&y, b.span)),
                        };
                        if m <= 0 {
                            return unsupported(b.span, format!("division by {m}: prove handles division by a positive constant"))?;
                        }
                        if let Some(v) = x.as_int() {
                            return Ok(int(if *op == BinOp::Div { v / m } else { v % m }));
                        }
                        if m == 1 {
                            return Ok(if *op == BinOp::Div { x } else { int(0) });
                        }
                        if *op == BinOp::Div {
                            T::Div(Box::new(x), m)
                        } else {
                            T::Mod(Box::new(x), m)
                        }
                    }
                    _ => T::ite(self.cond(e, cx)?, int(1), int(0)),
                }
            }
        })
    }
}

/// The barrier that stands for the cluster barrier (`cluster_arrive`/`cluster_wait`).
pub const CLUSTER_BARRIER: &str = "cluster barrier";

/// How a CTA's copy of an object is named (nothing without a cluster).
fn cta_suffix(ctas: i64, cta: i64) -> String {
    if ctas == 1 {
        String::new()
    } else {
        format!("@cta{cta}")
    }
}

/// The prefix of the barrier that stands for named barrier N (`bar 1`): not a name a
/// declaration can have.
pub const NAMED_PREFIX: &str = "bar ";

/// Named barriers in a role whose threads read their identity: counted per lane only when every
/// warp of the role is whole and its lanes run the same named-barrier statements with the same
/// ids, conditions and loops (`bar.sync` is `.aligned`; anything else is undefined behaviour the
/// explicit search reports).
fn aligned_named_barriers(r: &ast::RoleDecl, classes: &[Class], first: i64, ws: i64) -> R<()> {
    let named = |c: &Class| -> Vec<(Span, String, B, usize)> {
        c.sites
            .iter()
            .filter(|x| x.group.starts_with(NAMED_PREFIX))
            .map(|x| (x.span, x.group.clone(), x.guard.clone(), x.seg))
            .collect()
    };
    let Some(c0) = classes.iter().find(|c| !named(c).is_empty()) else { return Ok(()) };
    let span = named(c0)[0].0;
    if r.unit == ast::RoleUnit::Threads || first % ws != 0 {
        return unsupported(
            span,
            "a named barrier in a role sized in threads: its warps may hold other roles' lanes, and a warp arrives as warp_size threads; prove counts named barriers in roles of whole warps",
        )?;
    }
    for w in classes.chunks(ws as usize) {
        let seq = named(&w[0]);
        if w.iter().any(|c| named(c) != seq || c.segs.len() != w[0].segs.len()) {
            return unsupported(
                span,
                "the lanes of a warp run different named-barrier statements (or under different conditions): undefined behaviour, which only the explicit search reports",
            )?;
        }
    }
    Ok(())
}

/// The error for a term that had to be a number: name the first ranged symbol in it, so that the
/// caller enumerates that parameter.
fn need_concrete_of(t: &T, span: Span) -> BuildError {
    fn first(t: &T) -> Option<String> {
        match t {
            T::Var(n) => Some(n.clone()),
            T::Int(_) => None,
            T::Add(v) => v.iter().find_map(first),
            T::Mul(a, b) => first(a).or_else(|| first(b)),
            T::Div(a, _) | T::Mod(a, _) | T::FDiv(a, _) | T::FMod(a, _) => first(a),
            T::Ite(_, a, b) => first(a).or_else(|| first(b)),
        }
    }
    match first(t) {
        Some(n) => BuildError::NeedConcrete(n.trim_end_matches(".count").to_string(), span),
        None => BuildError::Unsupported(Unsupported {
            span,
            why: "this value must be a constant".into(),
        }),
    }
}

/// Rebind a local in the scope that holds it.
fn set_local(cx: &mut Ctx, name: &str, v: Local) {
    if let Some(scope) = cx.locals.iter_mut().rev().find(|m| m.contains_key(name)) {
        scope.insert(name.to_string(), v);
    }
}

/// The symbols a condition names.
fn cond_vars(c: &B) -> Vec<String> {
    term_vars(&T::ite(c.clone(), int(1), int(0)))
}

/// The symbols a term names.
fn term_vars(t: &T) -> Vec<String> {
    fn walk(t: &T, out: &mut Vec<String>) {
        match t {
            T::Var(n) => out.push(n.clone()),
            T::Int(_) => {}
            T::Add(v) => v.iter().for_each(|x| walk(x, out)),
            T::Mul(a, b) => {
                walk(a, out);
                walk(b, out)
            }
            T::Div(a, _) | T::Mod(a, _) | T::FDiv(a, _) | T::FMod(a, _) => walk(a, out),
            T::Ite(c, a, b) => {
                cond(c, out);
                walk(a, out);
                walk(b, out)
            }
        }
    }
    fn cond(c: &B, out: &mut Vec<String>) {
        match c {
            B::Const(_) => {}
            B::Cmp(_, a, b) => {
                walk(a, out);
                walk(b, out)
            }
            B::And(v) | B::Or(v) => v.iter().for_each(|x| cond(x, out)),
            B::Not(x) => cond(x, out),
        }
    }
    let mut out = Vec::new();
    walk(t, &mut out);
    out
}
