//! Serializability checks of recorded transaction histories, for tests.
//!
//! A test runs transactions concurrently, records what each committed one read and wrote, and
//! derives the versions of every object from what the objects themselves record (a register
//! that names its writer and the writer it replaced; a list that only grows). From those it
//! adds to a [`DependencyGraph`] the three kinds of edges of Adya's direct serialization
//! graph: write-write (a version to the next), write-read (a version's writer to its
//! readers) and read-write (a reader to the writer of the next version, an anti-dependency).
//! A history is serializable if and only if that graph has no cycle; [`DependencyGraph::cycle`]
//! finds one, to print.
//!
//! [`pauses`] widens the windows such histories need: named points where a test stops a
//! thread, or makes it pause at random.

#![forbid(unsafe_code)]

pub mod pauses;

use std::collections::{BTreeMap, BTreeSet};

/// Transactions (by id) and the order their dependencies impose.
#[derive(Debug, Default)]
pub struct DependencyGraph {
    successors: BTreeMap<i64, BTreeSet<i64>>,
}

impl DependencyGraph {
    pub fn new() -> DependencyGraph {
        DependencyGraph::default()
    }

    /// Adds transaction `id` (also added by any edge that names it).
    pub fn node(&mut self, id: i64) {
        self.successors.entry(id).or_default();
    }

    /// `from` must come before `to` in any equivalent serial order. An edge from a
    /// transaction to itself says nothing and is left out.
    pub fn edge(&mut self, from: i64, to: i64) {
        self.node(to);
        if from != to {
            self.successors.entry(from).or_default().insert(to);
        }
    }

    /// A cycle, in the edges' direction, if there is one.
    pub fn cycle(&self) -> Option<Vec<i64>> {
        let left = self.on_or_after_cycles();
        let first = *left.iter().next()?;
        // Every node left has a predecessor left, so walking from one to a predecessor, again
        // and again, comes back to a node already passed.
        let mut walk = vec![first];
        loop {
            let at = *walk.last().expect("the walk is never empty");
            let predecessor = self
                .successors
                .iter()
                .find(|(from, to)| left.contains(from) && to.contains(&at))
                .map(|(&from, _)| from)
                .expect("every node left has a predecessor left");
            if let Some(start) = walk.iter().position(|&n| n == predecessor) {
                let mut cycle = walk.split_off(start);
                cycle.reverse();
                return Some(cycle);
            }
            walk.push(predecessor);
        }
    }

    /// The nodes Kahn's algorithm cannot remove: those on a cycle or after one.
    fn on_or_after_cycles(&self) -> BTreeSet<i64> {
        let mut indegree: BTreeMap<i64, usize> = self.successors.keys().map(|&n| (n, 0)).collect();
        for to in self.successors.values().flatten() {
            *indegree.entry(*to).or_default() += 1;
        }
        let mut ready: Vec<i64> = indegree
            .iter()
            .filter(|(_, &d)| d == 0)
            .map(|(&n, _)| n)
            .collect();
        while let Some(n) = ready.pop() {
            indegree.remove(&n);
            for to in self.successors.get(&n).into_iter().flatten() {
                let d = indegree.get_mut(to).expect("a node not yet removed");
                *d -= 1;
                if *d == 0 {
                    ready.push(*to);
                }
            }
        }
        indegree.into_keys().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_without_cycles_has_none() {
        let mut graph = DependencyGraph::new();
        graph.edge(1, 2);
        graph.edge(2, 3);
        graph.edge(1, 3);
        graph.edge(3, 3); // left out
        graph.node(4);
        assert_eq!(graph.cycle(), None);
    }

    #[test]
    fn a_cycle_is_found_and_given_in_edge_order() {
        let mut graph = DependencyGraph::new();
        // 1 → 2 → 3 → 1, with a tail 3 → 4 → 5 after it and a head 0 → 1 before it.
        for (from, to) in [(0, 1), (1, 2), (2, 3), (3, 1), (3, 4), (4, 5)] {
            graph.edge(from, to);
        }
        let cycle = graph.cycle().expect("a cycle");
        assert_eq!(cycle.len(), 3);
        let start = cycle.iter().position(|&n| n == 1).expect("1 is on it");
        let rotated: Vec<i64> = cycle[start..]
            .iter()
            .chain(&cycle[..start])
            .copied()
            .collect();
        assert_eq!(rotated, vec![1, 2, 3]);
    }

    #[test]
    fn a_two_node_cycle_is_found() {
        let mut graph = DependencyGraph::new();
        graph.edge(7, 9);
        graph.edge(9, 7);
        let mut cycle = graph.cycle().expect("a cycle");
        cycle.sort();
        assert_eq!(cycle, vec![7, 9]);
    }
}
