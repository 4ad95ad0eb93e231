//! Asynchronous copies into shared memory that complete on an mbarrier: the TMA-style bulk copy
//! (`copy_async`, whole buffer or part of it; libcu++ `memcpy_async` where the spec pairs it with
//! its expect_tx), and sm_80 `cp.async` with its mbarrier arrive-on. Every copy writes a version
//! stamp (the spec's `version =`, else the buffer's write count) read from the host's copy
//! source, one row per version.

use super::{Backend, Gen};
use phasecheck_model::program::ir::*;

impl Gen<'_> {
    /// Why the kernel cannot express a copy, if it cannot: a copy must complete on a hardware
    /// mbarrier, a bulk copy moves 16-byte aligned multiples of 16 bytes, cp.async 4, 8 or 16.
    pub(super) fn copy_inexpressible(&self, op: &IOp) -> Option<String> {
        let p = self.p;
        let on_software =
            "async copies complete on a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++";
        match op {
            IOp::Copy(CopyOp::Copy { buf, bar, bytes, .. }) => {
                if self.is_software(bar) {
                    return Some(on_software.into());
                }
                let size = p.buffers[p.buffer_groups[buf.group as usize].base as usize].bytes;
                let n = match bytes {
                    None => Some(size),
                    Some(IExpr::Const(n)) => Some(*n),
                    Some(_) => None,
                };
                match n {
                    Some(n) if n % 16 != 0 || n <= 0 => Some(format!(
                        "a bulk copy of {n} bytes: cp.async.bulk moves a positive multiple of 16 bytes"
                    )),
                    _ => None,
                }
            }
            IOp::Copy(CopyOp::CpAsyncArrive { bar, .. }) if self.is_software(bar) => Some(
                "cp.async.mbarrier.arrive needs a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++"
                    .into(),
            ),
            IOp::Copy(CopyOp::CpAsync {
                bytes: IExpr::Const(n), ..
            }) if ![4, 8, 16].contains(n) => Some(format!("a cp.async of {n} bytes: cp.async moves 4, 8 or 16 bytes")),
            IOp::Copy(CopyOp::CpAsyncWait { n: Some(n) }) if !matches!(n, IExpr::Const(0..=7)) => {
                Some("cp.async.wait_group takes its group count as an immediate, 0 to 7".into())
            }
            IOp::Copy(CopyOp::StAsync { bar, .. }) if self.is_software(bar) => Some(on_software.into()),
            IOp::Copy(CopyOp::StAsync {
                bytes: IExpr::Const(n), ..
            }) if ![4, 8, 16].contains(n) => Some(format!("an st.async of {n} bytes: st.async stores 4, 8 or 16 bytes")),
            IOp::Copy(CopyOp::CopyPart { bar, offset, bytes, .. }) => {
                if self.is_software(bar) {
                    return Some(on_software.into());
                }
                [offset, bytes].into_iter().find_map(|e| match e {
                    IExpr::Const(n) if n % 16 != 0 || *n < 0 => Some(format!(
                        "a bulk copy at offset/size {n}: cp.async.bulk needs 16-byte aligned offsets and sizes"
                    )),
                    _ => None,
                })
            }
            _ => None,
        }
    }

    /// A copy of the spec (`CopyOp::Copy`, `CopyPart`, `CpAsync`, `CpAsyncArrive`).
    pub(super) fn copy_op(&mut self, code: &Code, op: &CopyOp) {
        let libcu = self.backend == Backend::Libcu;
        match op {
            CopyOp::CopyFrom { .. } => unreachable!("a copy from shared memory always names its CTA (`cta = R`): cluster.rs emits it"),
            CopyOp::Tensor { map, expect, copy } => self.tensor_copy(code, map, expect.as_ref(), copy),
            CopyOp::Copy { buf, bar, bytes, version } => {
                let (b, chk1) = self.place(code, bar, true);
                let (d, chk2) = self.place(code, buf, false);
                for c in [chk1, chk2].into_iter().flatten() {
                    self.w(format!("  {c}"));
                }
                let n = bytes
                    .as_ref()
                    .map(|e| self.expr(code, e))
                    .unwrap_or_else(|| format!("(i64)sizeof({d})"));
                let bytes_decl = bytes.is_some();
                let flat = self.flat_buf(code, buf);
                let v = match version {
                    Some(e) => self.expr(code, e),
                    // The default version: the number of earlier writes (copies count when issued).
                    None => format!("(i64)s.writes[{flat}]"),
                };
                if bytes_decl {
                    self.w(format!(
                        "  if ({n} % 16 != 0 || {n} <= 0 || {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                    ));
                }
                self.w(format!("  {{ {}", self.version_stmt(&flat, &v, version.is_some())));
                let v = "version";
                if libcu {
                    self.w(format!(
                        "  cuda::device::memcpy_async_tx({d}, pc_src_row(th, {v}), cuda::aligned_size_t<16>((size_t){n}), {b});  // complete_tx({n}) on landing"
                    ));
                } else {
                    self.w(format!(
                        "  pc_bulk_copy({d}, pc_src_row(th, {v}), (int){n}, &{b});  // complete_tx({n}) on landing"
                    ));
                }
                self.w("  }");
            }
            CopyOp::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                let d = self.placed(code, buf, false, "  ");
                let (off, n, flat, v) = self.part_of(code, buf, offset, bytes, version.as_ref());
                self.w(format!(
                    "  if (({n} != 4 && {n} != 8 && {n} != 16) || {off} < 0 || {off} % {n} != 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!("  {{ {}", self.version_stmt(&flat, &v, version.is_some())));
                self.w(format!(
                    "  pc_cp_async((int*)((char*){d} + {off}), (const int*)((const char*)pc_src_row(th, version) + {off}), (int){n});  // lands asynchronously; no barrier tracks it yet"
                ));
                self.w("  }");
            }
            // Groups of plain cp.async copies: the thread's own copies from global memory, which
            // land without any other thread, so the waits cannot hang and need no time bound.
            CopyOp::CpAsyncCommitGroup => self.w("  asm volatile(\"cp.async.commit_group;\" ::: \"memory\");"),
            CopyOp::CpAsyncWait { n: Some(n) } => {
                let IExpr::Const(k) = n else {
                    unreachable!("rejected by copy_inexpressible")
                };
                self.w(format!("  asm volatile(\"cp.async.wait_group {k};\" ::: \"memory\");"));
            }
            CopyOp::CpAsyncWait { n: None } => self.w("  asm volatile(\"cp.async.wait_all;\" ::: \"memory\");"),
            CopyOp::CpAsyncArrive { bar, noinc } => {
                let b = self.placed(code, bar, true, "  ");
                let native = if libcu { self.native(&b) } else { format!("&{b}") };
                self.w(format!(
                    "  pc_cp_async_arrive({native}, {noinc});  // arrive-on once this thread's prior cp.async copies land"
                ));
            }
            CopyOp::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => self.st_async(code, buf, bar, offset, bytes, version, None),
            CopyOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                let (b, chk1) = self.place(code, bar, true);
                let (d, chk2) = self.place(code, buf, false);
                for c in [chk1, chk2].into_iter().flatten() {
                    self.w(format!("  {c}"));
                }
                let (off, n, flat, v) = self.part_of(code, buf, offset, bytes, version.as_ref());
                self.w(format!(
                    "  if ({n} % 16 != 0 || {n} <= 0 || {off} % 16 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!("  {{ {}", self.version_stmt(&flat, &v, version.is_some())));
                let dst = format!("(int*)((char*){d} + {off})");
                let src = format!("(const int*)((const char*)pc_src_row(th, version) + {off})");
                if libcu {
                    self.w(format!(
                        "  cuda::device::memcpy_async_tx({dst}, {src}, cuda::aligned_size_t<16>((size_t){n}), {b});  // complete_tx({n}) on landing"
                    ));
                } else {
                    self.w(format!(
                        "  pc_bulk_copy({dst}, {src}, (int){n}, &{b});  // complete_tx({n}) on landing"
                    ));
                }
                self.w("  }");
            }
        }
    }

    /// `st_async`: the version's stamp loaded into registers and stored with `st.async`, completing
    /// its bytes on the barrier; `peer` is the C++ of the target CTA's rank for `cta = R` (the
    /// buffer and barrier are then the peer's, reached through `mapa`), `None` for the own CTA.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn st_async(
        &mut self,
        code: &Code,
        buf: &Ref,
        bar: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        version: &IExpr,
        peer: Option<&str>,
    ) {
        let (b, chk1) = self.place(code, bar, true);
        let (d, chk2) = self.place(code, buf, false);
        for c in [chk1, chk2].into_iter().flatten() {
            self.w(format!("  {c}"));
        }
        let (off, n, flat, v) = self.part_of(code, buf, offset, bytes, Some(version));
        self.w(format!(
            "  if (({n} != 4 && {n} != 8 && {n} != 16) || {off} < 0 || {off} % {n} != 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        let (count, rank, what) = match peer {
            None => (format!("atomicAdd(&s.writes[{flat}], 1);"), "-1".to_string(), ""),
            Some(r) => (
                format!("atomicAdd(&((Shared*)pc_mapa((const void*)&s, (int){r}))->writes[{flat}], 1);"),
                format!("(int){r}"),
                " of the peer CTA",
            ),
        };
        self.w(format!("  {{ i64 version = {v}; if (!pc_version_ok(th, version)) return; {count}"));
        self.w(format!(
            "  pc_st_async((int*)((char*){d} + {off}), (const int*)((const char*)pc_src_row(th, version) + {off}), (int){n}, {}, {rank});  // st.async: complete_tx({n}) on the barrier{what} when it lands",
            self.native(&b)
        ));
        self.w("  }");
    }

    pub(super) fn memcpy_async(&mut self, code: &Code, copy: &IOp, _expect: &Instr, step: bool) {
        let IOp::Copy(CopyOp::Copy { buf, bar, bytes, version }) = copy else {
            unreachable!()
        };
        let (b, chk1) = self.place(code, bar, true);
        let (d, chk2) = self.place(code, buf, false);
        for c in [chk1, chk2].into_iter().flatten() {
            self.w(format!("  {c}"));
        }
        let n = bytes.as_ref().map(|e| self.expr(code, e)).unwrap_or_else(|| "0".into());
        let flat = self.flat_buf(code, buf);
        let v = version
            .as_ref()
            .map(|e| self.expr(code, e))
            .unwrap_or_else(|| format!("(i64)s.writes[{flat}]"));
        self.w(format!(
            "  if ({n} % 16 != 0 || {n} <= 0 || {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        let every_lane = if self.lanes { ": on every lane" } else { "" };
        self.w(format!(
            "  {{ {} const int* from = pc_src_row(th, version);\n    cuda::memcpy_async({d}, from, cuda::aligned_size_t<16>((size_t){n}), {b});  // issues the bulk copy, then expect_tx({n}){every_lane}\n  }}",
            self.version_stmt(&flat, &v, version.is_some())
        ));
        if step {
            // Two model steps (copy, expect_tx) done by one call: take both turns.
            self.w(format!("  {}", self.turn_end()));
            self.w(format!(
                "  {}  // the expect_tx step (already done inside memcpy_async)",
                self.turn_begin()
            ));
            self.w(format!("  {}", self.turn_end()));
        }
    }

    /// A copy into part of a buffer (`cp_async`, `copy_async` with a range): the C++ of its
    /// offset and bytes, the buffer's flat index, and the version it writes (the buffer's write
    /// count when the spec names none).
    pub(super) fn part_of(
        &self,
        code: &Code,
        buf: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        version: Option<&IExpr>,
    ) -> (String, String, String, String) {
        let (off, n) = (self.expr(code, offset), self.expr(code, bytes));
        let flat = self.flat_buf(code, buf);
        let v = match version {
            Some(e) => self.expr(code, e),
            None => format!("(i64)s.writes[{flat}]"),
        };
        (off, n, flat, v)
    }

    /// `i64 version = ...;` and the count of writes issued to buffer `flat`, which goes up
    /// atomically: an agent's lanes each write once (the model copies once per lane, each with the
    /// next default version), threads that race on a buffer write it together, and a remote write
    /// bumps the peer CTA's count while the peer's own threads may bump it too.
    pub(super) fn version_stmt(&self, flat: &str, v: &str, explicit: bool) -> String {
        let ok = "if (!pc_version_ok(th, version)) return;";
        if explicit {
            format!("i64 version = {v}; {ok} atomicAdd(&s.writes[{flat}], 1);")
        } else {
            format!("i64 version = (i64)atomicAdd(&s.writes[{flat}], 1); {ok}")
        }
    }
}
