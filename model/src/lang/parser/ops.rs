//! Operations (`arrive(bar)`, `copy_async(buf, bar, bytes = N)`, ...): their signatures, their
//! positional and named arguments, and barrier and buffer places (`full[i]`).

use super::*;

impl Parser {
    pub(super) fn op(&mut self) -> PResult<Op> {
        let start = self.span();
        let kw = match self.bump().tok {
            Tok::Ident(s) => s,
            _ => unreachable!("op() is called on an operation word"),
        };
        let sig = signature(&kw);
        self.bump(); // `(`
        let mut pos_args: Vec<Arg> = Vec::new();
        let mut named: Vec<(String, Expr, Span)> = Vec::new();
        // `from = SRC` names a buffer (a place, possibly indexed), not a value; so does
        // `tensormap = MAP`.
        let mut from: Option<(Place, Span)> = None;
        let mut map: Option<(Place, Span)> = None;
        while *self.peek() != Tok::RParen {
            let at = self.span();
            if let (Tok::Ident(n), Tok::Assign) = (self.peek().clone(), self.peek_at(1).clone()) {
                if !sig.named.contains(&n.as_str()) {
                    let msg = if sig.named.is_empty() {
                        format!("`{kw}` takes no named argument `{n}`; write {}", sig.usage)
                    } else {
                        let hint = match closest(&n, sig.named.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("write {}", sig.usage),
                        };
                        format!("`{n}` is not a named argument of `{kw}`; {hint}")
                    };
                    return Err(err("E007", at, msg));
                }
                if named.iter().any(|(m, _, _)| *m == n) || (n == "from" && from.is_some()) || (n == "tensormap" && map.is_some()) {
                    return Err(err("E007", at, format!("`{n}` is given twice in this `{kw}`; keep only one")));
                }
                self.bump();
                self.bump();
                if n == "from" || n == "tensormap" {
                    let p = self.place(&kw)?;
                    if n == "from" {
                        from = Some((p, self.since(at)));
                    } else {
                        map = Some((p, self.since(at)));
                    }
                    self.list_separator(&format!("the arguments of `{kw}`"))?;
                    continue;
                }
                let e = self.expr()?;
                named.push((n, e, self.since(at)));
            } else {
                if !named.is_empty() || from.is_some() || map.is_some() {
                    return Err(err(
                        "E007",
                        at,
                        format!("positional arguments must come before named ones; write {}", sig.usage),
                    ));
                }
                let Some(slot) = sig.positional.get(pos_args.len()).copied() else {
                    return Err(err(
                        "E007",
                        at,
                        format!("too many arguments to `{kw}`; it is written {}", sig.usage),
                    ));
                };
                pos_args.push(match slot {
                    Slot::Place => Arg::Place(self.place(&kw)?),
                    Slot::Expr => Arg::Expr(self.expr()?),
                });
            }
            self.list_separator(&format!("the arguments of `{kw}`"))?;
        }
        self.bump(); // `)`
        let span = self.since(start);
        if kw == "elect" {
            return Ok(Op { kind: OpKind::Elect, span });
        }
        match kw.as_str() {
            "commit_group" => {
                return Ok(Op {
                    kind: OpKind::CommitGroup,
                    span,
                })
            }
            "fence_proxy_async" => {
                return Ok(Op {
                    kind: OpKind::FenceProxyAsync,
                    span,
                })
            }
            "cp_async_commit_group" => {
                return Ok(Op {
                    kind: OpKind::CpAsyncCommitGroup,
                    span,
                })
            }
            "cp_async_wait_all" => {
                return Ok(Op {
                    kind: OpKind::CpAsyncWait { n: None },
                    span,
                })
            }
            "fence_mbarrier_init" => {
                return Ok(Op {
                    kind: OpKind::FenceMbarrierInit,
                    span,
                })
            }
            "cluster_arrive" | "cluster_arrive_relaxed" | "cluster_wait" | "cluster_sync" => {
                let kind = match kw.as_str() {
                    "cluster_arrive" => OpKind::ClusterArrive,
                    "cluster_arrive_relaxed" => OpKind::ClusterArriveRelaxed,
                    "cluster_wait" => OpKind::ClusterWait,
                    _ => OpKind::ClusterSync,
                };
                return Ok(Op { kind, span });
            }
            _ => {}
        }
        if pos_args.len() < sig.required {
            return Err(err(
                "E007",
                span,
                format!(
                    "`{kw}` needs {} argument{} but got {}; it is written {}",
                    sig.required,
                    if sig.required == 1 { "" } else { "s" },
                    pos_args.len(),
                    sig.usage
                ),
            ));
        }
        if crate::lang::blackwell::WORDS.contains(&kw.as_str()) {
            let kind = OpKind::Tc(super::blackwell::stmt(&kw, pos_args, named));
            return Ok(Op { kind, span });
        }
        if let Some(kind) = named_barrier_op(&kw, &mut pos_args) {
            return Ok(Op { kind, span });
        }
        if kw == "wgmma_async" || kw == "warpgroup_mma" {
            let bufs = pos_args
                .into_iter()
                .filter_map(|a| if let Arg::Place(p) = a { Some(p) } else { None })
                .collect();
            let expect = named.into_iter().find(|(n, _, _)| n == "expect").map(|(_, e, _)| e);
            let kind = OpKind::WgmmaAsync {
                bufs,
                expect,
                warpgroup: kw == "warpgroup_mma",
            };
            return Ok(Op { kind, span });
        }
        if kw == "copy_store_async" && !named.is_empty() {
            // A TMA store of bytes `offset .. offset + bytes` (`bytes` alone: the first N bytes).
            let mut take = |n: &str| named.iter().position(|(m, _, _)| m == n).map(|i| named.remove(i).1);
            let bytes = take("bytes");
            let offset = take("offset").unwrap_or(Expr {
                kind: ExprKind::Int(0),
                span,
            });
            let Some(Arg::Place(buf)) = pos_args.into_iter().next() else {
                unreachable!("copy_store_async starts with a place");
            };
            return Ok(Op {
                kind: OpKind::CopyStoreAsyncPart { buf, offset, bytes },
                span,
            });
        }
        let pos_args = match async_proxy_op(&kw, pos_args) {
            Ok(kind) => return Ok(Op { kind, span }),
            Err(args) => args,
        };
        let mut args = pos_args.into_iter();
        let Some(Arg::Place(first)) = args.next() else {
            unreachable!("every operation starts with a place");
        };
        let (second_place, second_expr) = match args.next() {
            Some(Arg::Place(p)) => (Some(p), None),
            Some(Arg::Expr(e)) => (None, Some(e)),
            None => (None, None),
        };
        let req = |e: Option<Expr>| e.expect("a required argument was counted above");
        let mut take_named = |n: &str| named.iter().position(|(m, _, _)| m == n).map(|i| named.remove(i).1);
        // Cluster scope: the target is taken first, the operation then built as for the own CTA.
        let target = match (take_named("cta"), take_named("multicast")) {
            (Some(r), _) => Some(ClusterTarget::Cta(r)),
            (None, Some(m)) => Some(ClusterTarget::Multicast(m)),
            (None, None) => None,
        };
        let kind = match kw.as_str() {
            "arrive" => OpKind::Arrive {
                bar: first,
                n: second_expr,
            },
            "arrive_expect_tx" => OpKind::ArriveExpectTx {
                bar: first,
                bytes: req(second_expr),
            },
            "wait" => OpKind::Wait {
                bar: first,
                token: req(second_expr),
            },
            "wait_parity" => OpKind::WaitParity {
                bar: first,
                parity: req(second_expr),
            },
            "try_wait" => OpKind::TryWait {
                bar: first,
                token: req(second_expr),
            },
            "try_wait_parity" => OpKind::TryWaitParity {
                bar: first,
                parity: req(second_expr),
            },
            "arrive_and_wait" => OpKind::ArriveAndWait { bar: first },
            "arrive_and_drop" => OpKind::ArriveAndDrop { bar: first },
            "expect_tx" => OpKind::ExpectTx {
                bar: first,
                bytes: req(second_expr),
            },
            "complete_tx" => OpKind::CompleteTx {
                bar: first,
                bytes: req(second_expr),
            },
            "copy_async" if map.is_some() => {
                // A tensor copy through a descriptor in shared memory: the own CTA's copy (whole
                // buffer or byte range), wrapped with the descriptor it reads.
                let (map, at) = map.expect("matched above");
                if from.is_some() || target.is_some() {
                    return Err(err(
                        "E007",
                        at,
                        "`tensormap = MAP` is modelled for a copy into the issuing CTA only; drop `from =`, `cta =` and `multicast =` from this copy",
                    ));
                }
                let bar = second_place.expect("a required argument was counted above");
                let expect = take_named("expect");
                let bytes = take_named("bytes");
                let version = take_named("version");
                let inner = match take_named("offset") {
                    Some(offset) => OpKind::CopyAsyncPart {
                        buf: first,
                        bar,
                        offset,
                        bytes,
                        version,
                        libcu: false,
                    },
                    None => OpKind::CopyAsync {
                        buf: first,
                        bar,
                        bytes,
                        version,
                    },
                };
                OpKind::CopyAsyncTensor {
                    map,
                    expect,
                    op: Box::new(Op { kind: inner, span }),
                }
            }
            "copy_async" | "memcpy_async" => {
                let bar = second_place.expect("a required argument was counted above");
                let bytes = take_named("bytes");
                let version = take_named("version");
                if let Some(e) = take_named("expect") {
                    return Err(err(
                        "E007",
                        e.span,
                        "`expect = V` names the descriptor version a tensor copy means to use; it needs `tensormap = MAP`",
                    ));
                }
                if let Some((src, at)) = from {
                    // A CTA-to-CTA bulk copy: the data is the source buffer's, and the copy
                    // always lands in a CTA named by rank (PTX has no multicast form of it).
                    if let Some(v) = version {
                        return Err(err(
                            "E007",
                            v.span,
                            "a copy `from = SRC` carries the version SRC holds when the copy reads it, so it takes no `version =`; write the version into SRC before the copy",
                        ));
                    }
                    if !matches!(target, Some(ClusterTarget::Cta(_))) {
                        return Err(err(
                            "E007",
                            at,
                            "`from = SRC` is the shared::cta source of `cp.async.bulk.shared::cluster.shared::cta`, which lands in one CTA named by rank; add `cta = R` (no `multicast`)",
                        ));
                    }
                    OpKind::CopyAsyncFrom {
                        buf: first,
                        bar,
                        src,
                        offset: take_named("offset"),
                        bytes,
                    }
                } else if let Some(offset) = take_named("offset") {
                    OpKind::CopyAsyncPart {
                        buf: first,
                        bar,
                        offset,
                        bytes,
                        version,
                        libcu: kw == "memcpy_async",
                    }
                } else if kw == "copy_async" {
                    OpKind::CopyAsync {
                        buf: first,
                        bar,
                        bytes,
                        version,
                    }
                } else {
                    OpKind::MemcpyAsync {
                        buf: first,
                        bar,
                        bytes,
                        version,
                    }
                }
            }
            "st_async" => {
                let bar = second_place.expect("a required argument was counted above");
                let bytes = take_named("bytes");
                let version = take_named("version");
                let (Some(bytes), Some(version)) = (bytes, version) else {
                    return Err(err(
                        "E007",
                        span,
                        "`st_async` stores a thread's registers, so it names their size and value: it is written `st_async(BUF, B, bytes = N, version = V)` (N is 4, 8 or 16), optionally with `offset = O` and `cta = R`".to_string(),
                    ));
                };
                let offset = take_named("offset").unwrap_or(Expr {
                    kind: ExprKind::Int(0),
                    span,
                });
                OpKind::StAsync {
                    buf: first,
                    bar,
                    offset,
                    bytes,
                    version,
                }
            }
            "read" => {
                let expect = take_named("expect");
                let bytes = take_named("bytes");
                match take_named("offset") {
                    Some(offset) => OpKind::ReadPart {
                        buf: first,
                        offset,
                        bytes,
                        expect,
                    },
                    // `read(BUF, bytes = N)` reads the first N bytes.
                    None if bytes.is_some() => OpKind::ReadPart {
                        buf: first,
                        offset: Expr {
                            kind: ExprKind::Int(0),
                            span,
                        },
                        bytes,
                        expect,
                    },
                    None => OpKind::Read { buf: first, expect },
                }
            }
            "cp_async" => OpKind::CpAsync {
                buf: first,
                offset: take_named("offset"),
                bytes: take_named("bytes"),
                version: take_named("version"),
            },
            "cp_async_arrive" | "cp_async_arrive_noinc" => OpKind::CpAsyncArrive {
                bar: first,
                noinc: kw == "cp_async_arrive_noinc",
            },
            "write" => {
                let bytes = take_named("bytes");
                match take_named("offset") {
                    Some(offset) => OpKind::WritePart {
                        buf: first,
                        version: req(second_expr),
                        offset,
                        bytes,
                    },
                    // `write(BUF, V, bytes = N)` writes the first N bytes.
                    None if bytes.is_some() => OpKind::WritePart {
                        buf: first,
                        version: req(second_expr),
                        offset: Expr {
                            kind: ExprKind::Int(0),
                            span,
                        },
                        bytes,
                    },
                    None => OpKind::Write {
                        buf: first,
                        version: req(second_expr),
                    },
                }
            }
            "init" => OpKind::Init {
                bar: first,
                count: second_expr,
            },
            "tensormap_write" => OpKind::TensormapWrite {
                map: first,
                version: req(second_expr),
            },
            "fence_proxy_tensormap" => OpKind::FenceProxyTensormap { map: first },
            "atomic_add" => OpKind::AtomicAdd {
                counter: first,
                value: req(second_expr),
            },
            "read_counter" => OpKind::ReadCounter {
                counter: first,
                expect: take_named("expect"),
            },
            "inval" => OpKind::Inval { bar: first },
            "commit" => OpKind::Commit { bar: first },
            _ => unreachable!("every operation word has a case"),
        };
        Ok(match target {
            None => Op { kind, span },
            Some(target) => Op {
                kind: OpKind::Remote {
                    target,
                    op: Box::new(Op { kind, span }),
                },
                span,
            },
        })
    }

