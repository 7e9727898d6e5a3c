//! Network splits: which directed links a network fault acts on, drawn from
//! the run's seed. Pure; the nemesis sets their rule in the proxy
//! (proxy/: blackhole, or delay for `delay`) and heals them after.
//!
//! | split | sides | cut |
//! |---|---|---|
//! | `partition` | random halves: a majority and a minority | every link between the halves, both ways |
//! | `bridge` | two halves and one middle node (Jepsen's bridge) | every link between the halves; the middle node sees everyone |
//! | `one-way` | random halves | every link from one half to the other, one direction only (drawn): that half is not heard, or does not hear |
//! | `isolate` | one node (the leader of a partition) and the rest | every link of that node, both ways |
//! | every link | all nodes | every link (the `delay` fault slows them all) |

use serde::Serialize;

use crate::proxy::{Link, NodeId};
use crate::rng::Rng;

/// A split: its sides (for the log) and the links it cuts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Split {
    /// The groups of nodes that still hear each other inside.
    pub sides: Vec<Vec<NodeId>>,
    /// The links to blackhole, `(from, to)`: bytes from `from` do not
    /// reach `to`.
    pub cut: Vec<Link>,
}

/// `nodes` in a seeded order.
fn shuffled(rng: &mut Rng, nodes: &[NodeId]) -> Vec<NodeId> {
    let mut v = nodes.to_vec();
    for i in (1..v.len()).rev() {
        let j = rng.range(0, i as u64) as usize;
        v.swap(i, j);
    }
    v
}

/// Every link from a node of `a` to a node of `b`.
fn links(a: &[NodeId], b: &[NodeId]) -> Vec<Link> {
    a.iter().flat_map(|&x| b.iter().map(move |&y| (x, y))).collect()
}

/// Both directions between `a` and `b`.
fn both_ways(a: &[NodeId], b: &[NodeId]) -> Vec<Link> {
    let mut cut = links(a, b);
    cut.extend(links(b, a));
    cut
}

/// A majority (first) and a minority, drawn.
fn halves(rng: &mut Rng, nodes: &[NodeId]) -> (Vec<NodeId>, Vec<NodeId>) {
    let mut v = shuffled(rng, nodes);
    let minority = v.split_off(nodes.len() / 2 + 1);
    (v, minority)
}

/// Random halves, every link between them cut both ways.
pub fn partition(rng: &mut Rng, nodes: &[NodeId]) -> Split {
    let (major, minor) = halves(rng, nodes);
    Split {
        cut: both_ways(&major, &minor),
        sides: vec![major, minor],
    }
}

/// Two halves that cannot hear each other, and a middle node both hear
/// (for 3 nodes: two nodes cut from each other, each still linked to the
/// third). `None` with fewer than 3 nodes.
pub fn bridge(rng: &mut Rng, nodes: &[NodeId]) -> Option<Split> {
    if nodes.len() < 3 {
        return None;
    }
    let mut v = shuffled(rng, nodes);
    let middle = v.pop()?;
    let right = v.split_off(v.len() / 2);
    let left = v;
    Some(Split {
        cut: both_ways(&left, &right),
        sides: vec![left, vec![middle], right],
    })
}

/// Random halves, the links from one to the other cut one way only: which
/// half goes unheard is drawn.
pub fn one_way(rng: &mut Rng, nodes: &[NodeId]) -> Split {
    let (major, minor) = halves(rng, nodes);
    let cut = if rng.chance(50) {
        links(&minor, &major)
    } else {
        links(&major, &minor)
    };
    Split {
        sides: vec![major, minor],
        cut,
    }
}

/// `node` cut from every other node, both ways.
pub fn isolate(node: NodeId, nodes: &[NodeId]) -> Split {
    let rest: Vec<NodeId> = nodes.iter().copied().filter(|&n| n != node).collect();
    Split {
        cut: both_ways(&[node], &rest),
        sides: vec![vec![node], rest],
    }
}

