//! Lowering a checked syntax tree to the executable `ir::Protocol` for given parameter values.
//!
//! Errors here are bad input that only shows once parameters have values (an array of length 0, an
//! unknown `--param`), reported like parse errors.

pub use super::code::MAX_TABLE;
use super::code::{buffer_bytes_of, index16, CodeBuilder, Cta, Env};
use super::eval::{self, Logic, Node};
use super::ir::*;
use crate::lang::ast::{self, ExprKind, OpKind};
use crate::lang::Diagnostic;
use std::collections::HashMap;

/// Lower `program` with `overrides` (`--param NAME=VALUE`) applied over the declared defaults.
pub fn lower(program: &ast::Program, overrides: &[(String, i64)]) -> Result<Protocol, Diagnostic> {
    let mut params: Vec<(String, i64)> = Vec::new();
    let mut consts: HashMap<String, i64> = HashMap::new();
    for (name, _) in overrides {
        if !program.params().any(|p| &p.name.name == name) {
            let known: Vec<_> = program.params().map(|p| p.name.name.clone()).collect();
            return Err(Diagnostic::new(
                "E100",
                program.name.span,
                format!(
                    "`--param {name}` names no parameter of protocol `{}`; its parameters are: {}",
                    program.name.name,
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            ));
        }
    }
    // Role sizes may be written in terms of params, and params in terms of `ROLE.count`; roles
    // are evaluated lazily through `const_eval`'s role table after params.
    for p in program.params() {
        let v = match overrides.iter().rev().find(|(n, _)| n == &p.name.name) {
            Some((_, v)) => *v,
            None => const_eval(&p.value, &consts, &HashMap::new())?,
        };
        consts.insert(p.name.name.clone(), v);
        params.push((p.name.name.clone(), v));
    }
    // The warp size comes first: a role laid out by whole warps counts its threads with it.
    let warp_size = match program.warp_size() {
        Some(e) => {
            let w = const_eval(e, &consts, &HashMap::new())?;
            if !(1..=32).contains(&w) {
                return Err(Diagnostic::new(
                    "E102",
                    e.span,
                    format!("warp_size is {w}; it must be between 1 and 32"),
                ));
            }
            w as u32
        }
        None => 32,
    };
    // Cluster scope: the CTAs of one cluster (PTX: at most 8 is portable; sm_90 allows 16 with
    // an opt-in, which the model does not need to explore a protocol).
    let cluster = match program.cluster() {
        Some(e) => {
            let n = const_eval(e, &consts, &HashMap::new())?;
            if !(1..=8).contains(&n) {
                return Err(Diagnostic::new(
                    "E114",
                    e.span,
                    format!("cluster is {n}; a cluster has 1 to 8 CTAs (the portable cluster size of sm_90)"),
                ));
            }
            n as u32
        }
        None => 1,
    };
    let mut role_counts: HashMap<String, i64> = HashMap::new();
    for r in program.roles() {
        let n = const_eval(&r.count, &consts, &role_counts)?;
        let per = match r.unit {
            ast::RoleUnit::Threads => 1,
            ast::RoleUnit::Warps => warp_size as i64,
            ast::RoleUnit::Warpgroups => 4 * warp_size as i64,
        };
        let threads = n.checked_mul(per).unwrap_or(i64::MAX);
        if !(1..=4096).contains(&threads) || n < 1 {
            return Err(Diagnostic::new(
                "E101",
                r.count.span,
                format!("role `{}` has {threads} threads; a role needs 1 to 4096 threads", r.name.name),
            ));
        }
        role_counts.insert(r.name.name.clone(), threads);
    }

    let mut completion_index: HashMap<&str, u16> = HashMap::new();
    for (i, c) in program.completions().enumerate() {
        completion_index.insert(c.name.name.as_str(), index16(i, "completion functions", c.name.span)?);
    }

    let mut barriers = Vec::new();
    let mut barrier_groups = Vec::new();
    for b in program.barriers() {
        let len = array_len(b.len.as_ref(), &consts, &role_counts)?;
        let count = const_eval(&b.count, &consts, &role_counts)?;
        let completion = match &b.completion {
            Some(c) => Some(*completion_index.get(c.name.as_str()).ok_or_else(|| {
                Diagnostic::new(
                    "E103",
                    c.span,
                    format!(
                        "barrier `{}` names completion `{}`, which is not declared; declare `completion {} {{ ... }}`",
                        b.name.name, c.name, c.name
                    ),
                )
            })?),
            None => None,
        };
        index16(barriers.len() + len as usize, "barriers", b.span)?;
        barrier_groups.push(Group {
            name: b.name.name.clone(),
            base: barriers.len() as u16,
            len: len as u16,
            is_array: b.len.is_some(),
        });
        for i in 0..len {
            barriers.push(BarrierInfo {
                name: element_name(&b.name.name, b.len.is_some(), i),
                count,
                completion,
                manual_init: b.manual_init,
                span: b.span,
            });
        }
    }
    let mut buffers = Vec::new();
    let mut buffer_groups = Vec::new();
    for b in program.buffers() {
        let len = array_len(b.len.as_ref(), &consts, &role_counts)?;
        let bytes = const_eval(&b.bytes, &consts, &role_counts)?;
        index16(buffers.len() + len as usize, "buffers", b.span)?;
        buffer_groups.push(Group {
            name: b.name.name.clone(),
            base: buffers.len() as u16,
            len: len as u16,
            is_array: b.len.is_some(),
        });
        for i in 0..len {
            buffers.push(BufferInfo {
                name: element_name(&b.name.name, b.len.is_some(), i),
                bytes,
                tensormap: b.tensormap,
                counter: b.counter,
            });
        }
    }
    let mut vars = Vec::new();
    for v in program.vars() {
        index16(vars.len(), "shared vars", v.name.span)?;
        vars.push(VarInfo {
            name: v.name.name.clone(),
            init: const_eval(&v.init, &consts, &role_counts)?,
        });
    }

    let env = Env {
        cluster,
        consts: &consts,
        roles: &role_counts,
        barrier_groups: &barrier_groups,
        buffer_groups: &buffer_groups,
        vars: &vars,
        buffers: &buffers,
        fns: program.functions().map(|f| (f.name.name.clone(), f)).collect(),
    };

    // The layout of one CTA: each role's first thread in it. Every CTA of a cluster has the
    // same one; CTA c's threads start `stride` model threads after CTA c - 1's.
    let mut layout = Vec::new();
    let mut gtid = 0u32;
    for r in program.roles() {
        if r.unit != ast::RoleUnit::Threads {
            // Whole warps: the role starts at a warp boundary (the lanes skipped are not modelled).
            gtid = gtid.div_ceil(warp_size) * warp_size;
        }
        layout.push(gtid);
        gtid += role_counts[&r.name.name] as u32;
    }
    let stride = gtid.div_ceil(warp_size) * warp_size;
    let role_decls = program.roles().count();
    let mut completions = Vec::new();
    let mut roles = Vec::new();
    let mut threads = Vec::new();
    for cta in 0..cluster {
        let at = Cta {
            rank: cta,
            gtid_base: cta * stride,
            warp_base: cta * stride / warp_size,
        };
        for c in program.completions() {
            completions.push(CodeBuilder::build(&env, &cta_name(cluster, cta, &c.name.name), &c.body, false, at)?);
        }
        for (ri, r) in program.roles().enumerate() {
            let count = role_counts[&r.name.name] as u32;
            let mut code = CodeBuilder::build(&env, &cta_name(cluster, cta, &r.name.name), &r.body, true, at)?;
            // A uniform role under cluster scope is one agent per warp in each CTA: its remote
            // operations count per lane as their own-CTA forms do (rt/uniform_agent.rs), and the
            // cluster barrier waits for agents, each standing for its lanes in lockstep (E116 is
            // retired; the elected block may not hold the cluster barrier, E113).
            warpgroup_scope(r, &code, warp_size)?;
            if r.uniform {
                crate::program::uniform::analyse(&r.name.name, &mut code, warp_size)?;
            }
            roles.push(RoleInfo {
                name: cta_name(cluster, cta, &r.name.name),
                count,
                uniform: r.uniform,
                first_gtid: at.gtid_base + layout[ri],
                code,
            });
            // A uniform role's agents are its warps' first lanes; the others are what the agent's
            // multiplicity stands for (they still count in `gtid` and `ROLE.count`).
            let lanes = if r.uniform { warp_size } else { 1 };
            for tid in (0..count).step_by(lanes as usize) {
                let gtid = at.gtid_base + layout[ri] + tid;
                threads.push(ThreadInfo {
                    role: index16(cta as usize * role_decls + ri, "roles", r.name.span)?,
                    tid,
                    gtid,
                    lane: gtid % warp_size,
                    warp: gtid / warp_size,
                    cta: cta as u16,
                });
            }
        }
    }
    let (barriers, barrier_groups, buffers, buffer_groups, vars) = if cluster == 1 {
        (barriers, barrier_groups, buffers, buffer_groups, vars)
    } else {
        per_cta_tables(
            cluster,
            program,
            &barriers,
            &barrier_groups,
            &buffers,
            &buffer_groups,
            &vars,
            program.completions().count(),
        )?
    };
    if threads.len() > 512 {
        return Err(Diagnostic::new(
            "E104",
            program.name.span,
            format!(
                "the protocol has {} threads; the model handles at most 512 (lower the role sizes)",
                threads.len()
            ),
        ));
    }

    let (expect, expect_given) = match &program.expect {
        None => (None, false),
        Some(ast::Expect::Holds(_)) => (None, true),
        Some(ast::Expect::Kinds(ks)) => (Some(ks.iter().map(|(k, _)| *k).collect()), true),
    };
    let protocol = Protocol {
        name: program.name.name.clone(),
        params,
        expect,
        expect_given,
        warp_size,
        cluster,
        barriers,
        barrier_groups,
        buffers,
        buffer_groups,
        vars,
        completions,
        roles,
        threads,
    };
    crate::program::blackwell::check(&protocol)?;
    Ok(protocol)
}

/// A role's or completion's name in the lowered program: `cta1.producer` in a cluster, the
/// declared name otherwise.
fn cta_name(cluster: u32, cta: u32, name: &str) -> String {
    if cluster == 1 {
        name.to_string()
    } else {
        format!("cta{cta}.{name}")
    }
}

/// Cluster scope: CTA 0's tables repeated once per CTA (CTA-major), each copy's names prefixed
/// with its CTA (`cta1.full[0]`) and its barriers' completions pointing at its own CTA's copy of
/// the completion function.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn per_cta_tables(
    cluster: u32,
    program: &ast::Program,
    barriers: &[BarrierInfo],
    barrier_groups: &[Group],
    buffers: &[BufferInfo],
    buffer_groups: &[Group],
    vars: &[VarInfo],
    completions: usize,
) -> Result<(Vec<BarrierInfo>, Vec<Group>, Vec<BufferInfo>, Vec<Group>, Vec<VarInfo>), Diagnostic> {
    let n = cluster as usize;
    let span = program.name.span;
    index16(barriers.len() * n, "barriers", span)?;
    index16(buffers.len() * n, "buffers", span)?;
    index16(vars.len() * n, "shared vars", span)?;
    index16(completions * n, "completion functions", span)?;
    let groups = |gs: &[Group], per: usize| -> Vec<Group> {
        (0..n)
            .flat_map(|c| {
                gs.iter().map(move |g| Group {
                    name: format!("cta{c}.{}", g.name),
                    base: (c * per) as u16 + g.base,
                    len: g.len,
                    is_array: g.is_array,
                })
            })
            .collect()
    };
    let bars = (0..n)
        .flat_map(|c| {
            barriers.iter().map(move |b| BarrierInfo {
                name: format!("cta{c}.{}", b.name),
                completion: b.completion.map(|k| (c * completions) as u16 + k),
                ..b.clone()
            })
        })
        .collect();
    let bufs = (0..n)
        .flat_map(|c| {
            buffers.iter().map(move |b| BufferInfo {
                name: format!("cta{c}.{}", b.name),
                bytes: b.bytes,
                tensormap: b.tensormap,
                counter: b.counter,
            })
        })
        .collect();
    let vs = (0..n)
        .flat_map(|c| {
            vars.iter().map(move |v| VarInfo {
                name: format!("cta{c}.{}", v.name),
                init: v.init,
            })
        })
        .collect();
    Ok((
        bars,
        groups(barrier_groups, barriers.len()),
        bufs,
        groups(buffer_groups, buffers.len()),
        vs,
    ))
}

