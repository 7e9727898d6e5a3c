//! The preamble: the 32 plaintext bytes that open every raft connection,
//! before TLS, so that the accepting shard (and the chaos proxy) knows
//! which link a connection is without decrypting anything.
//!
//! Layout (big-endian, [`PREAMBLE_BYTES`] = 32):
//!
//! ```text
//! off size field
//!   0   8  magic         "ESRAFT01"
//!   8   2  version       u16  = 1
//!  10   2  source_shard  u16  the connecting shard
//!  12   2  dest_shard    u16  the shard of the peer it is meant for
//!  14   2  reserved      u16  must be 0
//!  16   8  source_node   u64  the connecting node's id (its certificate
//!                             must name `es-node-<source_node>`)
//!  24   8  cluster_hash  u64  the cluster: high 32 bits, the roster's
//!                             hash (`--peers`' node ids); low 32 bits, the
//!                             cluster id's hash, 0 while the node does
//!                             not know it yet ([`cluster_field`])
//! ```
//!
//! A connection whose roster differs is refused; so is one whose cluster
//! id differs once both ends know theirs ([`check_cluster`]). A node that
//! does not know the id yet (its first boot, a replaced disk) is accepted:
//! it learns the id from the controller group.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::types::NodeId;

/// Bytes of a preamble.
pub const PREAMBLE_BYTES: usize = 32;
/// The magic a preamble starts with.
pub const MAGIC: [u8; 8] = *b"ESRAFT01";
/// The preamble version this build speaks.
pub const VERSION: u16 = 1;

/// Who is connecting, to which shard, in which cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preamble {
    pub source_node: NodeId,
    pub source_shard: u16,
    pub dest_shard: u16,
    pub cluster_hash: u64,
}

/// Why a preamble is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreambleError {
    /// Not `ESRAFT01`: not a raft peer (a client on the wrong port, a scan).
    Magic,
    /// A version this build does not speak.
    Version(u16),
    /// Reserved bytes that are not 0.
    Reserved,
}

impl fmt::Display for PreambleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PreambleError::Magic => f.write_str("not a raft peer: the preamble's magic is not ESRAFT01"),
            PreambleError::Version(v) => write!(f, "preamble version {v}; this node speaks {VERSION}"),
            PreambleError::Reserved => f.write_str("the preamble's reserved bytes are not 0"),
        }
    }
}

impl std::error::Error for PreambleError {}

impl Preamble {
    /// The preamble's bytes.
    pub fn encode(&self) -> [u8; PREAMBLE_BYTES] {
        let mut b = [0u8; PREAMBLE_BYTES];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_be_bytes());
        b[10..12].copy_from_slice(&self.source_shard.to_be_bytes());
        b[12..14].copy_from_slice(&self.dest_shard.to_be_bytes());
        b[16..24].copy_from_slice(&self.source_node.to_be_bytes());
        b[24..32].copy_from_slice(&self.cluster_hash.to_be_bytes());
        b
    }

    /// The preamble in `b`, or why it is refused.
    pub fn decode(b: &[u8; PREAMBLE_BYTES]) -> Result<Preamble, PreambleError> {
        let u16_at = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        let u64_at = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            u64::from_be_bytes(x)
        };
        if b[0..8] != MAGIC {
            return Err(PreambleError::Magic);
        }
        let version = u16_at(8);
        if version != VERSION {
            return Err(PreambleError::Version(version));
        }
        if u16_at(14) != 0 {
            return Err(PreambleError::Reserved);
        }
        Ok(Preamble {
            source_shard: u16_at(10),
            dest_shard: u16_at(12),
            source_node: u64_at(16),
            cluster_hash: u64_at(24),
        })
    }
}

/// The cluster hash of a cluster uuid: 64-bit FNV-1a of its bytes (stable
/// across builds and platforms, unlike std's hasher).
pub fn cluster_hash(uuid: &str) -> u64 {
    uuid.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of a cluster id as the preamble's low 32 bits carry it: never
/// 0, which means "not known yet".
pub fn id_hash(cluster_id: &str) -> u32 {
    match cluster_hash(cluster_id) as u32 {
        0 => 1,
        h => h,
    }
}

/// The preamble's cluster field: the roster's hash (`roster_hash`, whose
/// high 32 bits are kept) and the cluster id's ([`id_hash`], 0 = unknown).
pub fn cluster_field(roster_hash: u64, id_hash: u32) -> u64 {
    (roster_hash & 0xffff_ffff_0000_0000) | id_hash as u64
}

/// Why a peer's cluster field is not this node's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterMismatch {
    /// Its `--peers` lists other node ids.
    Roster,
    /// Both know their cluster id, and the ids differ.
    Id { theirs: u32, ours: u32 },
}

