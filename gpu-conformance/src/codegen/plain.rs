//! The protocol alone, as a kernel an engineer would write: `phasecheck emit-cuda SPEC --plain`.
//!
//! The conformance kernels of the other backends exist to test the model against the silicon:
//! turnstiles force schedules, waits are bounded by clocks, every observation is recorded in
//! global memory. That instrumentation hides the protocol from a reader, and from
//! `phasecheck import`, which would recover the turnstile instead of the barriers. This backend
//! prints only the barrier protocol, in the style of `import/kernels/mbarrier.cuh`: raw PTX
//! inline asm for each mbarrier operation (init and `fence.mbarrier_init` before a
//! `__syncthreads`, arrive, `arrive.expect_tx`, `try_wait.parity` polling loops, `cp.async.bulk`
//! copies completing bytes on a barrier), `ld.shared` / `st.shared` for reads and writes, one
//! `if (threadIdx.x ...)` range per role and the spec's control flow as labels and jumps. Two
//! uses: a readable starting point for a real kernel, and the import round trip (spec -> CUDA ->
//! PTX -> import -> spec, whose verdicts must agree: tests/import_roundtrip.rs).
//!
//! Nothing is bounded, so a protocol that hangs in the model hangs here: the kernel is for
//! reading and importing, not for launching blind. It walks the lowered program, so loops come
//! out as the jumps the lowering made of them (NVRTC turns them back into loops, or unrolls
//! them). Versions and expected versions are data the kernel does not carry, so a read with
//! `expect` is refused (its stale-read verdict could not survive the trip); a `version` on a copy
//! or write is kept only as the value stored. What the backend does not cover (uniform roles,
//! clusters, completion functions, shared vars, asserts, warp collectives, the async proxy but
//! its two fences, `cp.async`, try-waits) is refused with the statement's line.

use super::expr::{ident, line_of};
use super::{Gen, NotExpressible};
use phasecheck_model::lang::ast::UnOp;
use phasecheck_model::program::ir::*;
use std::collections::BTreeSet;
use std::fmt::Write;

/// The plain kernel of a protocol: one self-contained translation unit holding
/// `extern "C" __global__ void NAME(const char *src)`, `src` being the global memory the copies
/// read from. Err: what it cannot express, with the spec line.
pub fn generate_plain(p: &Protocol, source: &str) -> Result<String, NotExpressible> {
    let refuse = |m: String| Err(NotExpressible(m));
    if p.warp_size != 32 {
        return refuse(format!("warp_size {}: plain kernels use the hardware's warps of 32", p.warp_size));
    }
    if p.cluster > 1 {
        return refuse("cluster scope: plain kernels cover one CTA".into());
    }
    if !p.vars.is_empty() {
        return refuse("shared vars: plain kernels carry only barriers and buffers".into());
    }
    if p.barriers.iter().any(|b| b.completion.is_some()) {
        return refuse("a completion function: mbarriers have none (a cuda::barrier with one is a software barrier)".into());
    }
    if let Some(r) = p.roles.iter().find(|r| r.uniform) {
        return refuse(format!(
            "role {} is uniform: plain kernels give each thread of a role its own statements",
            r.name
        ));
    }
    if let Some(b) = p.buffers.iter().find(|b| b.bytes <= 0 || b.bytes % 16 != 0) {
        return refuse(format!(
            "buffer {} has {} bytes: plain kernels take buffers of whole 16-byte chunks (bulk copies move multiples of 16)",
            b.name, b.bytes
        ));
    }
    if let Some(b) = p.barriers.iter().find(|b| !(1..=MAX_COUNT).contains(&b.count)) {
        return refuse(format!(
            "barrier {} has count {}: mbarrier.init takes 1 to 2^20 - 1",
            b.name, b.count
        ));
    }
    let block = p.threads.iter().map(|t| t.gtid + 1).max().unwrap_or(0);
    if block == 0 || block > 1024 {
        return refuse(format!("{block} threads: a block holds 1 to 1024"));
    }
    let name = format!("plain_{}", ident(&p.name));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// The barrier protocol of `{}`, written by `phasecheck emit-cuda --plain`: raw mbarrier PTX, one\n\
         // `if (threadIdx.x ...)` range per role. Launch with {block} threads; `src` is the global memory\n\
         // the bulk copies read. A protocol that hangs in the model hangs here too.",
        super::comment_text(&p.name)
    );
    out.push_str(HELPERS);
    let _ = writeln!(
        out,
        "\nextern \"C\" __global__ void __launch_bounds__({block}) {name}(const char *src) {{"
    );
    for g in &p.barrier_groups {
        let dim = if g.is_array { format!("[{}]", g.len) } else { String::new() };
        let _ = writeln!(out, "  __shared__ alignas(8) unsigned long long {}{dim};", ident(&g.name));
    }
    for g in &p.buffer_groups {
        let bytes = p.buffers[g.base as usize].bytes;
        let dim = if g.is_array { format!("[{}]", g.len) } else { String::new() };
        let _ = writeln!(out, "  __shared__ alignas(128) unsigned char {}{dim}[{bytes}];", ident(&g.name));
    }
    let auto: Vec<usize> = (0..p.barriers.len()).filter(|&b| !p.barriers[b].manual_init).collect();
    if !auto.is_empty() {
        out.push_str("  // barriers the spec does not init itself are ready before any role runs\n  if (threadIdx.x == 0) {\n");
        for &b in &auto {
            let _ = writeln!(out, "    pc_init({}, {});", element(p, b), p.barriers[b].count);
        }
        out.push_str("    pc_fence_mbarrier_init();\n  }\n  __syncthreads();\n");
    }
    for (ri, r) in p.roles.iter().enumerate() {
        let first = r.first_gtid;
        let last = p
            .threads
            .iter()
            .filter(|t| t.role as usize == ri)
            .map(|t| t.gtid)
            .max()
            .unwrap_or(first);
        let range = if first == 0 {
            format!("threadIdx.x <= {last}")
        } else {
            format!("threadIdx.x >= {first} && threadIdx.x <= {last}")
        };
        let _ = writeln!(out, "  if ({range}) {{  // role {}[{}]", super::comment_text(&r.name), r.count);
        role_body(p, source, &r.code, first, &format!("R{ri}_"), &mut out)?;
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    Ok(out)
}

