//! Raft frames: the binary protocol's 16-byte frame header
//! (`es_protocol::frame`: length, kind, flags, request id) with the raft
//! kinds, on the raft listener only (a client listener never accepts them).
//!
//! A response's kind is its request's with the high bit set; Error (0xff)
//! answers any request. Raft frames are never compressed (flags = 0): the
//! batches they carry are stored as the producer sent them.

use es_protocol::frame::{check_header, FrameHeader, HEADER_BYTES};

use crate::limits::FRAME_BYTES_MAX;
use crate::transport::error::TransportError;

/// The raft frame kinds.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RaftKind {
    AppendEntries = 0x40,
    Vote = 0x41,
    Heartbeats = 0x42,
    /// A leader offers a snapshot (transfer: `snapshot_codec`).
    SnapshotOffer = 0x43,
    /// A run of the leader's stored batches.
    SnapshotChunk = 0x44,
    /// The end of a snapshot transfer: install.
    SnapshotDone = 0x45,
    /// May the sender campaign? (`crate::pre_vote`; changes no state.)
    PreVote = 0x46,
    /// A controller command forwarded to the controller's leader.
    ControllerPropose = 0x48,
    /// The controller leader's committed index (a read barrier).
    ControllerReadIndex = 0x49,
    /// The groups a node leads, with their marks (the broker's).
    LeaderReport = 0x4a,
    /// Per-partition state asked of a leader (the broker's).
    DescribePartitions = 0x4b,
    AppendEntriesOk = 0xc0,
    VoteOk = 0xc1,
    HeartbeatsOk = 0xc2,
    SnapshotOfferOk = 0xc3,
    SnapshotChunkOk = 0xc4,
    SnapshotDoneOk = 0xc5,
    PreVoteOk = 0xc6,
    ControllerProposeOk = 0xc8,
    ControllerReadIndexOk = 0xc9,
    LeaderReportOk = 0xca,
    DescribePartitionsOk = 0xcb,
    Error = 0xff,
}

impl RaftKind {
    /// The kind of `b`, if it is a raft kind.
    pub fn from_u8(b: u8) -> Option<RaftKind> {
        use RaftKind::*;
        Some(match b {
            0x40 => AppendEntries,
            0x41 => Vote,
            0x42 => Heartbeats,
            0x43 => SnapshotOffer,
            0x44 => SnapshotChunk,
            0x45 => SnapshotDone,
            0x46 => PreVote,
            0x48 => ControllerPropose,
            0x49 => ControllerReadIndex,
            0x4a => LeaderReport,
            0x4b => DescribePartitions,
            0xc0 => AppendEntriesOk,
            0xc1 => VoteOk,
            0xc2 => HeartbeatsOk,
            0xc3 => SnapshotOfferOk,
            0xc4 => SnapshotChunkOk,
            0xc5 => SnapshotDoneOk,
            0xc6 => PreVoteOk,
            0xc8 => ControllerProposeOk,
            0xc9 => ControllerReadIndexOk,
            0xca => LeaderReportOk,
            0xcb => DescribePartitionsOk,
            0xff => Error,
            _ => return None,
        })
    }

    /// The kind of a successful answer to this request.
    pub fn response(self) -> RaftKind {
        match self {
            RaftKind::AppendEntries => RaftKind::AppendEntriesOk,
            RaftKind::Vote => RaftKind::VoteOk,
            RaftKind::Heartbeats => RaftKind::HeartbeatsOk,
            RaftKind::SnapshotOffer => RaftKind::SnapshotOfferOk,
            RaftKind::SnapshotChunk => RaftKind::SnapshotChunkOk,
            RaftKind::SnapshotDone => RaftKind::SnapshotDoneOk,
            RaftKind::PreVote => RaftKind::PreVoteOk,
            RaftKind::ControllerPropose => RaftKind::ControllerProposeOk,
            RaftKind::ControllerReadIndex => RaftKind::ControllerReadIndexOk,
            RaftKind::LeaderReport => RaftKind::LeaderReportOk,
            RaftKind::DescribePartitions => RaftKind::DescribePartitionsOk,
            other => other,
        }
    }

