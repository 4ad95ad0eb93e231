//! The warp and the CTA as execution barriers: `syncthreads`, `syncwarp` (with a mask), `elect()`,
//! and the warp-batched `commit` of converged lanes.

/// Neither path has left the other: one is a prefix of the other.
pub fn paths_compatible(a: &[u32], b: &[u32]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}
