//! Where things live: the one place that maps a partition (or a group) to
//! its shard, and a key to its partition. Pure functions; every caller asks
//! here, no one recomputes.

/// Index of a shard: 0..shards.
pub type ShardId = usize;

/// FNV-1a, 64 bit: small, stable across versions and languages, documented
/// in docs/api.md so clients can reproduce it.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET_BASIS, |h, b| (h ^ *b as u64).wrapping_mul(PRIME))
}

/// The shard that owns `partition` of `topic`. Placement never decides a
/// file path, so changing the shard count between runs finds all data.
pub fn shard_of(topic: &str, partition: u32, shards: usize) -> ShardId {
    let mut key = Vec::with_capacity(topic.len() + 5);
    key.extend_from_slice(topic.as_bytes());
    key.push(0);
    key.extend_from_slice(&partition.to_le_bytes());
    (fnv1a64(&key) % shards as u64) as ShardId
}

/// The shard that coordinates consumer group `group`.
pub fn shard_of_group(group: &str, shards: usize) -> ShardId {
    let mut key = Vec::with_capacity(group.len() + 6);
    key.extend_from_slice(b"group\0");
    key.extend_from_slice(group.as_bytes());
    (fnv1a64(&key) % shards as u64) as ShardId
}

/// The partition a keyed record goes to: same key, same partition, always
/// (for a fixed partition count).
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    (fnv1a64(key) % partitions as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn placement_is_stable_and_in_range() {
        for shards in 1..9 {
            for p in 0..64 {
                let s = shard_of("orders", p, shards);
                assert!(s < shards);
                assert_eq!(s, shard_of("orders", p, shards));
            }
        }
        // Partitions of one topic spread over shards.
        let used: std::collections::HashSet<_> = (0..16).map(|p| shard_of("t", p, 4)).collect();
        assert!(used.len() > 1);
        assert_eq!(partition_for_key(b"user-42", 1), 0);
        assert_eq!(partition_for_key(b"user-42", 3), (fnv1a64(b"user-42") % 3) as u32);
    }
}