/// One role: its locals, then each instruction as a C++ statement behind a label (`label`
/// and the pc: labels are the kernel's, so each role has its own prefix) where something jumps.
fn role_body(p: &Protocol, source: &str, code: &Code, first: u32, label: &str, out: &mut String) -> Result<(), NotExpressible> {
    let _ = writeln!(out, "    const long long tid_ = (long long)threadIdx.x - {first};");
    for slot in 0..code.local_names.len() {
        let _ = writeln!(out, "    long long {} = 0;", Gen::local_name(code, slot as u16));
    }
    let _ = writeln!(out, "    (void)tid_;");
    let mut targets = BTreeSet::new();
    for i in &code.instrs {
        match i.kind {
            InstrKind::Jump { to } | InstrKind::Branch { else_to: to, .. } => {
                targets.insert(to);
            }
            _ => {}
        }
    }
    let end = code.instrs.len() as u32;
    let mut last_line = 0;
    for (pc, i) in code.instrs.iter().enumerate() {
        if targets.contains(&(pc as u32)) {
            let _ = writeln!(out, "  {label}{pc}:;");
        }
        let (line, text) = line_of(source, i.span.start);
        if line != last_line && i.visible {
            let _ = writeln!(out, "    // spec:{line} | {text}");
            last_line = line;
        }
        let refuse = |what: &str| Err(NotExpressible(format!("line {line}: {what} has no plain form")));
        let e = |x: &IExpr| expr(code, x);
        match &i.kind {
            InstrKind::SetLocal { slot, expr: x } => {
                let _ = writeln!(out, "    {} = {};", Gen::local_name(code, *slot), e(x)?);
            }
            InstrKind::Jump { to } => {
                let _ = writeln!(out, "    goto {label}{to};");
            }
            InstrKind::Branch { cond, else_to } => {
                let _ = writeln!(out, "    if (!({})) goto {label}{else_to};", e(cond)?);
            }
            InstrKind::Return => {
                let _ = writeln!(out, "    goto {label}{end};");
                targets.insert(end);
            }
            InstrKind::Work | InstrKind::TokenCheck { .. } => {}
            InstrKind::SyncThreads => out.push_str("    __syncthreads();\n"),
            InstrKind::Op { op, result } => {
                let stmt = op_text(p, code, op, *result, line)?;
                match result {
                    Some(slot) => {
                        let _ = writeln!(out, "    {} = (long long){stmt};", Gen::local_name(code, *slot));
                    }
                    None => {
                        let _ = writeln!(out, "    {stmt};");
                    }
                }
            }
            InstrKind::SetVar { .. } => return refuse("a shared var"),
            InstrKind::Assert(_) => return refuse("an assert"),
            InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } => return refuse("syncwarp"),
            InstrKind::Elect { .. } => return refuse("elect()"),
            InstrKind::NamedBar { .. } => return refuse("a named barrier"),
            InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => return refuse("the cluster barrier"),
        }
    }
    let _ = writeln!(out, "  {label}{end}:;");
    Ok(())
}