fn element_name(name: &str, is_array: bool, i: i64) -> String {
    if is_array {
        format!("{name}[{i}]")
    } else {
        name.to_string()
    }
}

fn array_len(len: Option<&ast::Expr>, consts: &HashMap<String, i64>, roles: &HashMap<String, i64>) -> Result<i64, Diagnostic> {
    match len {
        None => Ok(1),
        Some(e) => {
            let n = const_eval(e, consts, roles)?;
            if !(1..=1024).contains(&n) {
                return Err(Diagnostic::new(
                    "E105",
                    e.span,
                    format!("array length is {n}; it must be between 1 and 1024"),
                ));
            }
            Ok(n)
        }
    }
}

/// Evaluate an expression made of literals, params and `ROLE.count`. Both operands of `&&` and
/// `||` are evaluated: a declaration's value must be defined whichever way the logic goes.
pub fn const_eval<'a>(e: &'a ast::Expr, consts: &HashMap<String, i64>, roles: &HashMap<String, i64>) -> Result<i64, Diagnostic> {
    let bad = |x: &ast::Expr, msg: String| Diagnostic::new("E106", x.span, msg);
    let node = &mut |x: &'a ast::Expr| match &x.kind {
        ExprKind::Int(v) => Ok(Node::Value(*v)),
        ExprKind::Name(n) => consts.get(n).copied().map(Node::Value).ok_or_else(|| {
            bad(
                x,
                format!("`{n}` is not a parameter declared above this point; a declaration needs a value known before any thread runs"),
            )
        }),
        ExprKind::RoleCount(r) => roles.get(r).copied().map(Node::Value).ok_or_else(|| {
            bad(
                x,
                format!("`{r}.count` is not known here; roles can be counted only after the role is declared (or in code)"),
            )
        }),
        ExprKind::Unary(op, a) => Ok(Node::Unary(*op, &**a)),
        ExprKind::Binary(op, a, b) => Ok(Node::Binary(*op, &**a, &**b)),
    };
    eval::eval(e, Logic::Strict, node, &|x, m| bad(x, format!("{m} in a constant expression")))
}

