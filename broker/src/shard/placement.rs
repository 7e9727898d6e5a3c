//! Where things live: the one place that maps a partition (or a group) to
//! its shard, and a key to its partition. Pure functions; every caller asks
//! here, no one recomputes.

/// Index of a shard: 0..shards.
pub type ShardId = usize;

/// FNV-1a, 64 bit: small, stable across versions and languages, documented
/// in docs/api.md so clients can reproduce it.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_of(&[bytes])
}

/// FNV-1a, 64 bit, of `parts` back to back (no buffer to join them).
fn fnv1a64_of(parts: &[&[u8]]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    parts
        .iter()
        .flat_map(|p| p.iter())
        .fold(OFFSET_BASIS, |h, b| (h ^ *b as u64).wrapping_mul(PRIME))
}

/// The shard that owns `partition` of `topic`: the hash of the topic, a
/// zero byte and the partition (u32, little-endian). Placement never
/// decides a file path, so changing the shard count between runs finds
/// all data.
pub fn shard_of(topic: &str, partition: u32, shards: usize) -> ShardId {
    let h = fnv1a64_of(&[topic.as_bytes(), &[0], &partition.to_le_bytes()]);
    (h % shards as u64) as ShardId
}

/// The shard that coordinates consumer group `group`: the hash of
/// `group\0` and the group's name.
pub fn shard_of_group(group: &str, shards: usize) -> ShardId {
    (fnv1a64_of(&[b"group\0", group.as_bytes()]) % shards as u64) as ShardId
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
    fn placement_hashes_the_documented_key() {
        for shards in 1..9 {
            for p in [0u32, 1, 7, 300, u32::MAX] {
                let mut key = b"orders\0".to_vec();
                key.extend_from_slice(&p.to_le_bytes());
                assert_eq!(
                    shard_of("orders", p, shards) as u64,
                    fnv1a64(&key) % shards as u64
                );
            }
            assert_eq!(
                shard_of_group("g1", shards) as u64,
                fnv1a64(b"group\0g1") % shards as u64
            );
        }
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
