//! From the syntax tree to what the counting laws need: for each class of threads (a role whose
//! threads all run the same code, or one thread of a role whose code reads its identity), the
//! barrier operations it performs, each with the guard under which it runs, the loop it sits in
//! and the barrier element it names, all as symbolic terms of the parameters and loop variables.
//!
//! Anything whose count cannot be written exactly in that form is refused with the statement's
//! span and the reason, so that `prove` answers `unknown` rather than prove something else.

use crate::sym::{int, var, Cmp, B, T};
use phasecheck_model::lang::ast::{self, BinOp, ExprKind, OpKind, Span, StmtKind, UnOp};
use shared::Shared;
use std::collections::{BTreeMap, HashMap};
use walk::{block_assigns, block_calls, block_has_barrier_ops, block_returns, block_returns_always, block_syncs_cta, uses_identity};
use warp::aligned_named_barriers;

mod flow;
mod ops;
mod shared;
mod terms;
mod walk;
mod warp;

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
    /// What each shared var holds (`shared.rs`).
    shared: HashMap<String, Shared>,
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
    /// Whether the lanes of the class's warps (of its role) took the same branches since the
    /// last `syncwarp` or `elect()`: then a `commit` is one instruction of the whole group.
    converged: bool,
    /// Whether the role's code holds an `elect()` (then any `if` may split its warps' lanes).
    elects: bool,
    /// For a per-thread class: the first thread (gtid) of its role and the role's size.
    role_threads: Option<(i64, i64)>,
    /// Commit sites of a per-thread class whose group has other lanes.
    group_commits: Vec<usize>,
    /// The values this thread wrote to shared vars it publishes, and whether it passed a first
    /// `syncthreads` that every path reaches (then it reads the published values).
    var_now: HashMap<String, T>,
    published: bool,
    /// Inside a loop that is run iteration by iteration (unrolled, or a `while` of constant
    /// tests): the guard depth and lanes at its body, where a `break` is known to be taken;
    /// and whether one was taken (the rest of the iteration and the loop are skipped).
    break_at: Option<(usize, Share)>,
    broke: bool,
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
            shared: HashMap::new(),
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
        if ctas > 1 {
            if let Some(r) = program.roles().find(|r| r.uniform) {
                return unsupported(
                    r.name.span,
                    format!(
                        "uniform role `{}` under cluster scope: the counting laws do not yet follow a uniform agent per CTA",
                        r.name.name
                    ),
                )?;
            }
        }
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
        b.shared = b.classify_vars(program)?;
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
        let fn_commits = program.functions().any(|f| walk::block_commits(&f.body));
        if program
            .roles()
            .any(|r| block_syncs_cta(&r.body) || (fn_syncs && block_calls(&r.body)))
        {
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
                // A role in threads that commits: its lanes' warps decide how many arrivals a
                // commit makes, so each thread is its own class (as when it reads its identity).
                let commits = r.unit == ast::RoleUnit::Threads && (walk::block_commits(&r.body) || (fn_commits && block_calls(&r.body)));
                if uses_identity(&r.body) || (fn_identity && block_calls(&r.body)) || commits {
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
                        let (segs, sites) = b.role_body(r, Some((tid, first + tid, warp_size)), Some((first, n)), None, cta)?;
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
                    let (segs, sites) = b.role_body(r, None, None, whole, cta)?;
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
                let inits: Vec<(T, Span)> = b
                    .inits
                    .borrow()
                    .iter()
                    .filter(|x| x.0 == name)
                    .map(|x| (x.1.clone(), x.2))
                    .collect();
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
            let copies = classes
                .iter()
                .flat_map(|c| &c.sites)
                .any(|x| matches!(x.kind, SiteKind::Land { .. }) && b.manual.contains(x.group.split("@cta").next().unwrap_or(&x.group)));
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
            converged: false,
            elects: false,
            role_threads: None,
            group_commits: vec![],
            var_now: HashMap::new(),
            published: false,
            break_at: None,
            broke: false,
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

    fn role_body(
        &self,
        r: &ast::RoleDecl,
        me: Option<(i64, i64, i64)>,
        role_threads: Option<(i64, i64)>,
        whole_warps: Option<i64>,
        cta: i64,
    ) -> R<(Vec<Option<Loop>>, Vec<Site>)> {
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
            // each role starts converged (docs/semantics.md, "Warps")
            converged: true,
            elects: walk::block_elects(&r.body) || (!self.fns.is_empty() && block_calls(&r.body)),
            role_threads,
            group_commits: vec![],
            var_now: HashMap::new(),
            published: false,
            break_at: None,
            broke: false,
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
        for w in cx
            .sites
            .iter()
            .filter(|x| matches!(x.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. }))
        {
            if let Some(x) = cx.sites.iter().find(|x| {
                x.group == w.group && x.share != w.share && matches!(x.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. })
            }) {
                return unsupported(
                    x.span,
                    format!(
                        "waits on `{}` from an elected block and from other lanes: the lanes then count their waits differently",
                        w.group
                    ),
                )?;
            }
        }
        // The lane that issues a group's commit learns the phase it arrived on; the others do
        // not (docs/model.md: a thread knows the phases it arrived on or waited for). Which lane
        // issues it is the interleaving's, so a parity wait of the group on the barrier it
        // commits on names the same phase for every lane only while the commit cannot move the
        // lanes' knowledge: one commit event on that barrier.
        for &c in &cx.group_commits {
            let g = &cx.sites[c].group;
            let waits = cx
                .sites
                .iter()
                .any(|x| &x.group == g && matches!(x.kind, SiteKind::WaitParity { .. }));
            let commits = cx.group_commits.iter().filter(|&&d| &cx.sites[d].group == g).count();
            if waits && (commits > 1 || cx.segs[cx.sites[c].seg].is_some()) {
                return unsupported(
                    cx.sites[c].span,
                    format!("lanes that commit on `{g}` more than once and wait on it by parity: which lane's commit arrives decides what each lane knows of the phases, modelled only by the explicit search"),
                )?;
            }
        }
        self.fold_arrive_ons(&mut cx)?;
        Ok((cx.segs, cx.sites))
    }

    /// Flatten a block. Returns whether control cannot continue after it (it returned on every path).
    fn block(&self, blk: &ast::Block, cx: &mut Ctx) -> R<()> {
        cx.locals.push(HashMap::new());
        for s in &blk.stmts {
            if cx.dead || cx.broke {
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

    /// A statement, with what it does to the warp's convergence: a branch or loop may split the
    /// lanes (in a per-thread class always: lanes differ; in a class of whole warps of one code
    /// only through `elect()` results or a spin, whose trip count differs per lane), and they
    /// stay split until the next `syncwarp` or `elect()`.
    fn stmt(&self, s: &ast::Stmt, cx: &mut Ctx) -> R<()> {
        if !matches!(s.kind, StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. }) {
            return self.stmt_inner(s, cx);
        }
        let pre = cx.converged;
        let keep = cx.me.is_none() && !walk::stmt_diverges(s, cx.elects);
        cx.converged = pre && keep;
        let r = self.stmt_inner(s, cx);
        cx.converged = cx.converged && pre && keep;
        r
    }

    fn stmt_inner(&self, s: &ast::Stmt, cx: &mut Ctx) -> R<()> {
        match &s.kind {
            StmtKind::Let { name, value } => {
                if let ast::Value::Op(op) = value {
                    if matches!(op.kind, OpKind::Elect) {
                        self.elect(op.span, cx)?;
                        // a warp-wide execution barrier: the lanes reconverge
                        cx.converged = true;
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
                if self.vars.contains(&name.name) && self.lookup(&name.name, cx).is_none() {
                    return self.shared_write(&name.name, value, s.span, cx);
                }
                let scope = cx.locals.iter().rposition(|m| m.contains_key(&name.name));
                if cx.share != Share::All && scope.is_some_and(|ix| ix < cx.share_scope) {
                    return unsupported(
                        s.span,
                        format!(
                            "`{}` is assigned inside an elected block: its lanes then hold different values",
                            name.name
                        ),
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
                            let outer = cx.break_at.replace((cx.guard.len(), cx.share));
                            for i in l..h {
                                cx.locals.push(HashMap::from([(v.name.clone(), Local::Term(int(i)))]));
                                cx.loop_vars.push(v.name.clone());
                                let run = self.block(body, cx);
                                cx.loop_vars.pop();
                                cx.locals.pop();
                                run?;
                                if cx.dead || std::mem::take(&mut cx.broke) {
                                    break;
                                }
                            }
                            cx.break_at = outer;
                            return Ok(());
                        }
                        // bounds of ranged parameters: the caller gives them each value in turn
                        (l2, h2) if l2.is_none() || h2.is_none() => {
                            let bound = if l2.is_none() { l.clone() } else { h.clone() };
                            match term_vars(&bound).into_iter().find(|v| !v.contains('@') && !v.contains('#')) {
                                Some(v) => return Err(need_concrete_of(&var(&v), s.span)),
                                None => {
                                    return unsupported(
                                        s.span,
                                        format!("a loop to unroll needs constant bounds and at most {UNROLL} iterations"),
                                    )?
                                }
                            }
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
                let outer = cx.break_at.take();
                self.block(body, cx)?;
                cx.break_at = outer;
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
                // a `break` under a ranged parameter: the caller gives it each value in turn
                if cx.break_at.is_some() && (walk::block_breaks(then) || els.as_ref().is_some_and(walk::block_breaks)) {
                    if let Some(v) = cond_vars(&c).into_iter().find(|v| !v.contains('@') && !v.contains('#')) {
                        return Err(need_concrete_of(&var(&v), cond.span));
                    }
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
                        if let Some(sp) = cx
                            .early_use
                            .or(self.inits.borrow().last().map(|x| x.2))
                            .filter(|_| !self.manual.is_empty())
                        {
                            return unsupported(sp, "a `manual_init` barrier whose thread's first `syncthreads` is conditional or in a loop: init order is modelled only by the explicit search")?;
                        }
                    }
                    if let Some(sp) = cx.unfenced.take() {
                        self.unfenced_init.set(Some(sp));
                    }
                    cx.synced = true;
                    cx.published = cx.guard.is_empty() && cx.in_loop.is_none() && cx.share == Share::All;
                }
                let g = format!("{SYNCTHREADS}{}", cta_suffix(self.ctas, cx.cta));
                let a = self.push(cx, s.span, g.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
                self.push(cx, s.span, g, int(0), SiteKind::WaitToken { arrive: a });
            }
            // It adds no arrival and no byte, only blocking. In a class of whole warps every lane
            // runs the same code, so the lanes it waits for reach it unless one of them blocks
            // earlier, on a wait whose arrivals the laws account for: it adds no cycle the
            // wait-order law does not see. Elsewhere left out, and no proof stands on it.
            StmtKind::SyncWarp if cx.whole_warps.is_some() && cx.share == Share::All => cx.converged = true,
            // A thread of its own class: an arrival and a wait on a barrier of its warp's lanes,
            // so that the arrivals law counts who reaches it and the wait-order law sees cycles
            // through it (as for `syncthreads`).
            StmtKind::SyncWarp if cx.me.is_some() && cx.share == Share::All && self.warp_sync(s.span, None, cx)? => cx.converged = true,
            StmtKind::SyncWarp => {
                self.refute_only.borrow_mut().get_or_insert(Unsupported {
                    span: s.span,
                    why: "syncwarp waits for the unfinished lanes of the warp; warps are modelled only by the explicit search, so the laws can be refuted here but not proved".into(),
                });
            }
            StmtKind::While { cond, body } => self.while_loop(s.span, cond, body, cx)?,
            // In a loop run iteration by iteration, a `break` every path of the iteration
            // reaches here ends the loop.
            StmtKind::Break if cx.break_at == Some((cx.guard.len(), cx.share)) => cx.broke = true,
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
                    (Some(f), Some(k)) if cx.share == Share::All && k & f == f => cx.converged = true,
                    // lanes of the role outside the mask keep their branch path: the group is split
                    (None, Some(k)) if cx.me.is_some() && cx.share == Share::All && self.warp_sync(s.span, Some(k), cx)? => {
                        cx.converged = self.role_lanes(cx).iter().all(|l| *l < 63 && (k >> l) & 1 == 1)
                    }
                    _ => return unsupported(
                        s.span,
                        "syncwarp(mask) with a mask other than every lane of a warp of one role is modelled only by the explicit search",
                    )?,
                }
            }
            StmtKind::Call { name, args } => self.call(s.span, name, args, cx)?,
        }
        Ok(())
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
