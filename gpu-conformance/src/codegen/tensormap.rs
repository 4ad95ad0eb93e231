//! TMA descriptors in shared memory (`tensormap NAME`, docs/language.md): a real `CUtensorMap`
//! edited with `tensormap.replace`, fenced with `fence.proxy.tensormap::generic`, and used by real
//! `cp.async.bulk.tensor` copies (`prelude/tensormap.cuh` says how).
//!
//! - The host encodes one `CUtensorMap` per kernel (`cuTensorMapEncodeTiled`, a 1-D tiled tensor
//!   of int32 over a tensor source of its own, `sys.rs`) into the kernel's `PcTmapHost`
//!   ([`tmap_symbol`]); thread 0 copies it into every `tensormap` buffer at the start, publishes it
//!   and fences it (version 0).
//! - `tensormap_write(MAP, V)`: `tensormap.replace.tile.global_address` of the shared descriptor
//!   to the tensor source's row V, then the descriptor's 128 bytes stored, with plain generic
//!   stores, to its per-block global slot: PTX takes a tensor copy's descriptor from global (or
//!   param/const) memory only, so the slot is the descriptor the TMA unit reads, and the stores are
//!   the edit as the tensormap proxy sees it.
//! - `fence_proxy_tensormap(MAP)`: `fence.proxy.tensormap::generic.release.gpu` and
//!   `.acquire.gpu` of the slot.
//! - `copy_async(..., tensormap = MAP, expect = E)`: `cp.async.bulk.tensor.1d` boxes through the
//!   slot. Row r of the tensor source is stamped r - 256 and the copy reads row V - E + 256 from
//!   the descriptor's base, so it lands V through the version it means and V + D - E through
//!   version D (a stale descriptor lands another group's tile, as DeepGEMM #343's did). With
//!   `expect`, a one-box probe through the slot first (its own mbarrier, a bounded wait) reads the
//!   version D the TMA unit sees; D != E counts as a failed `expect` (`nbad`), as a stale `read`
//!   does. Without `expect`, E is the version of the descriptor's last edit in the kernel.
//!
//! Limits: every tensor copy of a kernel moves the same constant number of bytes (the host
//! encodes one box), at a constant offset that is a multiple of 128 bytes; not in a warp-uniform
//! role (each lane would edit and fence the descriptor).

use super::expr::ident;
use super::{Backend, Gen};
use phasecheck_model::program::ir::*;

/// The name of the `__device__` `PcTmapHost` through which the host hands a kernel its tensor map.
pub fn tmap_symbol(kernel: &str) -> String {
    format!("{kernel}_tmap")
}

/// The kernel uses TMA descriptors.
pub(super) fn has_tensormap(p: &Protocol) -> bool {
    p.buffers.iter().any(|b| b.tensormap)
}

fn is_tensormap_op(op: &IOp) -> bool {
    matches!(
        op,
        IOp::Copy(CopyOp::Tensor { .. }) | IOp::Proxy(ProxyOp::FenceProxyTensormap { .. })
    )
}

/// The words one box of the kernel's tensor copies moves (the host encodes this box), or why the
/// copies cannot share one.
pub(super) fn box_words(p: &Protocol) -> Result<i64, String> {
    let mut size: Option<i64> = None;
    let copies = p
        .roles
        .iter()
        .map(|r| &r.code)
        .chain(p.completions.iter())
        .flat_map(|c| c.instrs.iter())
        .filter_map(|i| match &i.kind {
            InstrKind::Op {
                op: IOp::Copy(CopyOp::Tensor { copy, .. }),
                ..
            } => Some(copy.as_ref()),
            _ => None,
        });
    for c in copies {
        let (n, off) = match c {
            CopyOp::Copy { buf, bytes, .. } => {
                let whole = p.buffers[p.buffer_groups[buf.group as usize].base as usize].bytes;
                match bytes {
                    None => (whole, 0),
                    Some(IExpr::Const(n)) => (*n, 0),
                    Some(_) => return Err("a tensor copy of a computed size: the host encodes one box per kernel, so its size must be a constant".into()),
                }
            }
            CopyOp::CopyPart { offset, bytes, .. } => match (offset, bytes) {
                (IExpr::Const(o), IExpr::Const(n)) => (*n, *o),
                _ => return Err("a tensor copy at a computed offset or of a computed size: the host encodes one box per kernel, and a box lands at a 128-byte aligned address, so both must be constants".into()),
            },
            _ => return Err("a tensor copy of another kind than copy_async into the own CTA".into()),
        };
        if n <= 0 || n % 16 != 0 {
            return Err(format!("a tensor copy of {n} bytes: a box moves a positive multiple of 16 bytes"));
        }
        if off < 0 || off % 128 != 0 {
            return Err(format!("a tensor copy at offset {off}: a box lands at a 128-byte aligned address"));
        }
        if n > 1024 && n % 1024 != 0 {
            return Err(format!(
                "a tensor copy of {n} bytes: past 1024 bytes (a box of 256 words) it must be a multiple of 1024 bytes"
            ));
        }
        match size {
            Some(s) if s != n => return Err(format!("tensor copies of {s} and {n} bytes: the host encodes one box per kernel")),
            _ => size = Some(n),
        }
    }
    Ok(size.map_or(4, |n| (n / 4).min(256)))
}

