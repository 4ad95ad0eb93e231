//! The ends of every execution from a state: a memoised depth-first fold over a labelled
//! transition system.
//!
//! The breadth-first search (`bfs`) answers "which states, and which violations, are reachable".
//! The GPU comparison asks something else: which *observations* every execution makes, so that a
//! run on the hardware can be judged against all of them. Observations are path-dependent, so a
//! forward search keyed on (state, observations so far) stores every history (2.25 M pairs and
//! 100 s on specs/mistakes/diverged_warp_commit.phase). What happens next never depends on the
//! observations made, so this fold computes each state's *tails* (the observations from there to
//! an end of the execution) once, and prepends each step's label to its successor's tails
//! (26 K states and 16 s on the same spec).
//!
//! The system says what a step is ([`Futures::edges`]: an execution ending here, or a step with its
//! label into another state) and how a label goes in front of a tail; the fold owns the order of
//! exploration, the memo and the cycle handling.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::hash::Hash;
use std::rc::Rc;
use std::time::Instant;

/// A way out of a state: the execution ends here with a tail, or a step labelled `L` leads to `K`.
pub enum Edge<K, L, T> {
    Leaf(T),
    Step(L, K),
}

/// A system whose executions are folded into their tails.
pub trait Futures {
    /// What decides the future: equal keys have equal sets of tails.
    type Key: Clone + Eq + Hash;
    /// What one step observes.
    type Label;
    /// What an execution observes from a state to its end.
    type Tail: Clone + Eq + Hash;

    /// Every edge out of `k` (no edge at all: `k` has no future, which adds nothing).
    fn edges(&self, k: &Self::Key) -> Vec<Edge<Self::Key, Self::Label, Self::Tail>>;
    /// `head`, then `tail`.
    fn prepend(&self, head: &Self::Label, tail: &Self::Tail) -> Self::Tail;
}

/// Bounds of a fold.
#[derive(Clone, Copy, Debug)]
pub struct FoldLimits {
    /// Distinct keys explored (memoised plus on the stack).
    pub states: usize,
    pub deadline: Option<Instant>,
    /// Tails held in the memo, summed over keys: few states can still hold exponentially many.
    pub tails: usize,
}

/// Why a fold is incomplete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoldStop {
    /// `states` was reached: the tails are those of the explored part (a subset).
    States,
    /// The deadline passed: no tails are given.
    Seconds,
    /// `tails` was reached: no tails are given.
    Tails,
}

pub struct Folded<T> {
    /// The root's tails (empty when stopped by `Seconds` or `Tails`).
    pub tails: Vec<T>,
    /// Keys explored.
    pub explored: usize,
    pub stopped: Option<FoldStop>,
}

