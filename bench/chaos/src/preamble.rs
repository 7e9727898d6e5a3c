//! The raft preamble as the proxy reads it: the 32 plaintext bytes that
//! open every raft peer connection (docs: shared raft spec §4.4; the
//! broker's own codec is `raft/src/transport/preamble.rs`, copied here
//! because es-chaos depends on es-protocol only). The proxy needs only the
//! source node, to know which link a connection belongs to.
//!
//! Layout (big-endian, [`PREAMBLE_BYTES`] = 32):
//!
//! ```text
//! off size field
//!   0   8  magic         "ESRAFT01"
//!   8   2  version       u16  = 1
//!  10   2  source_shard  u16
//!  12   2  dest_shard    u16
//!  14   2  reserved      u16  must be 0
//!  16   8  source_node   u64
//!  24   8  cluster_hash  u64
//! ```

/// Bytes of a preamble.
pub const PREAMBLE_BYTES: usize = 32;
/// The magic a preamble starts with.
pub const MAGIC: [u8; 8] = *b"ESRAFT01";
/// The preamble version the broker speaks.
pub const VERSION: u16 = 1;

/// What the proxy learns from a preamble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    pub source_node: u64,
    pub source_shard: u16,
    pub dest_shard: u16,
}

impl Preamble {
    /// The preamble in `b`, or why it is not one.
    pub fn decode(b: &[u8; PREAMBLE_BYTES]) -> Result<Preamble, String> {
        let u16_at = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        if b[0..8] != MAGIC {
            return Err("not a raft peer: the magic is not ESRAFT01".into());
        }
        let version = u16_at(8);
        if version != VERSION {
            return Err(format!("preamble version {version}, not {VERSION}"));
        }
        if u16_at(14) != 0 {
            return Err("the preamble's reserved bytes are not 0".into());
        }
        let mut node = [0u8; 8];
        node.copy_from_slice(&b[16..24]);
        Ok(Preamble {
            source_node: u64::from_be_bytes(node),
            source_shard: u16_at(10),
            dest_shard: u16_at(12),
        })
    }

    /// The bytes of a preamble from `source_node` (tests play peers).
    #[cfg(test)]
    pub fn encode(&self) -> [u8; PREAMBLE_BYTES] {
        let mut b = [0u8; PREAMBLE_BYTES];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_be_bytes());
        b[10..12].copy_from_slice(&self.source_shard.to_be_bytes());
        b[12..14].copy_from_slice(&self.dest_shard.to_be_bytes());
        b[16..24].copy_from_slice(&self.source_node.to_be_bytes());
        b[24..32].copy_from_slice(&0x1234_5678_9abc_def0u64.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn layout_matches_the_brokers() {
        let p = Preamble {
            source_node: 3,
            source_shard: 1,
            dest_shard: 2,
        };
        let b = p.encode();
        // The byte positions of raft/src/transport/preamble.rs.
        assert_eq!(&b[0..8], b"ESRAFT01");
        assert_eq!(b[8..10], [0, 1]);
        assert_eq!(b[10..12], [0, 1]);
        assert_eq!(b[12..14], [0, 2]);
        assert_eq!(b[23], 3);
        assert_eq!(Preamble::decode(&b), Ok(p));
        let mut bad = b;
        bad[9] = 2;
        assert!(Preamble::decode(&bad).unwrap_err().contains("version 2"));
        let mut bad = b;
        bad[15] = 1;
        assert!(Preamble::decode(&bad).unwrap_err().contains("reserved"));
    }

    #[test]
    fn hostile_bytes_are_refused_or_read_never_panic() {
        let mut rng = Rng::fork(5, 0);
        for i in 0..10_000u32 {
            let mut b = [0u8; PREAMBLE_BYTES];
            for x in b.iter_mut() {
                *x = rng.next_u64() as u8;
            }
            // Half of them with a valid magic and version, so the fields
            // past them are read too.
            if i % 2 == 0 {
                b[0..8].copy_from_slice(&MAGIC);
                b[8..10].copy_from_slice(&VERSION.to_be_bytes());
            }
            if let Ok(p) = Preamble::decode(&b) {
                assert_eq!(b[14..16], [0, 0]);
                assert_eq!(p.source_node.to_be_bytes(), b[16..24]);
            }
        }
    }
}
