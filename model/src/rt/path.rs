//! The one replay: every consumer that re-executes actions through the semantics (trace files,
//! the minimizer, the fix loop, the search's retelling of a found path, GPU schedules and outcome
//! prefixes, a thread run alone) walks a [`Replay`], so that "is this action enabled here?" is
//! answered in one place and a path that does not replay is refused with the same words
//! everywhere.
//!
//! A replay is a cursor rather than a function over a fixed list because its consumers choose the
//! next action in different ways: from a recorded list, from the state (the fix loop maps a
//! recorded copy to the one in flight now), or from the enabled set (one complete execution).

use crate::ts::TransitionSystem;

/// Why an action could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The execution had already ended (undefined behaviour, or every thread finished with
    /// nothing left to land) at the previous step.
    Ended,
    /// The state does not enable the action (a blocked or finished thread, a copy that cannot
    /// land, an index past the state's threads or copies).
    NotEnabled,
}

/// An action that did not replay, at 0-based position `step` of the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotReplayed<A> {
    pub step: usize,
    pub action: A,
    pub refusal: Refusal,
}

impl<A: Copy> NotReplayed<A> {
    /// The refusal in words a user can check against the trace (1-based step numbers, as traces
    /// print them).
    pub fn describe(&self, who: impl FnOnce(A) -> String) -> String {
        match self.refusal {
            Refusal::Ended => format!(
                "step {} cannot be taken: the execution already ended at step {}",
                self.step + 1,
                self.step
            ),
            Refusal::NotEnabled => format!(
                "step {} cannot be taken: {} is not enabled there (blocked, finished, or not in flight)",
                self.step + 1,
                who(self.action)
            ),
        }
    }
}

/// One step taken by a [`Replay`]: the state it was taken from and what the semantics said.
/// `outcome.next` is the state the replay now stands in (a copy of it).
#[derive(Debug)]
pub struct Stepped<S> {
    pub before: S,
    pub outcome: crate::rt::Outcome<S>,
}

/// A cursor over one execution of a transition system: it stands in a state (or past the end of
/// the execution) and takes one enabled action at a time.
pub struct Replay<'t, T: TransitionSystem> {
    ts: &'t T,
    state: Option<T::State>,
    enabled: Vec<T::Action>,
    taken: usize,
}

impl<'t, T: TransitionSystem> Replay<'t, T> {
    /// A replay from the initial state. The initial outcome (its violations) is returned beside
    /// it: a system whose initial state already ends the execution gives a replay that refuses
    /// every action with [`Refusal::Ended`].
    pub fn start(ts: &'t T) -> (Self, crate::rt::Outcome<T::State>) {
        let init = ts.init();
        (Self::from_state(ts, init.next.clone()), init)
    }

    /// A replay standing in `state` (`None`: past the end of an execution).
    pub fn from_state(ts: &'t T, state: Option<T::State>) -> Self {
        let mut r = Replay {
            ts,
            state,
            enabled: Vec::new(),
            taken: 0,
        };
        r.refresh();
        r
    }

    fn refresh(&mut self) {
        self.enabled.clear();
        if let Some(s) = &self.state {
            self.ts.actions(s, &mut self.enabled);
        }
    }

    /// The state the replay stands in, `None` once the execution has ended.
    pub fn state(&self) -> Option<&T::State> {
        self.state.as_ref()
    }

    /// The state, taken out of the replay (which then stands past the end).
    pub fn into_state(self) -> Option<T::State> {
        self.state
    }

    /// The actions enabled in the current state, in the system's order (empty past the end).
    pub fn enabled(&self) -> &[T::Action] {
        &self.enabled
    }

    /// Actions taken so far.
    pub fn steps(&self) -> usize {
        self.taken
    }

    /// Whether `a` can be taken now, and if not, why.
    pub fn check(&self, a: T::Action) -> Result<(), NotReplayed<T::Action>> {
        let refusal = if self.state.is_none() {
            Refusal::Ended
        } else if !self.enabled.contains(&a) {
            Refusal::NotEnabled
        } else {
            return Ok(());
        };
        Err(NotReplayed {
            step: self.taken,
            action: a,
            refusal,
        })
    }

    /// Take `a` if it is enabled; the replay then stands in the state it leads to (or past the
    /// end, when the step ended the execution).
    pub fn take(&mut self, a: T::Action) -> Result<Stepped<T::State>, NotReplayed<T::Action>> {
        self.check(a)?;
        let before = self.state.take().expect("checked: the execution has not ended");
        let outcome = self.ts.step(&before, a);
        self.state = outcome.next.clone();
        self.taken += 1;
        self.refresh();
        Ok(Stepped { before, outcome })
    }

    /// Take every action of `actions` in order, calling `visit` after each; stops at the first
    /// that is not enabled.
    pub fn run(
        &mut self,
        actions: impl IntoIterator<Item = T::Action>,
        mut visit: impl FnMut(&Stepped<T::State>),
    ) -> Result<(), NotReplayed<T::Action>> {
        for a in actions {
            let s = self.take(a)?;
            visit(&s);
        }
        Ok(())
    }
}

/// The state reached by replaying `actions` from the initial state (`Ok(None)` when the last
/// step ended the execution), or the first action that does not replay.
pub fn replay_to<T: TransitionSystem>(ts: &T, actions: &[T::Action]) -> Result<Option<T::State>, NotReplayed<T::Action>> {
    let (mut r, _) = Replay::start(ts);
    r.run(actions.iter().copied(), |_| {})?;
    Ok(r.into_state())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SpecBuilder;
    use crate::rt::{Action, Model};

    /// One producer arrives on a count-1 barrier; one consumer waits for phase 0.
    fn handoff() -> Model {
        let spec = SpecBuilder::new("handoff")
            .barrier("ready count 1")
            .role("producer", 1, "arrive(ready)")
            .role("consumer", 1, "wait_parity(ready, 0)")
            .build()
            .expect("spec lowers");
        Model::new(spec.proto)
    }

    #[test]
    fn a_blocked_waiter_is_refused_until_the_phase_completes() {
        let m = handoff();
        let (mut r, init) = Replay::start(&m);
        assert!(init.violations.is_empty());
        let (producer, consumer) = (Action::Thread(0), Action::Thread(1));
        // The consumer's only step is its wait, which needs phase 0 of `ready` to complete.
        let refused = r.take(consumer).unwrap_err();
        assert_eq!(
            refused,
            NotReplayed {
                step: 0,
                action: consumer,
                refusal: Refusal::NotEnabled
            }
        );
        r.take(producer).expect("the producer arrives");
        assert!(r.check(producer).is_err(), "the producer has finished");
        r.take(consumer).expect("the wait returns once the phase completed");
        assert_eq!(r.steps(), 2);
    }

    #[test]
    fn a_replay_past_the_end_refuses_with_ended() {
        let m = handoff();
        let mut r = Replay::from_state(&m, None);
        let err = r.take(Action::Thread(0)).unwrap_err();
        assert_eq!(err.refusal, Refusal::Ended);
        assert!(err.describe(|a| format!("{a:?}")).contains("already ended"));
    }

    #[test]
    fn replay_to_returns_the_state_a_path_reaches() {
        let m = handoff();
        let (mut r, _) = Replay::start(&m);
        let first = r.enabled().to_vec();
        let a = first[0];
        let direct = m.step(&m.init().next.unwrap(), a).next;
        assert_eq!(replay_to(&m, &[a]).unwrap(), direct);
        assert!(replay_to(&m, &[Action::Thread(9)]).is_err());
        r.take(a).unwrap();
    }
}