    /// Whether this request is a control frame: not openraft's, answered
    /// by the server's [`ControlHandler`](super::control::ControlHandler).
    pub fn is_control(self) -> bool {
        matches!(
            self,
            RaftKind::ControllerPropose
                | RaftKind::ControllerReadIndex
                | RaftKind::LeaderReport
                | RaftKind::DescribePartitions
        )
    }

    /// Whether a peer sends this kind as a request.
    pub fn is_request(self) -> bool {
        (self as u8) & 0x80 == 0
    }
}

/// The header of a frame of `kind` whose payload is `payload_len` bytes.
pub fn header(kind: RaftKind, request_id: u64, payload_len: usize) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    // frame_len counts the header's last 12 bytes and the payload; callers
    // keep frames under FRAME_BYTES_MAX (encoders check), so it fits a u32.
    let frame_len = (HEADER_BYTES - 4 + payload_len) as u32;
    h[0..4].copy_from_slice(&frame_len.to_be_bytes());
    h[4] = kind as u8;
    h[8..16].copy_from_slice(&request_id.to_be_bytes());
    h
}

/// A frame with its header, as one buffer.
pub fn encode(kind: RaftKind, request_id: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.extend_from_slice(&header(kind, request_id, payload.len()));
    out.extend_from_slice(payload);
    out
}

/// A checked raft frame header: its kind, request id and payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftHeader {
    pub kind: RaftKind,
    pub request_id: u64,
    pub payload_len: usize,
}

/// Checks a received header: a known kind, no flags, at most
/// [`FRAME_BYTES_MAX`] in all.
pub fn check(head: &[u8; HEADER_BYTES]) -> Result<RaftHeader, TransportError> {
    let (h, total): (FrameHeader, usize) =
        check_header(head, FRAME_BYTES_MAX).map_err(|e| TransportError::Malformed(e.to_string()))?;
    let kind = RaftKind::from_u8(h.kind)
        .ok_or_else(|| TransportError::Malformed(format!("unknown raft frame kind {:#04x}", h.kind)))?;
    if h.flags != 0 {
        return Err(TransportError::Malformed("raft frames are not compressed".into()));
    }
    Ok(RaftHeader {
        kind,
        request_id: h.request_id,
        payload_len: total - HEADER_BYTES,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_frame_round_trips_and_limits_hold() {
        let f = encode(RaftKind::Vote, 9, b"abc");
        let head: [u8; HEADER_BYTES] = f[..HEADER_BYTES].try_into().unwrap();
        let h = check(&head).unwrap();
        assert_eq!((h.kind, h.request_id, h.payload_len), (RaftKind::Vote, 9, 3));
        let big = header(RaftKind::AppendEntries, 1, FRAME_BYTES_MAX);
        assert!(check(&big).is_err(), "over the frame limit");
        let mut produce = head;
        produce[4] = 0x02;
        assert!(check(&produce).is_err(), "a client kind is not a raft kind");
        let mut gz = head;
        gz[5] = 1;
        assert!(check(&gz).is_err());
        assert_eq!(RaftKind::Heartbeats.response(), RaftKind::HeartbeatsOk);
        assert!(!RaftKind::Error.is_request());
        for k in 0..=255u8 {
            if let Some(kind) = RaftKind::from_u8(k) {
                assert_eq!(kind as u8, k);
                if kind.is_request() {
                    assert_eq!(kind.response() as u8, k | 0x80, "{kind:?}");
                }
                assert_eq!(kind.is_control(), (0x48..=0x4b).contains(&k), "{kind:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn any_header_is_checked_without_panic(b in proptest::array::uniform16(any::<u8>())) {
            if let Ok(h) = check(&b) {
                prop_assert!(h.payload_len + HEADER_BYTES <= FRAME_BYTES_MAX);
                prop_assert_eq!(header(h.kind, h.request_id, h.payload_len), b);
            }
        }
    }
}