/// Every tail of `root`, depth-first and post-order: a key's tails are computed once all its
/// successors' are, and kept in a memo.
///
/// Loops (`while`) make the graph cyclic. A key on a cycle whose entry (an ancestor still on the
/// stack) is not finished has tails that lack the entry's: it is kept apart ("open", with the
/// lowest stack index it depends on) and not memoised, and dropped when that ancestor finishes,
/// whose tails then include everything the cycle can reach (Tarjan's lowlink). An edge back to a
/// key on the stack adds nothing of its own: the tails of the key it returns to are that key's.
pub fn fold<F: Futures>(sys: &F, root: F::Key, limits: FoldLimits) -> Folded<F::Tail> {
    type Memo<K, T> = HashMap<K, Rc<Vec<T>>>;
    let mut memo: Memo<F::Key, F::Tail> = HashMap::default();
    let nothing: Rc<Vec<F::Tail>> = Rc::new(Vec::new());
    let mut on_stack: HashMap<F::Key, usize> = HashMap::default();
    let mut open: HashMap<F::Key, (Rc<Vec<F::Tail>>, usize)> = HashMap::default();
    let mut lows: Vec<usize> = Vec::new();
    let mut stack: Vec<(F::Key, Vec<Edge<F::Key, F::Label, F::Tail>>, usize)> = Vec::new();
    let mut stopped = None;
    let mut iterations: u64 = 0;
    let mut held: usize = 0;
    let e0 = sys.edges(&root);
    on_stack.insert(root.clone(), 0);
    lows.push(0);
    stack.push((root, e0, 0));
    let tails = loop {
        // Past the deadline the fold stops at once: finishing the pending merges of a large stack
        // can take longer than the budget itself.
        iterations += 1;
        if iterations % 256 == 0 && limits.deadline.is_some_and(|d| Instant::now() >= d) {
            return Folded {
                tails: Vec::new(),
                explored: memo.len() + 1,
                stopped: Some(FoldStop::Seconds),
            };
        }
        let depth = stack.len();
        let (_, edges, next) = stack.last_mut().expect("the root is popped last");
        if *next < edges.len() {
            let i = *next;
            *next += 1;
            if let Edge::Step(_, key) = &edges[i] {
                let me = depth - 1;
                if let Some(&j) = on_stack.get(key) {
                    lows[me] = lows[me].min(j);
                } else if let Some((_, low)) = open.get(key) {
                    lows[me] = lows[me].min(*low);
                } else if !memo.contains_key(key) {
                    if memo.len() + depth >= limits.states {
                        stopped.get_or_insert(FoldStop::States);
                        continue;
                    }
                    let key = key.clone();
                    let e = sys.edges(&key);
                    on_stack.insert(key.clone(), depth);
                    lows.push(depth);
                    stack.push((key, e, 0));
                }
            }
            continue;
        }
        let (key, edges, _) = stack.pop().expect("non-empty");
        let me = stack.len();
        let low = lows.pop().expect("one per frame");
        on_stack.remove(&key);
        let mut tails: HashSet<F::Tail> = HashSet::default();
        for e in edges {
            match e {
                Edge::Leaf(t) => {
                    tails.insert(t);
                }
                Edge::Step(head, child) => {
                    let sub = memo.get(&child).or_else(|| open.get(&child).map(|(t, _)| t)).unwrap_or(&nothing);
                    for t in sub.iter() {
                        tails.insert(sys.prepend(&head, t));
                    }
                }
            }
        }
        held += tails.len();
        if held > limits.tails {
            return Folded {
                tails: Vec::new(),
                explored: memo.len() + 1,
                stopped: Some(FoldStop::Tails),
            };
        }
        let tails = Rc::new(tails.into_iter().collect::<Vec<_>>());
        if stack.is_empty() {
            break tails;
        }
        if let Some(parent) = lows.last_mut() {
            *parent = (*parent).min(low);
        }
        if low < me {
            open.insert(key, (tails, low));
        } else {
            // The entry of every cycle through it is finished: what depended on it is complete
            // in its own tails and must be computed afresh if reached again.
            open.retain(|_, (_, l)| *l < me);
            memo.insert(key, tails);
        }
    };
    Folded {
        tails: Rc::try_unwrap(tails).unwrap_or_else(|rc| (*rc).clone()),
        explored: memo.len() + 1,
        stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small graph: states are numbers, a step from `n` to `n + d` is labelled `d`, and the
    /// tails are the sums of the labels to an end.
    struct Steps {
        next: Vec<Vec<(u32, u32)>>,
    }

    impl Futures for Steps {
        type Key = u32;
        type Label = u32;
        type Tail = u32;
        fn edges(&self, k: &u32) -> Vec<Edge<u32, u32, u32>> {
            let out = &self.next[*k as usize];
            if out.is_empty() {
                return vec![Edge::Leaf(0)];
            }
            out.iter().map(|&(to, label)| Edge::Step(label, to)).collect()
        }
        fn prepend(&self, head: &u32, tail: &u32) -> u32 {
            head + tail
        }
    }

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort();
        v
    }

    const ROOMY: FoldLimits = FoldLimits {
        states: 1000,
        deadline: None,
        tails: 1000,
    };

    #[test]
    fn a_diamond_gives_each_path_sum_once() {
        // 0 -1-> 1 -10-> 3, 0 -2-> 2 -10-> 3, 3 ends.
        let g = Steps {
            next: vec![vec![(1, 1), (2, 2)], vec![(3, 10)], vec![(3, 10)], vec![]],
        };
        let f = fold(&g, 0, ROOMY);
        assert_eq!(sorted(f.tails), vec![11, 12]);
        assert_eq!(f.explored, 4);
        assert_eq!(f.stopped, None);
    }

    #[test]
    fn a_cycle_reaches_what_its_entry_reaches() {
        // 0 -> 1 -> 2 -> 1 (a loop) and 2 -5-> 3 ends; 1 -7-> 4 ends. Every tail through the loop
        // is counted once per distinct sum the loop-free paths give (the loop adds label 0).
        let g = Steps {
            next: vec![vec![(1, 0)], vec![(2, 0), (4, 7)], vec![(1, 0), (3, 5)], vec![], vec![]],
        };
        let from0 = fold(&g, 0, ROOMY);
        assert_eq!(sorted(from0.tails), vec![5, 7]);
        // The same from inside the cycle.
        let from2 = fold(&g, 2, ROOMY);
        assert_eq!(sorted(from2.tails), vec![5, 7]);
    }

    #[test]
    fn the_state_bound_keeps_what_was_explored_and_says_so() {
        let g = Steps {
            next: vec![vec![(1, 1), (2, 2)], vec![], vec![]],
        };
        let f = fold(&g, 0, FoldLimits { states: 2, ..ROOMY });
        assert_eq!(f.stopped, Some(FoldStop::States));
        assert_eq!(f.tails, vec![1]);
    }

    #[test]
    fn the_tail_bound_gives_nothing() {
        let g = Steps {
            next: vec![vec![(1, 1), (2, 2)], vec![], vec![]],
        };
        let f = fold(&g, 0, FoldLimits { tails: 2, ..ROOMY });
        assert_eq!(f.stopped, Some(FoldStop::Tails));
        assert!(f.tails.is_empty());
    }
}
