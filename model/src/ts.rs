//! The one transition system every consumer of the semantics drives: the verifier's search, the
//! minimizer, trace replay and the GPU crate's outcome enumeration.
//!
//! The shape follows stateright's `Model` (init, enabled actions, next state, state properties),
//! extended with what an explicit-state engine needs to store states compactly: a canonical form
//! (symmetry, normalised clocks) and a packing into small integer components that the engine
//! interns. The engine itself (verifier/src/engine) knows nothing of barriers or threads.

use crate::rt::{Outcome, Violation};

/// A system of states and actions whose semantics are written once.
pub trait TransitionSystem: Sync {
    type State: Clone + Send + Sync;
    type Action: Copy + Eq + std::fmt::Debug + Send + Sync;

    /// The initial state, or the violations that stop the system before any step.
    fn init(&self) -> Outcome<Self::State>;
    /// The actions enabled in `s`, appended to `out` in a fixed order.
    fn actions(&self, s: &Self::State, out: &mut Vec<Self::Action>);
    /// Take one enabled action. `next: None` when the step ended the execution.
    fn step(&self, s: &Self::State, a: Self::Action) -> Outcome<Self::State>;
    /// `step`, given a state the caller no longer needs (an earlier successor) whose storage the
    /// successor may take over: the engine steps every action of a state, and allocating a fresh
    /// copy for each was a large part of its time.
    fn step_reusing(&self, s: &Self::State, a: Self::Action, spare: Option<Self::State>) -> Outcome<Self::State> {
        drop(spare);
        self.step(s, a)
    }
    /// `step`, given `copy`, a state equal to `s` that the successor may be written into
    /// (`Packed::restore` makes one from a successor without copying the whole state).
    fn step_on_copy(&self, s: &Self::State, a: Self::Action, copy: Self::State) -> Outcome<Self::State> {
        drop(copy);
        self.step(s, a)
    }
    /// Violations that are properties of a state rather than of a step (deadlock, stale waits).
    fn state_violations(&self, s: &Self::State, enabled: &[Self::Action]) -> Vec<Violation>;
    /// Nothing after this state is meaningful (the CTA has exited under an async copy): the
    /// search records its state violations and does not expand it.
    fn is_final(&self, s: &Self::State) -> bool;
    /// A persistent subset of `enabled` (the partial-order reduction, docs/model.md): actions
    /// such that no execution from `s` made only of other actions can touch what they touch.
    /// Appends it to `out` and returns `true`, or returns `false` to expand every enabled action
    /// (the default: no reduction). The engine adds the cycle proviso and falls back to the full
    /// set when a chosen step ends its execution.
    fn persistent(&self, _s: &Self::State, _enabled: &[Self::Action], _out: &mut Vec<Self::Action>) -> bool {
        false
    }
}

/// How the engine stores states: as a fixed number of components, each a short word sequence the
/// engine interns, so that the many states that share a thread's or a barrier's record share its
/// storage. `pack` and `unpack` must be inverse; `canonicalize` must map states that the search
/// may treat as one (the same up to a permutation of interchangeable threads, or up to renaming
/// clock epochs in an order-preserving way) to one representative, and must map every state to
/// one with exactly the same future up to that renaming.
pub trait Packed: TransitionSystem {
    /// The number of components of every state (fixed for one system).
    fn components(&self) -> usize;
    /// Append every component's words to `words`, in order, pushing the end of each (its index
    /// in `words` just past its last word) to `ends`.
    fn pack(&self, s: &Self::State, words: &mut Vec<u32>, ends: &mut Vec<u32>);
    /// Append the words of one component (`pack` is every component in order).
    fn pack_part(&self, s: &Self::State, part: usize, words: &mut Vec<u32>);
    /// Whether one component is equal in two states (so a successor may reuse its parent's).
    fn same_part(&self, a: &Self::State, b: &Self::State, part: usize) -> bool;
    /// Make `n` equal to `s` again, given the components in which they differ (every other one
    /// is equal, `same_part`), by copying only those; `false` when the system cannot (then `n`
    /// is left as it is). Successors differ from their parent in a component or two: restoring
    /// those is much cheaper than copying the parent again for the next step (`step_on_copy`).
    fn restore(&self, _n: &mut Self::State, _s: &Self::State, _changed: &[usize]) -> bool {
        false
    }
    /// Rebuild a state from its components, in the order `pack` emitted them.
    fn unpack(&self, parts: &[&[u32]]) -> Self::State;
    /// `unpack` into `s`, a state of this system the caller no longer needs, whose storage it
    /// may reuse (the engine unpacks every state it expands).
    fn unpack_into(&self, parts: &[&[u32]], s: &mut Self::State) {
        *s = self.unpack(parts);
    }
    /// Put `s` into its canonical form. `symmetry: false` only normalises what carries no meaning
    /// (absolute clock epochs). `perm` receives the renaming applied: position `new` of the result
    /// holds what position `perm[new]` held (the engine composes these along a path to turn the
    /// canonical trace back into the concrete one).
    fn canonicalize(&self, s: &mut Self::State, symmetry: bool, perm: &mut Vec<u32>);
    /// An action of a canonical state as the concrete state it stands for names it, given the
    /// composed renaming `sigma` (canonical position -> concrete position).
    fn rename(&self, a: Self::Action, sigma: &[u32]) -> Self::Action;
    /// Whether a symmetry reduction applies at all (some class has two or more members).
    fn has_symmetry(&self) -> bool;
}