/// The C++ call for one operation (a value when the operation yields one).
fn op_text(p: &Protocol, code: &Code, op: &IOp, result: Option<u16>, line: usize) -> Result<String, NotExpressible> {
    let refuse = || Err(NotExpressible(format!("line {line}: `{}` has no plain form", op.name())));
    let e = |x: &IExpr| expr(code, x);
    let bar = |r: &Ref| place(p, code, r, true);
    let buf = |r: &Ref| place(p, code, r, false);
    Ok(match op {
        IOp::Mbar(m) => match m {
            MbarOp::Arrive {
                bar: b,
                n,
                drop,
                expect_tx,
            } => match (drop, expect_tx) {
                (false, None) => format!("pc_arrive({}, {})", bar(b)?, e(n)?),
                (true, None) => format!("pc_arrive_drop({}, {})", bar(b)?, e(n)?),
                (false, Some(tx)) if result.is_none() && matches!(n, IExpr::Const(1)) => {
                    format!("pc_arrive_expect_tx({}, {})", bar(b)?, e(tx)?)
                }
                (false, Some(tx)) => format!("(pc_expect_tx({b}, {}), pc_arrive({b}, {}))", e(tx)?, e(n)?, b = bar(b)?),
                (true, Some(_)) => return refuse(),
            },
            MbarOp::Wait {
                bar: b,
                target,
                try_: false,
            } => match target {
                WaitTarget::Parity(x) => format!("pc_wait_parity({}, {})", bar(b)?, e(x)?),
                WaitTarget::Token(x) => format!("pc_wait({}, {})", bar(b)?, e(x)?),
            },
            MbarOp::Wait { try_: true, .. } => return refuse(),
            MbarOp::ExpectTx { bar: b, bytes } => format!("pc_expect_tx({}, {})", bar(b)?, e(bytes)?),
            MbarOp::CompleteTx { bar: b, bytes } => format!("pc_complete_tx({}, {})", bar(b)?, e(bytes)?),
            MbarOp::Init { bar: b, count } => {
                let n = match count {
                    Some(c) => e(c)?,
                    None => p.barriers[p.barrier_groups[b.group as usize].base as usize].count.to_string(),
                };
                format!("pc_init({}, {n})", bar(b)?)
            }
            MbarOp::Inval { bar: b } => format!("pc_inval({})", bar(b)?),
        },
        IOp::Copy(CopyOp::Copy { buf: d, bar: b, bytes, .. }) => {
            let n = match bytes {
                Some(x) => e(x)?,
                None => buffer_bytes(p, d).to_string(),
            };
            format!("pc_bulk_copy({}, src, {n}, {})", buf(d)?, bar(b)?)
        }
        IOp::Copy(CopyOp::CopyPart {
            buf: d,
            bar: b,
            offset,
            bytes,
            ..
        }) => format!("pc_bulk_copy({} + {}, src, {}, {})", buf(d)?, e(offset)?, e(bytes)?, bar(b)?),
        IOp::Mem(MemOp::Read { buf: d, expect: None }) => format!("pc_read({}, {})", buf(d)?, buffer_bytes(p, d)),
        IOp::Mem(MemOp::ReadPart {
            buf: d,
            offset,
            bytes,
            expect: None,
        }) => format!("pc_read({} + {}, {})", buf(d)?, e(offset)?, e(bytes)?),
        IOp::Mem(MemOp::Read { expect: Some(_), .. } | MemOp::ReadPart { expect: Some(_), .. }) => {
            return Err(NotExpressible(format!(
                "line {line}: a read with `expect`: the version it expects is data a plain kernel does not carry"
            )))
        }
        IOp::Mem(MemOp::Write { buf: d, version }) => format!("pc_write({}, {}, {})", buf(d)?, buffer_bytes(p, d), e(version)?),
        IOp::Mem(MemOp::WritePart {
            buf: d,
            offset,
            bytes,
            version,
        }) => format!("pc_write({} + {}, {}, {})", buf(d)?, e(offset)?, e(bytes)?, e(version)?),
        IOp::Proxy(ProxyOp::FenceMbarrierInit) => "pc_fence_mbarrier_init()".into(),
        IOp::Proxy(ProxyOp::FenceProxyAsync) => "pc_fence_proxy_async()".into(),
        _ => return refuse(),
    })
}

/// Bytes of one element of the buffer group a reference names.
fn buffer_bytes(p: &Protocol, r: &Ref) -> i64 {
    p.buffers[p.buffer_groups[r.group as usize].base as usize].bytes
}

/// `&full[i]` / `&done` (barriers), `slot[i]` / `tile` (buffers, as byte pointers).
fn place(p: &Protocol, code: &Code, r: &Ref, barrier: bool) -> Result<String, NotExpressible> {
    let g = if barrier {
        &p.barrier_groups[r.group as usize]
    } else {
        &p.buffer_groups[r.group as usize]
    };
    let name = ident(&g.name);
    let at = match (&r.index, g.is_array) {
        (Some(i), true) => format!("{name}[{}]", expr(code, i)?),
        _ => name,
    };
    Ok(if barrier { format!("&{at}") } else { at })
}

