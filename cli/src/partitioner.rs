//! Which partition a record goes to, decided by `es produce` itself when it
//! produces idempotently (an idempotent request must name one partition, and
//! a retry must reach the same one): the explicit `--partition`; else, for a
//! key, FNV-1a 64 of the key bytes modulo the partition count (the broker's
//! rule, so keyed records land where a plain produce puts them); else, for
//! keyless records, one partition per batch, rotating round-robin.

/// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub struct Partitioner {
    /// The topic's partition count (at least 1).
    partitions: u32,
    /// Where keyless records go until their batch is sent.
    keyless: u32,
}

impl Partitioner {
    /// `partitions` must be at least 1; keyless records start at partition
    /// `start` (modulo the count).
    pub fn new(partitions: u32, start: u32) -> Partitioner {
        let partitions = partitions.max(1);
        Partitioner {
            partitions,
            keyless: start % partitions,
        }
    }

    pub fn partition(&self, explicit: Option<u32>, key: Option<&[u8]>) -> u32 {
        match (explicit, key) {
            (Some(p), _) => p,
            (None, Some(k)) => (fnv1a_64(k) % u64::from(self.partitions)) as u32,
            (None, None) => self.keyless,
        }
    }

    /// A batch for `partition` was sent: if keyless records were going
    /// there, the next ones go to the next partition.
    pub fn batch_sent(&mut self, partition: u32) {
        if partition == self.keyless {
            self.keyless = (self.keyless + 1) % self.partitions;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_vectors() {
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
        assert_eq!(fnv1a_64(b"user-42") % 3, 0);
    }

    #[test]
    fn explicit_then_key_then_rotation() {
        let mut p = Partitioner::new(3, 4);
        assert_eq!(p.partition(Some(2), Some(b"user-42")), 2);
        assert_eq!(p.partition(None, Some(b"user-42")), 0);
        assert_eq!(p.partition(None, None), 1, "start 4 mod 3");
        p.batch_sent(0);
        assert_eq!(
            p.partition(None, None),
            1,
            "another partition's batch does not rotate"
        );
        p.batch_sent(1);
        assert_eq!(p.partition(None, None), 2);
        p.batch_sent(2);
        assert_eq!(p.partition(None, None), 0);
        let one = Partitioner::new(0, 7);
        assert_eq!(one.partition(None, None), 0);
        assert_eq!(one.partition(None, Some(b"k")), 0);
    }
}