impl TransitionSystem for crate::rt::Model {
    type State = crate::rt::state::State;
    type Action = crate::rt::Action;

    fn init(&self) -> Outcome {
        crate::rt::Model::init(self)
    }

    fn actions(&self, s: &Self::State, out: &mut Vec<Self::Action>) {
        crate::rt::Model::actions(self, s, out)
    }

    fn step(&self, s: &Self::State, a: Self::Action) -> Outcome {
        crate::rt::Model::step(self, s, a)
    }

    fn step_reusing(&self, s: &Self::State, a: Self::Action, spare: Option<Self::State>) -> Outcome {
        crate::rt::Model::step_reusing(self, s, a, spare)
    }

    fn step_on_copy(&self, s: &Self::State, a: Self::Action, copy: Self::State) -> Outcome {
        crate::rt::Model::step_on_copy(self, s, a, copy)
    }

    fn state_violations(&self, s: &Self::State, enabled: &[Self::Action]) -> Vec<Violation> {
        crate::rt::Model::state_violations(self, s, enabled)
    }

    fn is_final(&self, s: &Self::State) -> bool {
        s.all_done() && !s.copies.is_empty()
    }

    fn persistent(&self, s: &Self::State, enabled: &[Self::Action], out: &mut Vec<Self::Action>) -> bool {
        self.por.persistent(self, s, enabled, out)
    }
}

impl Packed for crate::rt::Model {
    fn components(&self) -> usize {
        self.component_count()
    }

    fn pack(&self, s: &Self::State, words: &mut Vec<u32>, ends: &mut Vec<u32>) {
        self.pack_state(s, words, ends)
    }

    fn pack_part(&self, s: &Self::State, part: usize, words: &mut Vec<u32>) {
        self.pack_part(s, part, words)
    }

    fn same_part(&self, a: &Self::State, b: &Self::State, part: usize) -> bool {
        self.same_part(a, b, part)
    }

    fn unpack(&self, parts: &[&[u32]]) -> Self::State {
        self.unpack_state(parts)
    }

    fn unpack_into(&self, parts: &[&[u32]], s: &mut Self::State) {
        crate::rt::Model::unpack_into(self, parts, s)
    }

    fn restore(&self, n: &mut Self::State, s: &Self::State, changed: &[usize]) -> bool {
        crate::rt::Model::restore(self, n, s, changed);
        true
    }

    fn canonicalize(&self, s: &mut Self::State, symmetry: bool, perm: &mut Vec<u32>) {
        self.canonical_form(s, symmetry, perm)
    }

    fn rename(&self, a: Self::Action, sigma: &[u32]) -> Self::Action {
        crate::rt::symmetry::rename(a, sigma)
    }

    fn has_symmetry(&self) -> bool {
        !self.symmetry.is_empty()
    }
}