/// The element a flat barrier index names.
fn element(p: &Protocol, b: usize) -> String {
    let g = p
        .barrier_groups
        .iter()
        .find(|g| (g.base as usize..g.base as usize + g.len as usize).contains(&b))
        .expect("every barrier is in a group");
    if g.is_array {
        format!("&{}[{}]", ident(&g.name), b - g.base as usize)
    } else {
        format!("&{}", ident(&g.name))
    }
}

/// An expression in C's `long long` arithmetic, whose operators are the language's (truncating
/// `/` and `%`, comparisons yielding 0 or 1). A fault the model reports (overflow, a division by
/// zero) is undefined here: the kernel is for the protocols that do not fault.
fn expr(code: &Code, e: &IExpr) -> Result<String, NotExpressible> {
    Ok(match e {
        IExpr::Const(v) if *v == i64::MIN => "(-9223372036854775807LL - 1)".into(),
        IExpr::Const(v) => format!("{v}LL"),
        IExpr::Local(s) => Gen::local_name(code, *s),
        IExpr::Var(_) => return Err(NotExpressible("a shared var has no plain form".into())),
        IExpr::Tid => "tid_".into(),
        IExpr::Gtid => "(long long)threadIdx.x".into(),
        IExpr::Lane => "(long long)(threadIdx.x % 32)".into(),
        IExpr::Warp => "(long long)(threadIdx.x / 32)".into(),
        IExpr::Unary(UnOp::Neg, a) => format!("(-{})", expr(code, a)?),
        IExpr::Unary(UnOp::Not, a) => format!("(long long)!{}", expr(code, a)?),
        IExpr::Binary(op, a, b) => format!("({} {} {})", expr(code, a)?, op.symbol(), expr(code, b)?),
    })
}

/// The raw mbarrier operations, one inline-asm statement each, as a kernel of this style writes
/// them (import/kernels/mbarrier.cuh).
const HELPERS: &str = r#"
__device__ __forceinline__ unsigned pc_smem(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void pc_init(unsigned long long *bar, long long count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(pc_smem(bar)), "r"((unsigned)count) : "memory");
}
__device__ __forceinline__ void pc_fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void pc_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void pc_inval(unsigned long long *bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(pc_smem(bar)) : "memory");
}
__device__ __forceinline__ unsigned long long pc_arrive(unsigned long long *bar, long long n) {
  unsigned long long state;
  if (n == 1)
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(pc_smem(bar)) : "memory");
  else
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(pc_smem(bar)), "r"((unsigned)n) : "memory");
  return state;
}
__device__ __forceinline__ unsigned long long pc_arrive_drop(unsigned long long *bar, long long n) {
  unsigned long long state;
  if (n == 1)
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(pc_smem(bar)) : "memory");
  else
    asm volatile("mbarrier.arrive_drop.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(pc_smem(bar)), "r"((unsigned)n) : "memory");
  return state;
}
__device__ __forceinline__ void pc_arrive_expect_tx(unsigned long long *bar, long long bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(pc_smem(bar)), "r"((unsigned)bytes) : "memory");
}
__device__ __forceinline__ void pc_expect_tx(unsigned long long *bar, long long bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(pc_smem(bar)), "r"((unsigned)bytes) : "memory");
}
__device__ __forceinline__ void pc_complete_tx(unsigned long long *bar, long long bytes) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(pc_smem(bar)), "r"((unsigned)bytes) : "memory");
}
__device__ __forceinline__ void pc_wait_parity(unsigned long long *bar, long long parity) {
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@!P1 bra WAIT;\n"
      "}\n" ::"r"(pc_smem(bar)), "r"((unsigned)(parity & 1))
      : "memory");
}
__device__ __forceinline__ void pc_wait(unsigned long long *bar, long long token) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.test_wait.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(pc_smem(bar)), "l"((unsigned long long)token)
        : "memory");
  }
}
__device__ __forceinline__ void pc_bulk_copy(unsigned char *dst, const char *src, long long bytes, unsigned long long *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(pc_smem(dst)), "l"(src), "r"((unsigned)bytes), "r"(pc_smem(bar))
               : "memory");
}
__device__ __forceinline__ void pc_read(const unsigned char *p, long long bytes) {
  for (long long k = 0; k < bytes; k += 4) {
    unsigned v;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(pc_smem(p + k)) : "memory");
  }
}
__device__ __forceinline__ void pc_write(unsigned char *p, long long bytes, long long value) {
  for (long long k = 0; k < bytes; k += 4)
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(pc_smem(p + k)), "r"((unsigned)value) : "memory");
}
"#;