impl fmt::Display for ClusterMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterMismatch::Roster => f.write_str("its --peers lists other node ids than this node's"),
            ClusterMismatch::Id { theirs, ours } => write!(
                f,
                "its cluster id (hash {theirs:08x}) is not this cluster's ({ours:08x}): its data dir \
                 belongs to another cluster"
            ),
        }
    }
}

/// Whether a peer's cluster field (`theirs`) is this node's cluster
/// (`ours`): the same roster, and the same id unless either end does not
/// know it yet.
pub fn check_cluster(ours: u64, theirs: u64) -> Result<(), ClusterMismatch> {
    if ours >> 32 != theirs >> 32 {
        return Err(ClusterMismatch::Roster);
    }
    let (ours, theirs) = (ours as u32, theirs as u32);
    if ours != 0 && theirs != 0 && ours != theirs {
        return Err(ClusterMismatch::Id { theirs, ours });
    }
    Ok(())
}

/// The cluster id's hash as this node knows it, shared by every shard's
/// transport: 0 until the controller group agreed on an id (or
/// `cluster.json` had one at start), then [`id_hash`] of it.
#[derive(Debug, Clone, Default)]
pub struct ClusterId(Arc<AtomicU32>);

impl ClusterId {
    /// Sets the id the cluster agreed on; later connections carry it.
    pub fn set(&self, cluster_id: &str) {
        self.0.store(id_hash(cluster_id), Ordering::Release);
    }

    /// The id's hash, 0 while unknown.
    pub fn hash(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_as_documented() {
        let p = Preamble {
            source_node: 3,
            source_shard: 1,
            dest_shard: 2,
            cluster_hash: cluster_hash("u"),
        };
        let b = p.encode();
        assert_eq!(&b[0..8], b"ESRAFT01");
        assert_eq!(b[8..10], [0, 1]);
        assert_eq!(b[10..12], [0, 1]);
        assert_eq!(b[12..14], [0, 2]);
        assert_eq!(b[23], 3);
        assert_eq!(Preamble::decode(&b), Ok(p));
        assert_ne!(cluster_hash("a"), cluster_hash("b"));
        let mut bad = b;
        bad[9] = 2;
        assert_eq!(Preamble::decode(&bad), Err(PreambleError::Version(2)));
        let mut bad = b;
        bad[15] = 1;
        assert_eq!(Preamble::decode(&bad), Err(PreambleError::Reserved));
    }

    #[test]
    fn a_cluster_is_its_roster_and_its_id_once_known() {
        let roster = cluster_hash("es-cluster:1,2,3");
        let (a, b) = (id_hash("a"), id_hash("b"));
        let unknown = cluster_field(roster, 0);
        assert_eq!(check_cluster(unknown, unknown), Ok(()));
        assert_eq!(
            check_cluster(cluster_field(roster, a), unknown),
            Ok(()),
            "first boot"
        );
        assert_eq!(check_cluster(unknown, cluster_field(roster, a)), Ok(()));
        assert_eq!(
            check_cluster(cluster_field(roster, a), cluster_field(roster, a)),
            Ok(())
        );
        assert_eq!(
            check_cluster(cluster_field(roster, a), cluster_field(roster, b)),
            Err(ClusterMismatch::Id { theirs: b, ours: a })
        );
        let other = cluster_field(cluster_hash("es-cluster:1,2"), a);
        assert_eq!(
            check_cluster(cluster_field(roster, a), other),
            Err(ClusterMismatch::Roster)
        );
        assert_eq!(
            check_cluster(unknown, cluster_field(cluster_hash("es-cluster:1,2"), 0)),
            Err(ClusterMismatch::Roster)
        );
        let id = ClusterId::default();
        assert_eq!(id.hash(), 0);
        id.set("a");
        assert_eq!(id.clone().hash(), a);
        assert_ne!(a, 0);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_are_refused(b in proptest::array::uniform32(any::<u8>())) {
            if let Ok(p) = Preamble::decode(&b) {
                prop_assert_eq!(p.encode(), b);
            } else {
                prop_assert!(b[0..8] != MAGIC || b[8..10] != [0, 1] || b[14..16] != [0, 0]);
            }
        }

        #[test]
        fn round_trip(node: u64, s: u16, d: u16, h: u64) {
            let p = Preamble { source_node: node, source_shard: s, dest_shard: d, cluster_hash: h };
            prop_assert_eq!(Preamble::decode(&p.encode()), Ok(p));
        }
    }
}
