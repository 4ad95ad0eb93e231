//! Planted defects of the semantics, for the tests that show a broken model is caught.

/// Planted defects of the semantics. Each names the rule it breaks; tests assert that something
/// catches each one, so the checks that guard the model can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// Every blocking wait is treated as ready (caught by rule R-WAIT in the step).
    WaitAlwaysReady,
    /// Arrivals are not counted in the phase's `arrived` (caught by the self-check, I-ARRIVALS).
    ArrivalsUncounted,
    /// A wait is complete when its phase is older than the current one: no parity aliasing.
    NoParityAliasing,
    /// Completion functions never run.
    CompletionNeverRuns,
    /// arrive_and_drop arrives but leaves the expected count of later phases alone.
    DropIgnored,
    /// expect_tx is ignored (the tx-count only ever goes down).
    ExpectTxIgnored,
    /// A successful wait acquires no phase knowledge.
    NoKnowledgeTransfer,
    /// A successful wait acquires no history (no happens-before from the phase).
    WaitDoesNotAcquire,
    /// Copies land whole only: no partial landing when expect_tx under-counts.
    NoPartialLanding,
    /// PTX's missing-wait rule is not checked.
    MissingWaitUnchecked,
    /// A warp-batched commit arrives once per lane instead of once per converged group.
    CommitPerLane,
    /// A wait that has fallen two phases behind is not reported.
    StaleWaitUnchecked,
    /// The partial-order reduction expands only the first enabled thread step whenever two or
    /// more steps are enabled, ignoring every conflict (an unsound reduction: the library's
    /// expect lines and `tests/reductions.rs` must catch it).
    PorIgnoresConflicts,
    /// The reduction forgets that `elect`, `syncwarp` and a named barrier synchronise a warp's
    /// lanes (and that a lane's exit releases the others from them).
    PorForgetsWarpLanes,
    /// The reduction forgets that a named barrier is written by its arrivals.
    PorForgetsNamedBarriers,
    /// The cut at waits counts one arrival per agent of a uniform role instead of one per lane.
    PorCountsOneLanePerAgent,
    /// The reduction's fence flags are forgotten: a `fence_proxy_async` step writes none.
    PorFenceForgetsFlags,
    /// The cut at waits walks a `while` loop's body once: its jump back is taken as the thread's
    /// end, so the later rounds (and what follows the loop) are forgotten.
    PorWhileRunsOnce,
    /// The reduction forgets what `syncthreads` touches: that the arrival releasing the CTA may
    /// end the released threads (and the CTA with them, under a copy in flight), and the CTA's
    /// record that arrivals and exits write. Not in `FOOTPRINT_DEFECTS`: the cut at
    /// `syncthreads` alone keeps the kinds (no thread passes one while the seed stands still),
    /// which `tests/por_constructs.rs` checks with this defect planted.
    PorForgetsSyncThreads,
    /// The reduction forgets what a cp.async landing touches beyond its buffer: the barriers of
    /// the arrive-ons it fires, and the issuer's record it carries the landing into (and a
    /// thread's steps no longer read their own record, nor a wait the copies it lands). Not in
    /// `FOOTPRINT_DEFECTS`: the generated cp.async rings do not lose a kind to it (an order it
    /// drops is mostly reached through another); a protocol made for it in
    /// `tests/por_constructs.rs` does.
    PorForgetsCpAsyncLandings,
    /// The reduction forgets that a warp-batched `commit` reads its warp-mates' progress: their
    /// steps no longer touch the warp's record.
    PorForgetsCommitLanes,
    /// The reduction forgets that a remote operation reaches another CTA: its footprint names
    /// the own CTA's copies of its objects, and no CTA's liveness.
    PorForgetsClusterPeers,
    /// The reduction forgets that a step may complete the phase a thread stands waiting for at
    /// the end of its walk: no step or landing counts as releasing it. Not in
    /// `FOOTPRINT_DEFECTS`: the release is a margin (the released thread's wait conflicts at the
    /// next state), which `tests/por_constructs.rs` checks with this defect planted.
    PorCutWaitNeverReleased,
    /// The reduction takes every barrier's arrivals as commuting, whether or not one of them may
    /// complete the phase. Not in `FOOTPRINT_DEFECTS`: the generated protocols make single
    /// arrivals, which commute in the model even when one completes the phase; a protocol made
    /// for it in `tests/por_constructs.rs` loses a kind.
    PorArrivalsAlwaysQuiet,
    /// The cut at waits takes every CTA's `syncthreads` as held while the seed stands still, as
    /// if the seed's CTA were the only one: a walk of a thread of another CTA of a cluster stops
    /// at its own `syncthreads`, and what that thread does after it is forgotten. Not in
    /// `FOOTPRINT_DEFECTS`: in the generated protocols another route reaches the orders it drops
    /// (the peer's threads are seeds of their own earlier); a protocol made for it in
    /// `tests/por_constructs.rs` loses a kind.
    PorSyncThreadsHoldsEveryCta,
    /// The cut at waits counts the named barriers of a cluster as CTA 0's: every CTA's arrivals
    /// on barrier `id` are counted on CTA 0's, whose state says whether they commute.
    PorNamedBarriersOfCtaZero,
    /// The reduction forgets what tensor memory orders: no tensor-memory operation touches its
    /// CTA's tensor-memory record, and an MMA's landing writes its accumulator alone (not the
    /// operands whose reads it ends, the barriers of the commits it fires, the record, nor its
    /// issuer).
    PorForgetsTensorMemory,
    /// The reduction forgets that the landing of a copy from shared memory or of a tensor copy
    /// ends the read of its source or descriptor: the landing writes its buffer and barrier alone.
    /// Not in `FOOTPRINT_DEFECTS`: a write of the source unordered with the copy races in either
    /// order (with the read in flight, or with the read the landing records), as for the async
    /// proxy's reads, so the conflict is a margin; `tests/por_constructs.rs` checks that with
    /// this defect planted.
    PorForgetsSourceReads,
    /// The reduction forgets that once the seed has arrived on the cluster barrier the others'
    /// arrivals may complete the phase: their walks stop at every `cluster_wait` of the phase in
    /// progress, so what the released threads do next is left out. The cluster barrier's record
    /// commutes (its arrivals count in any order), so this walk is all that says so.
    PorClusterWaitNeverPasses,
}

