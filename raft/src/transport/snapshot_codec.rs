//! The payloads of the snapshot transfer frames (docs/design/raft-snapshots.md;
//! big-endian, the primitives `wire`'s). A leader offers a snapshot, the
//! follower says from where it needs the log, the leader streams that run
//! of its log in chunks of whole stored batches, then says done.
//!
//! ```text
//! 0x43 SnapshotOffer   u64 group, u64 transfer, vote, opt logid last,
//!                      u64 end_offset (after the last entry),
//!                      u64 log_start (the leader's first hot offset)
//! 0xc3 SnapshotOfferOk u8 0 stream, opt logid after, u64 from_offset
//!                      | 1 nothing to stream | 2 higher vote, vote
//! 0x44 SnapshotChunk   u64 group, u64 transfer, u64 seq, u32 len,
//!                      stored batches back to back (len bytes)
//! 0xc4 SnapshotChunkOk u64 seq
//! 0x45 SnapshotDone    u64 group, u64 transfer, vote,
//!                      u32 len, descriptor (the snapshot's JSON),
//!                      u32 len, producers (the idempotent producers' image)
//! 0xc5 SnapshotDoneOk  vote (the follower's, after the install)
//! ```
//!
//! Decoders take any bytes, bound every length by what remains and by the
//! limits, and return [`TransportError::Malformed`], never panic
//! (proptests below). A chunk's batches are checked (CRC, stamps) by the
//! receiver, not here.

use bytes::Bytes;

use crate::limits::{FRAME_BYTES_MAX, SNAPSHOT_DESCRIPTOR_BYTES_MAX};
use crate::transport::error::TransportError;
use crate::transport::wire::{malformed, put_log_id, put_u32, put_u64, put_u8, put_vote, Cur};
use crate::types::{GroupId, LogId, Vote};

/// A leader's offer of a snapshot (0x43).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub group: GroupId,
    /// Names this transfer: chunks and done of another one are refused.
    pub transfer: u64,
    pub vote: Vote,
    /// The snapshot's last entry.
    pub last: Option<LogId>,
    /// The offset after the snapshot's last entry.
    pub end_offset: u64,
    /// The leader's first hot offset: it cannot send from below it.
    pub log_start: u64,
}

/// A follower's answer to an offer (0xc3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferReply {
    /// Send the entries after `after` (none: from the log's start), whose
    /// first batch is at `from_offset`.
    Stream { after: Option<LogId>, from_offset: u64 },
    /// This replica holds the snapshot's entries: send done at once.
    Nothing,
    /// This replica has seen a higher vote: the offer is refused.
    HigherVote(Vote),
}

/// One run of the leader's stored batches (0x44).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub group: GroupId,
    pub transfer: u64,
    /// 0, 1, ...: the receiver appends chunks in this order.
    pub seq: u64,
    /// Whole stored batches, back to back (a slice of the frame).
    pub batches: Bytes,
}

/// The end of a transfer (0x45).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub group: GroupId,
    pub transfer: u64,
    pub vote: Vote,
    /// The snapshot's descriptor (`partition_sm.rs`; it holds the
    /// idempotent window's image too).
    pub descriptor: Bytes,
}

/// A SnapshotOffer payload.
pub fn encode_offer(out: &mut Vec<u8>, o: &Offer) {
    put_u64(out, o.group);
    put_u64(out, o.transfer);
    put_vote(out, &o.vote);
    put_log_id(out, &o.last);
    put_u64(out, o.end_offset);
    put_u64(out, o.log_start);
}

/// A SnapshotOfferOk payload.
pub fn encode_offer_reply(out: &mut Vec<u8>, r: &OfferReply) {
    match r {
        OfferReply::Stream { after, from_offset } => {
            put_u8(out, 0);
            put_log_id(out, after);
            put_u64(out, *from_offset);
        }
        OfferReply::Nothing => put_u8(out, 1),
        OfferReply::HigherVote(v) => {
            put_u8(out, 2);
            put_vote(out, v);
        }
    }
}

/// A SnapshotChunk payload (the caller keeps the batches within the
/// frame's bound).
pub fn encode_chunk(out: &mut Vec<u8>, c: &Chunk) {
    put_u64(out, c.group);
    put_u64(out, c.transfer);
    put_u64(out, c.seq);
    put_u32(out, c.batches.len() as u32);
    out.extend_from_slice(&c.batches);
}

/// A SnapshotChunkOk payload.
pub fn encode_chunk_reply(out: &mut Vec<u8>, seq: u64) {
    put_u64(out, seq);
}

