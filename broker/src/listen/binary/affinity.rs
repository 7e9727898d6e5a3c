//! Which shard a binary connection belongs on. A connection's socket stays
//! on the shard that accepted it, and every request for a partition another
//! shard owns crosses to it and back; a large batch can only be written
//! while it arrives (early writes) on the partition's own shard. So a
//! connection whose partition requests (produce batches and fetches) all go
//! to one other shard for a while moves there: `connection.rs` hands its
//! socket over between requests. A client that spreads its requests over
//! partitions of several shards stays where it is.

use crate::limits::MOVE_AFTER_REQUESTS;
use crate::shard::placement::ShardId;

/// The shard a connection's recent partition requests went to, and how many
/// in a row.
#[derive(Debug, Default)]
pub struct Affinity {
    streak: Option<(ShardId, u32)>,
}

impl Affinity {
    /// A request for a partition that `owner` owns arrived on shard `here`.
    pub fn note(&mut self, owner: ShardId, here: ShardId) {
        self.streak = match self.streak {
            _ if owner == here => None,
            Some((s, n)) if s == owner => Some((s, n.saturating_add(1))),
            _ => Some((owner, 1)),
        };
    }

    /// The shard this connection should move to, if any.
    pub fn target(&self) -> Option<ShardId> {
        self.streak
            .filter(|&(_, n)| n >= MOVE_AFTER_REQUESTS)
            .map(|(s, _)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_after_a_run_of_requests_for_one_other_shard() {
        let mut a = Affinity::default();
        for _ in 0..MOVE_AFTER_REQUESTS - 1 {
            a.note(2, 1);
            assert_eq!(a.target(), None);
        }
        a.note(2, 1);
        assert_eq!(a.target(), Some(2));
    }

    #[test]
    fn a_request_for_this_shard_or_a_third_one_starts_over() {
        let mut a = Affinity::default();
        for i in 0..10 * MOVE_AFTER_REQUESTS {
            // Alternating between the other shards never moves.
            a.note(2 + (i % 2) as usize, 1);
            assert_eq!(a.target(), None);
        }
        for _ in 0..MOVE_AFTER_REQUESTS - 1 {
            a.note(2, 1);
        }
        a.note(1, 1);
        assert_eq!(a.target(), None, "a local request resets the run");
        a.note(2, 1);
        assert_eq!(a.target(), None);
    }
}