    pub(super) fn place(&mut self, op: &str) -> PResult<Place> {
        let start = self.span();
        let name = match self.peek().clone() {
            Tok::Ident(s) if !is_reserved(&s) => Ident {
                name: s,
                span: self.bump().span,
            },
            Tok::Ident(s) => return Err(reserved(&s, start, "a barrier or buffer")),
            other => {
                return Err(err(
                    "E005",
                    start,
                    format!("expected a barrier or buffer name in `{op}(...)`, but found {}", other.describe()),
                ))
            }
        };
        let index = if *self.peek() == Tok::LBracket {
            self.bump();
            let e = self.expr()?;
            self.expect_tok(Tok::RBracket, "to close the index")?;
            Some(Box::new(e))
        } else {
            None
        };
        Ok(Place {
            name,
            index,
            span: self.since(start),
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Slot {
    Place,
    Expr,
}

/// Shape of an operation's argument list.
pub(super) struct Sig {
    positional: &'static [Slot],
    required: usize,
    named: &'static [&'static str],
    usage: &'static str,
}

pub(super) fn signature(op: &str) -> Sig {
    use Slot::*;
    let (positional, required, named, usage): (&'static [Slot], usize, &'static [&'static str], _) = match op {
        "arrive" => (
            &[Place, Expr],
            1,
            &["cta"],
            "`arrive(B)` or `arrive(B, n)`, optionally with `cta = R` (a remote arrive on CTA R's B)",
        ),
        "arrive_expect_tx" => (
            &[Place, Expr],
            2,
            &["cta"],
            "`arrive_expect_tx(B, BYTES)`, optionally with `cta = R` (on CTA R's B)",
        ),
        "wait" => (&[Place, Expr], 2, &[], "`wait(B, token)`"),
        "wait_parity" => (&[Place, Expr], 2, &[], "`wait_parity(B, parity)`"),
        "try_wait" => (&[Place, Expr], 2, &[], "`try_wait(B, token)`"),
        "try_wait_parity" => (&[Place, Expr], 2, &[], "`try_wait_parity(B, parity)`"),
        "arrive_and_wait" => (&[Place], 1, &[], "`arrive_and_wait(B)`"),
        "arrive_and_drop" => (&[Place], 1, &[], "`arrive_and_drop(B)`"),
        "expect_tx" => (&[Place, Expr], 2, &[], "`expect_tx(B, BYTES)`"),
        "complete_tx" => (&[Place, Expr], 2, &[], "`complete_tx(B, BYTES)`"),
        "copy_async" => (
            &[Place, Place],
            2,
            &["bytes", "version", "offset", "multicast", "cta", "from", "tensormap", "expect"],
            "`copy_async(BUF, B)`, optionally followed by `bytes = N`, `version = V`, `offset = O` and `multicast = MASK` or `cta = R` (with `cta = R`, `from = SRC` copies the own CTA's buffer SRC instead of global memory; `tensormap = MAP`, optionally with `expect = V`, names the descriptor in shared memory a tensor copy uses)",
        ),
        "memcpy_async" => (
            &[Place, Place],
            2,
            &["bytes", "version", "offset"],
            "`memcpy_async(BUF, B)`, optionally followed by `bytes = N`, `version = V` and `offset = O`",
        ),
        "st_async" => (
            &[Place, Place],
            2,
            &["offset", "bytes", "version", "cta"],
            "`st_async(BUF, B, bytes = N, version = V)`, optionally with `offset = O` and `cta = R` (into CTA R's BUF, completing on CTA R's B)",
        ),
        "read" => (
            &[Place],
            1,
            &["expect", "offset", "bytes", "cta"],
            "`read(BUF)` or `read(BUF, expect = V)`, optionally with `offset = O`, `bytes = N` and `cta = R`",
        ),
        "write" => (
            &[Place, Expr],
            2,
            &["offset", "bytes", "cta"],
            "`write(BUF, V)`, optionally with `offset = O`, `bytes = N` (part of the buffer) and `cta = R` (a DSMEM write into CTA R's BUF)",
        ),
        "init" => (&[Place, Expr], 1, &[], "`init(B)` or `init(B, COUNT)`"),
        "inval" => (&[Place], 1, &[], "`inval(B)`"),
        "commit" => (&[Place], 1, &[], "`commit(B)`"),
        "elect" => (&[], 0, &[], "`elect()`"),
        "bar_sync" => (&[Expr, Expr], 2, &[], "`bar_sync(ID, COUNT)`"),
        "bar_arrive" => (&[Expr, Expr], 2, &[], "`bar_arrive(ID, COUNT)`"),
        "cp_async" => (
            &[Place],
            1,
            &["offset", "bytes", "version"],
            "`cp_async(BUF)`, optionally followed by `offset = O`, `bytes = N` and `version = V`",
        ),
        "cp_async_arrive" => (&[Place], 1, &[], "`cp_async_arrive(B)`"),
        "cp_async_arrive_noinc" => (&[Place], 1, &[], "`cp_async_arrive_noinc(B)`"),
        "cp_async_commit_group" => (&[], 0, &[], "`cp_async_commit_group()`"),
        "cp_async_wait_group" => (&[Expr], 1, &[], "`cp_async_wait_group(N)`"),
        "cp_async_wait_all" => (&[], 0, &[], "`cp_async_wait_all()`"),
        // The async proxy.
        "copy_store_async" => (
            &[Place],
            1,
            &["offset", "bytes"],
            "`copy_store_async(BUF)`, optionally with `offset = O` and `bytes = N` (a store of part of the buffer)",
        ),
        "commit_group" => (&[], 0, &[], "`commit_group()`"),
        "wait_group" => (&[Expr], 1, &[], "`wait_group(N)`"),
        "wait_group_read" => (&[Expr], 1, &[], "`wait_group_read(N)`"),
        "wgmma_async" => (
            &[Place, Place, Place, Place],
            1,
            &["expect"],
            "`wgmma_async(A)` or `wgmma_async(A, B)` (one to four operand buffers), optionally with `expect = V`",
        ),
        "wgmma_wait" => (&[Expr], 1, &[], "`wgmma_wait(N)`"),
        "warpgroup_mma" => (
            &[Place, Place, Place, Place],
            1,
            &["expect"],
            "`warpgroup_mma(A)` or `warpgroup_mma(A, B)` (one to four operand buffers), optionally with `expect = V`",
        ),
        "warpgroup_wait" => (&[Expr], 1, &[], "`warpgroup_wait(N)`"),
        "fence_proxy_async" => (&[], 0, &[], "`fence_proxy_async()`"),
        "fence_mbarrier_init" => (&[], 0, &[], "`fence_mbarrier_init()`"),
        "tensormap_write" => (&[Place, Expr], 2, &[], "`tensormap_write(MAP, V)`"),
        "fence_proxy_tensormap" => (&[Place], 1, &[], "`fence_proxy_tensormap(MAP)`"),
        "atomic_add" => (
            &[Place, Expr],
            2,
            &["cta"],
            "`atomic_add(C, V)`, optionally with `cta = R` (an atomic add to CTA R's counter C)",
        ),
        "read_counter" => (
            &[Place],
            1,
            &["expect", "cta"],
            "`read_counter(C)` or `read_counter(C, expect = V)`, optionally with `cta = R` (CTA R's counter C)",
        ),
        // Blackwell (lang::blackwell).
        "tcgen05_mma" => (
            &[Place, Place, Place, Place],
            2,
            &["expect", "version"],
            "`tcgen05_mma(ACC, A)` or `tcgen05_mma(ACC, A, B)` (a tensor-memory region, then one to three shared-memory operand buffers), optionally with `expect = V` and `version = W`",
        ),
        "tcgen05_commit" => (
            &[Place],
            1,
            &["multicast"],
            "`tcgen05_commit(B)`, optionally with `multicast = MASK` (B in every CTA of the mask)",
        ),
        "tmem_alloc" => (&[Place, Expr], 2, &[], "`tmem_alloc(T, COLS)`"),
        "tmem_dealloc" => (&[Place], 1, &[], "`tmem_dealloc(T)`"),
        "tmem_relinquish" => (&[], 0, &[], "`tmem_relinquish()`"),
        "tcgen05_ld" => (&[Place], 1, &["expect"], "`tcgen05_ld(T)` or `tcgen05_ld(T, expect = V)`"),
        "tcgen05_wait_ld" => (&[], 0, &[], "`tcgen05_wait_ld()`"),
        "clc_try_cancel" => (&[Place, Place], 2, &[], "`clc_try_cancel(RESP, B)`"),
        "cluster_arrive" => (&[], 0, &[], "`cluster_arrive()`"),
        "cluster_arrive_relaxed" => (&[], 0, &[], "`cluster_arrive_relaxed()`"),
        "cluster_wait" => (&[], 0, &[], "`cluster_wait()`"),
        "cluster_sync" => (&[], 0, &[], "`cluster_sync()`"),
        _ => unreachable!("signature of a non-operation"),
    };
    Sig {
        positional,
        required,
        named,
        usage,
    }
}

pub(super) enum Arg {
    Place(Place),
    Expr(Expr),
}

pub(super) fn nested_op(kw: &str, span: Span) -> Diagnostic {
    err(
        "E008",
        span,
        format!("operations cannot be nested in expressions; bind the result first, as in `let t = {kw}(...)`, then use `t`"),
    )
}

pub(super) fn unknown_op(word: &str, span: Span) -> Diagnostic {
    let span = Span::new(span.start as usize, span.start as usize + word.len());
    // A typo, or a shortened name whose words all occur in exactly one operation's name
    // (`arrive_wait` for `arrive_and_wait`).
    let by_words = || {
        let parts: Vec<&str> = word.split('_').filter(|p| !p.is_empty()).collect();
        let mut hits = OPS.iter().filter(|op| parts.iter().all(|p| op.split('_').any(|q| q == *p)));
        match (parts.len() > 1, hits.next(), hits.next()) {
            (true, Some(op), None) => Some(*op),
            _ => None,
        }
    };
    match closest(word, OPS.iter().copied()).or_else(by_words) {
        Some(s) => err("E010", span, format!("`{word}` is not an operation; did you mean `{s}`?")),
        None => err(
            "E010",
            span,
            format!(
                "`{word}` is not an operation, and the language has no other calls; the operations are {}",
                OPS.join(", ")
            ),
        ),
    }
}

/// `bar_sync(ID, COUNT)` / `bar_arrive(ID, COUNT)`: the only
/// operations whose arguments are all expressions.
pub(super) fn named_barrier_op(kw: &str, args: &mut Vec<Arg>) -> Option<OpKind> {
    if kw != "bar_sync" && kw != "bar_arrive" {
        return None;
    }
    let mut it = std::mem::take(args).into_iter().map(|a| match a {
        Arg::Expr(e) => e,
        Arg::Place(_) => unreachable!("named barrier arguments are expressions"),
    });
    let (id, count) = (it.next()?, it.next()?);
    Some(if kw == "bar_sync" {
        OpKind::BarSync { id, count }
    } else {
        OpKind::BarArrive { id, count }
    })
}

/// The async-proxy operations whose arguments do not start with a barrier, built from
/// their positional arguments (already counted against the signature); `Err` gives the
/// arguments back for every other operation.
pub(super) fn async_proxy_op(kw: &str, args: Vec<Arg>) -> Result<OpKind, Vec<Arg>> {
    let places = |args: Vec<Arg>| -> Vec<Place> {
        args.into_iter()
            .filter_map(|a| if let Arg::Place(p) = a { Some(p) } else { None })
            .collect()
    };
    let first_expr = |args: Vec<Arg>| -> Expr {
        args.into_iter()
            .find_map(|a| if let Arg::Expr(e) = a { Some(e) } else { None })
            .expect("a required argument was counted above")
    };
    Ok(match kw {
        "copy_store_async" => OpKind::CopyStoreAsync {
            buf: places(args).remove(0),
        },
        "wait_group" | "wait_group_read" => OpKind::WaitGroup {
            n: first_expr(args),
            read: kw == "wait_group_read",
        },
        "wgmma_wait" | "warpgroup_wait" => OpKind::WgmmaWait {
            n: first_expr(args),
            warpgroup: kw == "warpgroup_wait",
        },
        "cp_async_wait_group" => OpKind::CpAsyncWait { n: Some(first_expr(args)) },
        _ => return Err(args),
    })
}