/// A SnapshotDone payload (the descriptor at most
/// [`SNAPSHOT_DESCRIPTOR_BYTES_MAX`]: the caller checks).
pub fn encode_done(out: &mut Vec<u8>, d: &Done) {
    put_u64(out, d.group);
    put_u64(out, d.transfer);
    put_vote(out, &d.vote);
    put_u32(out, d.descriptor.len() as u32);
    out.extend_from_slice(&d.descriptor);
}

/// A SnapshotDoneOk payload.
pub fn encode_done_reply(out: &mut Vec<u8>, vote: &Vote) {
    put_vote(out, vote);
}

/// A SnapshotOffer payload.
pub fn decode_offer(payload: Bytes) -> Result<Offer, TransportError> {
    let mut c = Cur::new(payload);
    let o = Offer {
        group: c.u64("group")?,
        transfer: c.u64("transfer")?,
        vote: c.vote()?,
        last: c.log_id("last")?,
        end_offset: c.u64("end offset")?,
        log_start: c.u64("log start")?,
    };
    c.end("SnapshotOffer")?;
    Ok(o)
}

/// A SnapshotOfferOk payload.
pub fn decode_offer_reply(payload: Bytes) -> Result<OfferReply, TransportError> {
    let mut c = Cur::new(payload);
    let r = match c.u8("offer answer")? {
        0 => OfferReply::Stream {
            after: c.log_id("after")?,
            from_offset: c.u64("from offset")?,
        },
        1 => OfferReply::Nothing,
        2 => OfferReply::HigherVote(c.vote()?),
        t => return Err(malformed(format!("offer answer {t}"))),
    };
    c.end("SnapshotOfferOk")?;
    Ok(r)
}

/// A SnapshotChunk payload; its batches are a slice of `payload`.
pub fn decode_chunk(payload: Bytes) -> Result<Chunk, TransportError> {
    let mut c = Cur::new(payload);
    let group = c.u64("group")?;
    let transfer = c.u64("transfer")?;
    let seq = c.u64("seq")?;
    let n = c.u32("chunk length")? as usize;
    if n > FRAME_BYTES_MAX {
        return Err(malformed(format!("a chunk of {n} bytes")));
    }
    let batches = c.take_bytes(n, "chunk")?;
    c.end("SnapshotChunk")?;
    Ok(Chunk {
        group,
        transfer,
        seq,
        batches,
    })
}

/// A SnapshotChunkOk payload: the chunk's seq.
pub fn decode_chunk_reply(payload: Bytes) -> Result<u64, TransportError> {
    let mut c = Cur::new(payload);
    let seq = c.u64("seq")?;
    c.end("SnapshotChunkOk")?;
    Ok(seq)
}

fn body(c: &mut Cur, what: &str) -> Result<Bytes, TransportError> {
    let n = c.u32(what)? as usize;
    if n > SNAPSHOT_DESCRIPTOR_BYTES_MAX {
        return Err(malformed(format!("{what}: {n} bytes")));
    }
    c.take_bytes(n, what)
}

/// A SnapshotDone payload.
pub fn decode_done(payload: Bytes) -> Result<Done, TransportError> {
    let mut c = Cur::new(payload);
    let d = Done {
        group: c.u64("group")?,
        transfer: c.u64("transfer")?,
        vote: c.vote()?,
        descriptor: body(&mut c, "descriptor")?,
    };
    c.end("SnapshotDone")?;
    Ok(d)
}

