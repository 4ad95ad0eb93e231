//! Blackwell (sm100) statements: tcgen05 MMA and commit, tensor memory, cluster launch control.
//! The H200 (sm_90) has none of them, so a spec using one is not expressible here; the report
//! says so by the statement's name and line (the model alone checks it).

use phasecheck_model::program::ir::*;

/// Why the kernel cannot emit this operation, if it is a Blackwell one.
pub(super) fn blackwell_inexpressible(op: &IOp) -> Option<String> {
    let op = match op {
        IOp::Remote { op, .. } => op,
        op => op,
    };
    let IOp::Tc(tc) = op else { return None };
    let what = match tc {
        TcOp::Mma { .. } | TcOp::Commit { .. } => "a tcgen05 MMA and its commit run on sm_100's tensor cores",
        TcOp::Alloc { .. } | TcOp::Dealloc { .. } | TcOp::Relinquish | TcOp::Ld { .. } | TcOp::WaitLd { .. } => {
            "tensor memory exists only on sm_100"
        }
        TcOp::ClcTryCancel { .. } => "cluster launch control (clusterlaunchcontrol.try_cancel) exists only on sm_100",
    };
    Some(format!(
        "{} is not expressible on sm_90: {what}; the H200 has none (checked by the model only)",
        tc.name()
    ))
}