/// Every link between two of `nodes`, both ways.
pub fn every_link(nodes: &[NodeId]) -> Split {
    Split {
        cut: links(nodes, nodes).into_iter().filter(|(a, b)| a != b).collect(),
        sides: vec![nodes.to_vec()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const FIVE: [NodeId; 5] = [1, 2, 3, 4, 5];

    fn set(links: &[Link]) -> BTreeSet<Link> {
        links.iter().copied().collect()
    }

    #[test]
    fn a_seed_draws_the_same_splits() {
        for seed in 0..20 {
            let draw = |seed| {
                let mut r = Rng::fork(seed, 1);
                (
                    partition(&mut r, &FIVE),
                    bridge(&mut r, &FIVE),
                    one_way(&mut r, &[1, 2, 3]),
                )
            };
            assert_eq!(draw(seed), draw(seed));
        }
        // And the draws vary with the seed.
        let sides: BTreeSet<Vec<NodeId>> = (0..20)
            .map(|s| partition(&mut Rng::fork(s, 1), &[1, 2, 3]).sides[1].clone())
            .collect();
        assert_eq!(sides.len(), 3, "every node is the minority for some seed");
    }

    #[test]
    fn a_partition_cuts_a_majority_from_a_minority_both_ways() {
        for (seed, nodes) in (0..50).zip([&[1, 2, 3][..], &FIVE[..]].iter().cycle()) {
            let s = partition(&mut Rng::fork(seed, 1), nodes);
            let (major, minor) = (&s.sides[0], &s.sides[1]);
            assert_eq!(major.len(), nodes.len() / 2 + 1);
            assert_eq!(major.len() + minor.len(), nodes.len());
            let mut want = BTreeSet::new();
            for &a in major {
                for &b in minor {
                    want.insert((a, b));
                    want.insert((b, a));
                }
            }
            assert_eq!(set(&s.cut), want);
        }
    }

    #[test]
    fn a_bridge_leaves_the_middle_node_linked_to_both_halves() {
        for seed in 0..50 {
            for nodes in [&[1, 2, 3][..], &FIVE[..]] {
                let s = bridge(&mut Rng::fork(seed, 1), nodes).unwrap();
                let (left, middle, right) = (&s.sides[0], s.sides[1][0], &s.sides[2]);
                assert_eq!(left.len() + 1 + right.len(), nodes.len());
                assert!(!left.is_empty() && !right.is_empty());
                assert!(s.cut.iter().all(|&(a, b)| a != middle && b != middle));
                for &a in left {
                    for &b in right {
                        assert!(s.cut.contains(&(a, b)) && s.cut.contains(&(b, a)));
                    }
                }
                assert_eq!(s.cut.len(), 2 * left.len() * right.len());
            }
        }
        assert_eq!(bridge(&mut Rng::fork(1, 1), &[1, 2]), None);
        // 3 nodes, seed 7: the same bridge every time.
        let s = bridge(&mut Rng::fork(7, 1), &[1, 2, 3]).unwrap();
        assert_eq!(s, bridge(&mut Rng::fork(7, 1), &[1, 2, 3]).unwrap());
    }

    #[test]
    fn a_one_way_drop_cuts_one_direction_only() {
        let mut directions = BTreeSet::new();
        for seed in 0..50 {
            let s = one_way(&mut Rng::fork(seed, 1), &[1, 2, 3]);
            let (major, minor) = (&s.sides[0], &s.sides[1]);
            assert_eq!(s.cut.len(), major.len() * minor.len());
            for &(a, b) in &s.cut {
                assert!(!s.cut.contains(&(b, a)), "both ways cut");
            }
            directions.insert(minor.contains(&s.cut[0].0));
        }
        assert_eq!(directions.len(), 2, "both directions are drawn");
    }

    #[test]
    fn every_link_is_every_ordered_pair_of_two_nodes() {
        let s = every_link(&[1, 2, 3]);
        assert_eq!(
            set(&s.cut),
            set(&[(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)])
        );
    }

    #[test]
    fn isolating_a_node_cuts_all_its_links() {
        let s = isolate(2, &[1, 2, 3]);
        assert_eq!(set(&s.cut), set(&[(2, 1), (1, 2), (2, 3), (3, 2)]));
        assert_eq!(s.sides, vec![vec![2], vec![1, 3]]);
    }
}