impl Gen<'_> {
    /// Why the kernel cannot run a tensormap statement, if it cannot.
    pub(super) fn tensormap_inexpressible(&self, op: &IOp, uniform: bool) -> Option<String> {
        let edit = matches!(op, IOp::Mem(MemOp::Write { buf, .. }) if self.is_tensormap(buf));
        if !(is_tensormap_op(op) || edit) {
            return None;
        }
        if uniform {
            return Some(
                "a tensormap statement in a warp-uniform role: every lane of the agent would edit, fence or copy through the descriptor"
                    .into(),
            );
        }
        match op {
            IOp::Copy(CopyOp::Tensor { copy, .. }) => {
                if let Err(why) = box_words(self.p) {
                    return Some(why);
                }
                self.copy_inexpressible(&IOp::Copy((**copy).clone()))
            }
            _ => None,
        }
    }

    /// A reference to a `tensormap` buffer.
    pub(super) fn is_tensormap(&self, buf: &Ref) -> bool {
        let p = self.p;
        p.buffers[p.buffer_groups[buf.group as usize].base as usize].tensormap
    }

    /// `tensormap_write(MAP, V)`.
    pub(super) fn tensormap_write(&mut self, code: &Code, map: &Ref, version: &IExpr) {
        let d = self.placed(code, map, false, "  ");
        let v = self.expr(code, version);
        let flat = self.flat_buf(code, map);
        self.w(format!(
            "  {{ i64 tv = (i64)({v}); if (tv < 0 || tv >= PC_SRC_VERSIONS || !pc_tmap().ok) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        self.w(format!(
            "    pc_tmap_edit(pc_tmap(), {d}, {flat}, tv); s.tmap_ver[{flat}] = (int)tv; atomicAdd(&s.writes[{flat}], 1);  // tensormap.replace in shared memory, then plain stores to the slot the TMA reads"
        ));
        self.w("  }");
    }

    /// `fence_proxy_tensormap(MAP)`.
    pub(super) fn tensormap_fence(&mut self, code: &Code, map: &Ref) {
        self.placed(code, map, false, "  ");
        let flat = self.flat_buf(code, map);
        self.w(format!(
            "  if (!pc_tmap().ok) {{ th.status = PC_UNSUPPORTED; return; }} pc_tmap_fence(pc_tmap(), {flat});  // fence.proxy.tensormap::generic release + acquire"
        ));
    }

    /// `copy_async(..., tensormap = MAP, expect = E)`.
    pub(super) fn tensor_copy(&mut self, code: &Code, map: &Ref, expect: Option<&IExpr>, copy: &CopyOp) {
        let (buf, bar, offset, bytes, version) = match copy {
            CopyOp::Copy { buf, bar, bytes, version } => (buf, bar, None, bytes.as_ref(), version.as_ref()),
            CopyOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => (buf, bar, Some(offset), Some(bytes), version.as_ref()),
            _ => unreachable!("tensormap_inexpressible refuses other tensor copies"),
        };
        let (b, chk1) = self.place(code, bar, true);
        let (d, chk2) = self.place(code, buf, false);
        let (_, chk3) = self.place(code, map, false);
        for c in [chk1, chk2, chk3].into_iter().flatten() {
            self.w(format!("  {c}"));
        }
        let off = offset.map(|e| self.expr(code, e)).unwrap_or_else(|| "0".into());
        let n = bytes.map(|e| self.expr(code, e)).unwrap_or_else(|| format!("(i64)sizeof({d})"));
        let dflat = self.flat_buf(code, buf);
        let mflat = self.flat_buf(code, map);
        let v = match version {
            Some(e) => self.expr(code, e),
            None => format!("(i64)s.writes[{dflat}]"),
        };
        let want = match expect {
            Some(e) => self.expr(code, e),
            None => format!("(i64)s.tmap_ver[{mflat}]"),
        };
        let bar = match self.backend {
            Backend::Ptx => format!("&{b}"),
            Backend::Libcu => self.native(&b),
        };
        self.w(format!(
            "  if ({n} % 16 != 0 || {n} <= 0 || {off} % 128 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d}) || {n} % (pc_tmap().box_words * 4) != 0 || !pc_tmap().ok) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        self.w(format!("  {{ {}", self.version_stmt(&dflat, &v, version.is_some())));
        self.w(format!(
            "    i64 want = {want}; if (want < 0 || want >= PC_SRC_VERSIONS) {{ th.status = PC_UNSUPPORTED; return; }}  // the descriptor version the copy means"
        ));
        if expect.is_some() {
            self.w(format!(
                "    {{ i64 seen = pc_tmap_probe(th, pc_tmap(), {mflat}, s.tmap_probe[th.t], &s.tmap_pbar[th.t], &s.tmap_pphase[th.t]); if (seen < 0) return; if (seen != want) th.nbad++; }}  // expect: the version the TMA unit reads through the descriptor"
            ));
        }
        self.w(format!(
            "    for (int k = 0; k < (int)({n} / (pc_tmap().box_words * 4)); k++) pc_tmap_copy(pc_tmap(), {mflat}, (int*)((char*){d} + {off}) + k * pc_tmap().box_words, pc_tmap_row(pc_tmap(), version, want) + (int)({off} / 4) + k * pc_tmap().box_words, {bar});  // cp.async.bulk.tensor: complete_tx({n}) on landing"
        ));
        self.w("  }");
    }

    /// The kernel's `PcTmapHost` and its accessor, before the kernel's namespace (`frame`).
    pub(super) fn tensormap_host(&mut self, symbol: &str) {
        let bw = box_words(self.p).unwrap_or(4);
        let nbuf = self.p.buffers.len().max(1);
        self.w(format!(
            "// The host's tensor map for this kernel (box {bw} words, {nbuf} descriptor slots per block): ok = 1 once the host encoded it."
        ));
        self.w(format!(
            "extern \"C\" __device__ PcTmapHost {} = {{{{0}}, 0ull, 0ull, 0, {bw}, {nbuf}, 0}};",
            tmap_symbol(symbol)
        ));
    }

    /// Inside the namespace: the accessor the roles use.
    pub(super) fn tensormap_accessor(&mut self, symbol: &str) {
        self.w(format!(
            "__device__ __forceinline__ const PcTmapHost& pc_tmap() {{ return {}; }}",
            tmap_symbol(symbol)
        ));
    }

    /// The shared state of the descriptors: the last edit's version per buffer, and each model
    /// thread's probe (a box and its mbarrier).
    pub(super) fn tensormap_shared(&mut self) {
        let bw = box_words(self.p).unwrap_or(4) as usize;
        let probe = bw.div_ceil(32) * 32;
        self.w(format!(
            "  int tmap_ver[{}];      // per buffer (descriptors): the version of its last edit",
            self.p.buffers.len().max(1)
        ));
        self.w(format!(
            "  alignas(128) int tmap_probe[NT][{probe}];  // per model thread: the box its descriptor probe lands"
        ));
        self.w("  u64 tmap_pbar[NT];       // ... and the probe's mbarrier");
        self.w("  int tmap_pphase[NT];     // ... and the phase it waits for next");
    }

    /// Thread 0's setup: each descriptor is the host's map (version 0), published to its slot and
    /// fenced for the tensormap proxy.
    pub(super) fn tensormap_init(&mut self) {
        let p = self.p;
        let nc = self.cluster;
        let local = p.buffers.len() / nc;
        self.w("    for (int i = 0; i < NT; i++) { pc_mbar_init(&s.tmap_pbar[i], 1); s.tmap_pphase[i] = 0; }");
        self.w("    for (int i = 0; i < (int)(sizeof(s.tmap_ver) / sizeof(int)); i++) s.tmap_ver[i] = 0;");
        self.w("    if (pc_tmap().ok) {  // each descriptor: the host's map (version 0), in its slot, fenced");
        for g in &p.buffer_groups[..p.buffer_groups.len() / nc] {
            if !p.buffers[g.base as usize].tensormap {
                continue;
            }
            let name = ident(self.declared(&g.name));
            let rank = if nc > 1 { format!("rank * {local} + ") } else { String::new() };
            let (at, n) = if g.is_array { ("[i]", g.len) } else { ("", 1) };
            self.w(format!(
                "      for (int i = 0; i < {n}; i++) {{ int* m = s.buf_{name}{at}; for (int k = 0; k < 32; k++) m[k] = ((const int*)pc_tmap().map)[k]; pc_tmap_edit(pc_tmap(), m, {rank}{} + i, 0); pc_tmap_fence(pc_tmap(), {rank}{} + i); }}",
                g.base, g.base
            ));
        }
        self.w("    }");
    }
}
