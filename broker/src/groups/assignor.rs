//! Sticky partition assignment for consumer groups.
//!
//! Given the partitions and the current assignment, every rebalance:
//! 1. sets quotas: with P partitions and N members, `P mod N` members may
//!    hold `ceil(P/N)`, the rest `floor(P/N)`; the larger quotas go to the
//!    members that hold the most valid partitions now (ties by member id),
//!    which maximizes what can stay put;
//! 2. lets each member keep its current partitions that still exist, up to
//!    its quota (lowest partitions first);
//! 3. hands every partition left over (new, orphaned by a member that left,
//!    or given up by a member over quota) to members under quota, in order.
//!
//! So the result is balanced to within one partition, and a partition moves
//! only if its owner left or held more than its quota: the fewest moves of
//! any balanced assignment.

use std::collections::{BTreeMap, BTreeSet};

/// A partition of a topic.
pub type TopicPartition = (String, u32);

/// Member id -> partitions, for the members in `members`.
pub fn assign(
    members: &[String],
    partitions: &BTreeSet<TopicPartition>,
    current: &BTreeMap<String, BTreeSet<TopicPartition>>,
) -> BTreeMap<String, BTreeSet<TopicPartition>> {
    let mut out: BTreeMap<String, BTreeSet<TopicPartition>> =
        members.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    if members.is_empty() {
        return out;
    }
    let n = members.len();
    let (floor, extra) = (partitions.len() / n, partitions.len() % n);
    // Valid current holdings, a partition counted for one member only.
    let mut claimed = BTreeSet::new();
    let mut holding: Vec<(String, Vec<TopicPartition>)> = members
        .iter()
        .map(|m| {
            let held: Vec<_> = current
                .get(m)
                .into_iter()
                .flatten()
                .filter(|p| partitions.contains(*p) && claimed.insert((*p).clone()))
                .cloned()
                .collect();
            (m.clone(), held)
        })
        .collect();
    holding.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    let mut quota: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (m, held)) in holding.iter().enumerate() {
        let q = floor + usize::from(i < extra);
        quota.insert(m.clone(), q);
        out.get_mut(m)
            .expect("member")
            .extend(held.iter().take(q).cloned());
    }
    let taken: BTreeSet<_> = out.values().flatten().cloned().collect();
    let mut free = partitions.iter().filter(|p| !taken.contains(*p));
    for m in members {
        let q = quota[m];
        let have = out[m].len();
        for _ in have..q {
            match free.next() {
                Some(p) => {
                    out.get_mut(m).expect("member").insert(p.clone());
                }
                None => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parts(n: u32) -> BTreeSet<TopicPartition> {
        (0..n).map(|p| ("t".to_string(), p)).collect()
    }

    /// The most partitions any balanced assignment can leave in place.
    fn max_kept(
        members: &[String],
        partitions: &BTreeSet<TopicPartition>,
        current: &BTreeMap<String, BTreeSet<TopicPartition>>,
    ) -> usize {
        let n = members.len();
        let (floor, extra) = (partitions.len() / n, partitions.len() % n);
        let mut seen = BTreeSet::new();
        let mut held: Vec<usize> = members
            .iter()
            .map(|m| {
                current
                    .get(m)
                    .into_iter()
                    .flatten()
                    .filter(|p| partitions.contains(*p) && seen.insert((*p).clone()))
                    .count()
            })
            .collect();
        held.sort_unstable_by(|a, b| b.cmp(a));
        held.iter()
            .enumerate()
            .map(|(i, h)| (*h).min(floor + usize::from(i < extra)))
            .sum()
    }

    #[test]
    fn a_join_moves_only_what_balance_needs() {
        let p = parts(4);
        let one = assign(&["a".into()], &p, &BTreeMap::new());
        assert_eq!(one["a"].len(), 4);
        let two = assign(&["a".into(), "b".into()], &p, &one);
        assert_eq!(two["a"].len(), 2);
        assert_eq!(two["b"].len(), 2);
        assert!(two["a"].is_subset(&one["a"]), "a keeps what it had");
        // b leaves: a gets everything back, keeping its own.
        let back = assign(&["a".into()], &p, &two);
        assert!(two["a"].is_subset(&back["a"]));
        assert_eq!(back["a"].len(), 4);
    }

    proptest! {
        #[test]
        fn balanced_disjoint_complete_and_minimal(
            steps in proptest::collection::vec((any::<bool>(), 0usize..6), 1..30),
            partition_count in 0u32..24,
        ) {
            let partitions = parts(partition_count);
            let mut members: Vec<String> = Vec::new();
            let mut current: BTreeMap<String, BTreeSet<TopicPartition>> = BTreeMap::new();
            let mut next_id = 0;
            for (join, which) in steps {
                if join || members.is_empty() {
                    members.push(format!("m{next_id:02}"));
                    next_id += 1;
                } else {
                    members.remove(which % members.len());
                }
                members.sort();
                let kept_bound = if members.is_empty() { 0 } else { max_kept(&members, &partitions, &current) };
                let next = assign(&members, &partitions, &current);
                if members.is_empty() { current = next; continue; }
                let sizes: Vec<usize> = next.values().map(BTreeSet::len).collect();
                let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                prop_assert!(max - min <= 1, "balanced within one: {:?}", sizes);
                let all: Vec<_> = next.values().flatten().collect();
                let unique: BTreeSet<_> = all.iter().collect();
                prop_assert_eq!(all.len(), unique.len(), "no partition twice");
                prop_assert_eq!(unique.len(), partitions.len(), "every partition assigned");
                let kept: usize = next.iter().map(|(m, ps)| current.get(m).map_or(0, |c| ps.intersection(c).count())).sum();
                prop_assert_eq!(kept, kept_bound, "moves are minimal");
                current = next;
            }
        }
    }
}