/// A SnapshotDoneOk payload.
pub fn decode_done_reply(payload: Bytes) -> Result<Vote, TransportError> {
    let mut c = Cur::new(payload);
    let v = c.vote()?;
    c.end("SnapshotDoneOk")?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::codec_testing::{enc, opt_log_id, truncations_refused, vote};
    use proptest::prelude::*;

    fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
    }

    fn offer() -> impl Strategy<Value = Offer> {
        (
            any::<u64>(),
            any::<u64>(),
            vote(),
            opt_log_id(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(group, transfer, vote, last, end_offset, log_start)| Offer {
                group,
                transfer,
                vote,
                last,
                end_offset,
                log_start,
            })
    }

    fn offer_reply() -> impl Strategy<Value = OfferReply> {
        prop_oneof![
            (opt_log_id(), any::<u64>())
                .prop_map(|(after, from_offset)| OfferReply::Stream { after, from_offset }),
            Just(OfferReply::Nothing),
            vote().prop_map(OfferReply::HigherVote),
        ]
    }

    /// Every decoder on `b`: none panics; whatever decodes re-encodes to `b`.
    fn decode_all(b: &[u8]) -> Result<(), TestCaseError> {
        let b = Bytes::copy_from_slice(b);
        if let Ok(o) = decode_offer(b.clone()) {
            prop_assert_eq!(&enc(encode_offer, &o)[..], &b[..]);
        }
        if let Ok(r) = decode_offer_reply(b.clone()) {
            prop_assert_eq!(&enc(encode_offer_reply, &r)[..], &b[..]);
        }
        if let Ok(c) = decode_chunk(b.clone()) {
            prop_assert_eq!(&enc(encode_chunk, &c)[..], &b[..]);
        }
        if let Ok(s) = decode_chunk_reply(b.clone()) {
            prop_assert_eq!(&enc(|o, s: &u64| encode_chunk_reply(o, *s), &s)[..], &b[..]);
        }
        if let Ok(d) = decode_done(b.clone()) {
            prop_assert_eq!(&enc(encode_done, &d)[..], &b[..]);
        }
        if let Ok(v) = decode_done_reply(b.clone()) {
            prop_assert_eq!(&enc(encode_done_reply, &v)[..], &b[..]);
        }
        Ok(())
    }

    /// Every proper prefix of `b` refused, a trailing byte refused, every
    /// flipped byte decoded or refused without a panic.
    fn damaged_refused<T: std::fmt::Debug>(
        b: &[u8],
        decode: impl Fn(Bytes) -> Result<T, TransportError>,
    ) -> Result<(), TestCaseError> {
        truncations_refused(b, decode)?;
        for i in 0..b.len() {
            let mut f = b.to_vec();
            f[i] ^= 0x5a;
            decode_all(&f)?;
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            decode_all(&b)?;
        }

        #[test]
        fn snapshot_frames_round_trip_and_damage_is_refused(
            o in offer(),
            r in offer_reply(),
            (group, transfer, seq, batches) in (any::<u64>(), any::<u64>(), any::<u64>(), bytes(100)),
            (v, descriptor) in (vote(), bytes(80)),
        ) {
            let b = enc(encode_offer, &o);
            prop_assert_eq!(decode_offer(Bytes::from(b.clone())).unwrap(), o);
            damaged_refused(&b, decode_offer)?;

            let b = enc(encode_offer_reply, &r);
            prop_assert_eq!(decode_offer_reply(Bytes::from(b.clone())).unwrap(), r);
            damaged_refused(&b, decode_offer_reply)?;

            let c = Chunk { group, transfer, seq, batches };
            let b = enc(encode_chunk, &c);
            prop_assert_eq!(decode_chunk(Bytes::from(b.clone())).unwrap(), c);
            damaged_refused(&b, decode_chunk)?;

            let b = enc(|o, s: &u64| encode_chunk_reply(o, *s), &seq);
            prop_assert_eq!(decode_chunk_reply(Bytes::from(b.clone())).unwrap(), seq);
            damaged_refused(&b, decode_chunk_reply)?;

            let d = Done { group, transfer, vote: v, descriptor };
            let b = enc(encode_done, &d);
            prop_assert_eq!(decode_done(Bytes::from(b.clone())).unwrap(), d);
            damaged_refused(&b, decode_done)?;

            let b = enc(encode_done_reply, &v);
            prop_assert_eq!(decode_done_reply(Bytes::from(b.clone())).unwrap(), v);
            damaged_refused(&b, decode_done_reply)?;
        }
    }

    #[test]
    fn lengths_over_the_bounds_are_refused_before_they_are_read() {
        let mut b = Vec::new();
        put_u64(&mut b, 1);
        put_u64(&mut b, 1);
        put_u64(&mut b, 0);
        put_u32(&mut b, u32::MAX);
        assert!(decode_chunk(Bytes::from(b)).is_err());
        let mut b = Vec::new();
        put_u64(&mut b, 1);
        put_u64(&mut b, 1);
        put_vote(&mut b, &Vote::default());
        let head = b.clone();
        use crate::limits::ENTRY_BODY_BYTES_MAX;
        put_u32(&mut b, (SNAPSHOT_DESCRIPTOR_BYTES_MAX + 1) as u32);
        b.resize(b.len() + SNAPSHOT_DESCRIPTOR_BYTES_MAX + 1, b'x');
        assert!(decode_done(Bytes::from(b)).is_err());
        // A descriptor past an entry's bound (a full idempotent window)
        // is taken.
        let mut b = head;
        put_u32(&mut b, (ENTRY_BODY_BYTES_MAX + 1) as u32);
        b.resize(b.len() + ENTRY_BODY_BYTES_MAX + 1, b'x');
        assert_eq!(
            decode_done(Bytes::from(b)).unwrap().descriptor.len(),
            ENTRY_BODY_BYTES_MAX + 1
        );
    }
}