/// The operations of the language, lowered to the IR's per-object operations: the one place a new
/// statement's syntax meets its executable form (the form's rules live in its `rt/<object>.rs`).
impl CodeBuilder<'_> {
    pub(super) fn op(&mut self, op: &ast::Op, result: Option<u16>, span: ast::Span) -> Result<(), Diagnostic> {
        if let OpKind::Elect = op.kind {
            let slot = match result {
                Some(r) => r,
                None => self.new_local("$elected", span)?,
            };
            self.emit(InstrKind::Elect { slot }, span);
            return Ok(());
        }
        if self.cluster_op(op, span)? {
            return Ok(());
        }
        if let OpKind::CopyAsyncTensor { map, expect, op: inner } = &op.kind {
            // The copy is lowered as without a descriptor (one instruction: a whole or partial
            // copy of the own CTA), then given the descriptor it reads.
            let map = self.buf(map)?;
            let expect = expect.as_ref().map(|e| self.expr(e)).transpose()?;
            let at = self.instrs.len();
            self.op(inner, None, span)?;
            let Some(InstrKind::Op { op: IOp::Copy(own), .. }) = self.instrs.get_mut(at).map(|i| &mut i.kind) else {
                unreachable!("a tensor copy lowers to one copy");
            };
            let own = std::mem::replace(own, CopyOp::CpAsyncCommitGroup);
            self.instrs[at].kind = InstrKind::Op {
                op: IOp::Copy(CopyOp::Tensor {
                    map,
                    expect,
                    copy: Box::new(own),
                }),
                result: None,
            };
            return Ok(());
        }
        self.token_origins(op, result, span)?;
        let one = IExpr::Const(1);
        let iop = match &op.kind {
            OpKind::Arrive { bar, n } => IOp::Mbar(MbarOp::Arrive {
                bar: self.bar(bar)?,
                n: match n {
                    Some(n) => self.expr(n)?,
                    None => one,
                },
                drop: false,
                expect_tx: None,
            }),
            OpKind::ArriveExpectTx { bar, bytes } => IOp::Mbar(MbarOp::Arrive {
                bar: self.bar(bar)?,
                n: one,
                drop: false,
                expect_tx: Some(self.expr(bytes)?),
            }),
            OpKind::ArriveAndDrop { bar } => IOp::Mbar(MbarOp::Arrive {
                bar: self.bar(bar)?,
                n: one,
                drop: true,
                expect_tx: None,
            }),
            OpKind::Wait { bar, token } => IOp::Mbar(MbarOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Token(self.expr(token)?),
                try_: false,
            }),
            OpKind::WaitParity { bar, parity } => IOp::Mbar(MbarOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Parity(self.expr(parity)?),
                try_: false,
            }),
            OpKind::TryWait { bar, token } => IOp::Mbar(MbarOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Token(self.expr(token)?),
                try_: true,
            }),
            OpKind::TryWaitParity { bar, parity } => IOp::Mbar(MbarOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Parity(self.expr(parity)?),
                try_: true,
            }),
            OpKind::ArriveAndWait { bar } => {
                // libcu++: `wait(arrive())`. Two steps: other threads may act in between.
                let r = self.bar(bar)?;
                let tok = self.new_local("$token", span)?;
                self.emit(
                    InstrKind::Op {
                        op: IOp::Mbar(MbarOp::Arrive {
                            bar: r.clone(),
                            n: one,
                            drop: false,
                            expect_tx: None,
                        }),
                        result: Some(tok),
                    },
                    span,
                );
                IOp::Mbar(MbarOp::Wait {
                    bar: r,
                    target: WaitTarget::Token(IExpr::Local(tok)),
                    try_: false,
                })
            }
            OpKind::ExpectTx { bar, bytes } => IOp::Mbar(MbarOp::ExpectTx {
                bar: self.bar(bar)?,
                bytes: self.expr(bytes)?,
            }),
            OpKind::CompleteTx { bar, bytes } => IOp::Mbar(MbarOp::CompleteTx {
                bar: self.bar(bar)?,
                bytes: self.expr(bytes)?,
            }),
            OpKind::CopyAsync { buf, bar, bytes, version } => IOp::Copy(CopyOp::Copy {
                buf: self.buf(buf)?,
                bar: self.bar(bar)?,
                bytes: bytes.as_ref().map(|e| self.expr(e)).transpose()?,
                version: version.as_ref().map(|e| self.expr(e)).transpose()?,
            }),
            OpKind::MemcpyAsync { buf, bar, bytes, version } => {
                // libcu++ issues the copy first, THEN raises the tx-count: the copy may land in
                // between and drive the tx-count negative for a moment.
                let b = self.buf(buf)?;
                let r = self.bar(bar)?;
                let bytes_expr = match bytes {
                    Some(e) => self.expr(e)?,
                    None => {
                        let g = self.buffer_group(&b);
                        // The size is the same for every element of a buffer array.
                        IExpr::Const(buffer_bytes_of(self.env, g))
                    }
                };
                let version = version.as_ref().map(|e| self.expr(e)).transpose()?;
                self.emit(
                    InstrKind::Op {
                        op: IOp::Copy(CopyOp::Copy {
                            buf: b,
                            bar: r.clone(),
                            bytes: Some(bytes_expr.clone()),
                            version,
                        }),
                        result: None,
                    },
                    span,
                );
                IOp::Mbar(MbarOp::ExpectTx { bar: r, bytes: bytes_expr })
            }
            OpKind::Read { buf, expect } => IOp::Mem(MemOp::Read {
                buf: self.buf(buf)?,
                expect: expect.as_ref().map(|e| self.expr(e)).transpose()?,
            }),
            OpKind::Write { buf, version } => IOp::Mem(MemOp::Write {
                buf: self.buf(buf)?,
                version: self.expr(version)?,
            }),
            OpKind::Init { bar, count } => IOp::Mbar(MbarOp::Init {
                bar: self.bar(bar)?,
                count: count.as_ref().map(|e| self.expr(e)).transpose()?,
            }),
            OpKind::Inval { bar } => IOp::Mbar(MbarOp::Inval { bar: self.bar(bar)? }),
            OpKind::Commit { bar } => IOp::Warp(WarpOp::Commit { bar: self.bar(bar)? }),
            OpKind::Elect => unreachable!("handled above"),
            // Named barriers.
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                let kind = InstrKind::NamedBar {
                    id: self.expr(id)?,
                    count: self.expr(count)?,
                    sync: matches!(op.kind, OpKind::BarSync { .. }),
                };
                self.emit(kind, span);
                return Ok(());
            }
            OpKind::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                let b = self.buf(buf)?;
                let (offset, bytes) = self.byte_range(&b, offset.as_ref(), bytes.as_ref())?;
                IOp::Copy(CopyOp::CpAsync {
                    buf: b,
                    offset,
                    bytes,
                    version: version.as_ref().map(|e| self.expr(e)).transpose()?,
                })
            }
            OpKind::CpAsyncArrive { bar, noinc } => IOp::Copy(CopyOp::CpAsyncArrive {
                bar: self.bar(bar)?,
                noinc: *noinc,
            }),
            OpKind::CpAsyncCommitGroup => IOp::Copy(CopyOp::CpAsyncCommitGroup),
            OpKind::CpAsyncWait { n } => IOp::Copy(CopyOp::CpAsyncWait {
                n: n.as_ref().map(|e| self.expr(e)).transpose()?,
            }),
            OpKind::CopyAsyncPart {
                buf,
                bar,
                offset,
                bytes,
                version,
                libcu,
            } => {
                let b = self.buf(buf)?;
                let r = self.bar(bar)?;
                let (offset, bytes) = self.byte_range(&b, Some(offset), bytes.as_ref())?;
                let copy = IOp::Copy(CopyOp::CopyPart {
                    buf: b,
                    bar: r.clone(),
                    offset,
                    bytes: bytes.clone(),
                    version: version.as_ref().map(|e| self.expr(e)).transpose()?,
                });
                if !*libcu {
                    copy
                } else {
                    // memcpy_async: the copy, then expect_tx(bytes), as for a whole buffer.
                    self.emit(InstrKind::Op { op: copy, result: None }, span);
                    IOp::Mbar(MbarOp::ExpectTx { bar: r, bytes })
                }
            }
            OpKind::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => IOp::Copy(CopyOp::StAsync {
                buf: self.buf(buf)?,
                bar: self.bar(bar)?,
                offset: self.expr(offset)?,
                bytes: self.expr(bytes)?,
                version: self.expr(version)?,
            }),
            OpKind::CopyAsyncFrom {
                buf,
                bar,
                src,
                offset,
                bytes,
            } => {
                let from = self.buf(src)?;
                // The copy reads the first `bytes` of the source: all of it by default.
                let bytes = match bytes {
                    Some(e) => self.expr(e)?,
                    None => IExpr::Const(buffer_bytes_of(self.env, self.buffer_group(&from))),
                };
                IOp::Copy(CopyOp::CopyFrom {
                    buf: self.buf(buf)?,
                    bar: self.bar(bar)?,
                    src: from,
                    offset: offset.as_ref().map(|e| self.expr(e)).transpose()?.unwrap_or(IExpr::Const(0)),
                    bytes,
                })
            }
            OpKind::WritePart {
                buf,
                version,
                offset,
                bytes,
            } => {
                let b = self.buf(buf)?;
                let (offset, bytes) = self.byte_range(&b, Some(offset), bytes.as_ref())?;
                IOp::Mem(MemOp::WritePart {
                    buf: b,
                    offset,
                    bytes,
                    version: self.expr(version)?,
                })
            }
            OpKind::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                let b = self.buf(buf)?;
                let (offset, bytes) = self.byte_range(&b, Some(offset), bytes.as_ref())?;
                IOp::Mem(MemOp::ReadPart {
                    buf: b,
                    offset,
                    bytes,
                    expect: expect.as_ref().map(|e| self.expr(e)).transpose()?,
                })
            }
            // The async proxy.
            OpKind::CopyStoreAsync { buf } => IOp::Proxy(ProxyOp::StoreAsync { buf: self.buf(buf)? }),
            OpKind::CopyStoreAsyncPart { buf, offset, bytes } => {
                let b = self.buf(buf)?;
                let (offset, bytes) = self.byte_range(&b, Some(offset), bytes.as_ref())?;
                IOp::Proxy(ProxyOp::StorePartAsync { buf: b, offset, bytes })
            }
            OpKind::CommitGroup => IOp::Proxy(ProxyOp::CommitGroup),
            OpKind::WaitGroup { n, read } => IOp::Proxy(ProxyOp::WaitGroup {
                n: self.expr(n)?,
                read: *read,
            }),
            OpKind::WgmmaAsync { bufs, expect, warpgroup } => IOp::Proxy(ProxyOp::Wgmma {
                bufs: bufs.iter().map(|b| self.buf(b)).collect::<Result<_, _>>()?,
                expect: expect.as_ref().map(|e| self.expr(e)).transpose()?,
                warpgroup: *warpgroup,
            }),
            OpKind::WgmmaWait { n, warpgroup } => IOp::Proxy(ProxyOp::WgmmaWait {
                n: self.expr(n)?,
                warpgroup: *warpgroup,
            }),
            OpKind::FenceProxyAsync => IOp::Proxy(ProxyOp::FenceProxyAsync),
            OpKind::FenceMbarrierInit => {
                if self.env.cluster > 1 && self.init_fence_slot.is_none() {
                    self.init_fence_slot = Some(self.new_local("$init_fence", span)?);
                }
                IOp::Proxy(ProxyOp::FenceMbarrierInit)
            }
            // A descriptor edit is a generic-proxy write of the descriptor's bytes.
            OpKind::TensormapWrite { map, version } => IOp::Mem(MemOp::Write {
                buf: self.buf(map)?,
                version: self.expr(version)?,
            }),
            OpKind::AtomicAdd { counter, value } => IOp::Mem(MemOp::AtomicAdd {
                buf: self.buf(counter)?,
                value: self.expr(value)?,
            }),
            OpKind::ReadCounter { counter, expect } => IOp::Mem(MemOp::ReadCounter {
                buf: self.buf(counter)?,
                expect: expect.as_ref().map(|e| self.expr(e)).transpose()?,
            }),
            OpKind::FenceProxyTensormap { map } => IOp::Proxy(ProxyOp::FenceProxyTensormap { map: self.buf(map)? }),
            OpKind::CopyAsyncTensor { .. } => unreachable!("lowered above"),
            OpKind::Tc(t) => IOp::Tc(self.tc_op(t, span)?),
            OpKind::Remote { .. } | OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {
                unreachable!("lowered by cluster_op")
            }
        };
        self.emit(InstrKind::Op { op: iop, result }, span);
        Ok(())
    }

    /// Cluster scope: lowers a remote or multicast operation, or a cluster barrier statement;
    /// false for every other operation.
    fn cluster_op(&mut self, op: &ast::Op, span: ast::Span) -> Result<bool, Diagnostic> {
        match &op.kind {
            OpKind::Remote { target, op: inner } => {
                let target_expr = self.expr(target.expr())?;
                // The operation is lowered as for the own CTA (one instruction: remote ops are
                // arrive, read and copy_async, none of which expands), then aimed at the target.
                let at = self.instrs.len();
                self.op(inner, None, span)?;
                let Some(InstrKind::Op { op: own, .. }) = self.instrs.get_mut(at).map(|i| &mut i.kind) else {
                    unreachable!("a remote operation lowers to one operation");
                };
                let own = std::mem::replace(own, IOp::Proxy(ProxyOp::FenceProxyAsync));
                self.instrs[at].kind = InstrKind::Op {
                    op: IOp::Remote {
                        target: target_expr,
                        multicast: matches!(target, ast::ClusterTarget::Multicast(_)),
                        op: Box::new(own),
                    },
                    result: None,
                };
                Ok(true)
            }
            OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {
                let slot = match self.cluster_slot {
                    Some(s) => s,
                    None => {
                        let s = self.new_local("$cluster", span)?;
                        self.cluster_slot = Some(s);
                        s
                    }
                };
                if !matches!(op.kind, OpKind::ClusterWait) {
                    let relaxed = matches!(op.kind, OpKind::ClusterArriveRelaxed);
                    self.emit(InstrKind::ClusterArrive { slot, relaxed }, span);
                }
                if !matches!(op.kind, OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed) {
                    self.emit(InstrKind::ClusterWait { slot }, span);
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// `warpgroup_mma`/`warpgroup_wait` count the groups of a warpgroup, so the role must be laid out
/// in warpgroups (`role NAME warpgroups N`), and its wgmma groups must all be the warpgroup's:
/// PTX has one group sequence, which `wgmma_async`/`wgmma_wait` (the agent's own) would split.
fn warpgroup_scope(r: &ast::RoleDecl, code: &Code, warp_size: u32) -> Result<(), Diagnostic> {
    let wgmma = |wg: bool| {
        code.instrs.iter().find(|i| {
            matches!(
                &i.kind,
                InstrKind::Op {
                    op: IOp::Proxy(ProxyOp::Wgmma { warpgroup, .. } | ProxyOp::WgmmaWait { warpgroup, .. }),
                    ..
                } if *warpgroup == wg
            )
        })
    };
    let Some(first) = wgmma(true) else { return Ok(()) };
    if r.unit != ast::RoleUnit::Warpgroups {
        return Err(Diagnostic::new(
            "E117",
            first.span,
            format!(
                "role `{}` issues a warpgroup-scoped wgmma, but it is not laid out in warpgroups; declare it `role {} warpgroups N` so that each four warps of it form one warpgroup",
                r.name.name, r.name.name
            ),
        ));
    }
    if !r.uniform && 4 * warp_size > 64 {
        return Err(Diagnostic::new(
            "E117",
            first.span,
            format!(
                "role `{}` issues a warpgroup-scoped wgmma with one agent per lane, {} per warpgroup; the model follows at most 64: declare the role `uniform`, or use `warp_size 16` or less",
                r.name.name,
                4 * warp_size
            ),
        ));
    }
    if let Some(other) = wgmma(false) {
        return Err(Diagnostic::new(
            "E117",
            other.span,
            format!(
                "role `{}` mixes wgmma_async/wgmma_wait (groups of the agent) with warpgroup_mma/warpgroup_wait (groups of the warpgroup); the hardware has one group sequence per warpgroup: use the warpgroup forms throughout",
                r.name.name
            ),
        ));
    }
    Ok(())
}