impl Mutant {
    pub const ALL: [Mutant; 13] = [
        Mutant::WaitAlwaysReady,
        Mutant::ArrivalsUncounted,
        Mutant::NoParityAliasing,
        Mutant::CompletionNeverRuns,
        Mutant::DropIgnored,
        Mutant::ExpectTxIgnored,
        Mutant::NoKnowledgeTransfer,
        Mutant::WaitDoesNotAcquire,
        Mutant::NoPartialLanding,
        Mutant::MissingWaitUnchecked,
        Mutant::CommitPerLane,
        Mutant::StaleWaitUnchecked,
        Mutant::PorIgnoresConflicts,
    ];

    /// Footprints that each forget one construct's conflicts. Not in `ALL`: the library's expect
    /// lines need not notice them (most library specs are small enough to hide a lost
    /// interleaving); the reduced-versus-unreduced comparisons of `tests/por_constructs.rs` must.
    pub const FOOTPRINT_DEFECTS: [Mutant; 9] = [
        Mutant::PorForgetsWarpLanes,
        Mutant::PorForgetsNamedBarriers,
        Mutant::PorCountsOneLanePerAgent,
        Mutant::PorFenceForgetsFlags,
        Mutant::PorWhileRunsOnce,
        Mutant::PorForgetsCommitLanes,
        Mutant::PorForgetsClusterPeers,
        Mutant::PorNamedBarriersOfCtaZero,
        Mutant::PorForgetsTensorMemory,
    ];

    /// A defect of the partial-order reduction's footprints alone (the model's steps are right).
    pub fn is_footprint_defect(self) -> bool {
        matches!(
            self,
            Mutant::PorForgetsWarpLanes
                | Mutant::PorForgetsNamedBarriers
                | Mutant::PorCountsOneLanePerAgent
                | Mutant::PorFenceForgetsFlags
                | Mutant::PorWhileRunsOnce
                | Mutant::PorForgetsSyncThreads
                | Mutant::PorForgetsCpAsyncLandings
                | Mutant::PorForgetsCommitLanes
                | Mutant::PorForgetsClusterPeers
                | Mutant::PorCutWaitNeverReleased
                | Mutant::PorArrivalsAlwaysQuiet
                | Mutant::PorSyncThreadsHoldsEveryCta
                | Mutant::PorNamedBarriersOfCtaZero
                | Mutant::PorForgetsTensorMemory
                | Mutant::PorForgetsSourceReads
                | Mutant::PorClusterWaitNeverPasses
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Mutant::WaitAlwaysReady => "wait-always-ready",
            Mutant::ArrivalsUncounted => "arrivals-uncounted",
            Mutant::NoParityAliasing => "no-parity-aliasing",
            Mutant::CompletionNeverRuns => "completion-never-runs",
            Mutant::DropIgnored => "drop-ignored",
            Mutant::ExpectTxIgnored => "expect-tx-ignored",
            Mutant::NoKnowledgeTransfer => "no-knowledge-transfer",
            Mutant::WaitDoesNotAcquire => "wait-does-not-acquire",
            Mutant::NoPartialLanding => "no-partial-landing",
            Mutant::MissingWaitUnchecked => "missing-wait-unchecked",
            Mutant::CommitPerLane => "commit-per-lane",
            Mutant::StaleWaitUnchecked => "stale-wait-unchecked",
            Mutant::PorIgnoresConflicts => "por-ignores-conflicts",
            Mutant::PorForgetsWarpLanes => "por-forgets-warp-lanes",
            Mutant::PorForgetsNamedBarriers => "por-forgets-named-barriers",
            Mutant::PorCountsOneLanePerAgent => "por-counts-one-lane-per-agent",
            Mutant::PorFenceForgetsFlags => "por-fence-forgets-flags",
            Mutant::PorWhileRunsOnce => "por-while-runs-once",
            Mutant::PorForgetsSyncThreads => "por-forgets-syncthreads",
            Mutant::PorForgetsCpAsyncLandings => "por-forgets-cp-async-landings",
            Mutant::PorForgetsCommitLanes => "por-forgets-commit-lanes",
            Mutant::PorForgetsClusterPeers => "por-forgets-cluster-peers",
            Mutant::PorCutWaitNeverReleased => "por-cut-wait-never-released",
            Mutant::PorArrivalsAlwaysQuiet => "por-arrivals-always-quiet",
            Mutant::PorSyncThreadsHoldsEveryCta => "por-syncthreads-holds-every-cta",
            Mutant::PorNamedBarriersOfCtaZero => "por-named-barriers-of-cta-zero",
            Mutant::PorForgetsTensorMemory => "por-forgets-tensor-memory",
            Mutant::PorForgetsSourceReads => "por-forgets-source-reads",
            Mutant::PorClusterWaitNeverPasses => "por-cluster-wait-never-passes",
        }
    }
}
