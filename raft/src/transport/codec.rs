//! The payloads of openraft's frames (big-endian, like the frame header;
//! the primitives — vote, opt logid, text — are `wire`'s). The controller's
//! frames (0x48-0x49) are `control_codec`'s, the snapshot frames
//! (0x43-0x45) `snapshot_codec`'s, the pre-vote frames (0x46)
//! `pre_vote_codec`'s.
//!
//! ```text
//! 0x40 AppendEntries   u64 group, vote, opt logid prev, opt logid commit,
//!                      u32 n, n × entry
//!      entry   u8 kind, u64 term, u64 index, then by kind:
//!              0 blank: nothing | 1 membership: u32 len, JSON
//!              2 batches: u32 count, the stored batches back to back
//!                (each self-delimiting by its batch_len) | 3 command: u32 len, bytes
//! 0xc0 AppendEntriesOk u8 0 success | 1 partial, opt logid | 2 conflict | 3 higher, vote
//! 0x41 Vote            u64 group, vote, opt logid last
//! 0xc1 VoteOk          vote, u8 granted, opt logid last
//! 0x42 Heartbeats      u32 n, n × (u64 group, vote, opt logid prev, opt logid commit)
//! 0xc2 HeartbeatsOk    u32 n, n × (u8 0, AppendEntriesOk | u8 1, error)
//! 0xff Error   error:  u16 len, code, u16 len, message (UTF-8)
//! ```
//!
//! Decoders take any bytes: every length and count is checked against the
//! bytes that remain before anything is allocated, and a payload must be
//! used to its last byte. They return [`TransportError::Malformed`], never
//! panic (proptests below).

use bytes::Bytes;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest, VoteResponse};

use crate::entry::{EntryBatch, EsEntry, EsPayload};
use crate::limits::{ENTRY_BODY_BYTES_MAX, HEARTBEATS_PER_FRAME_MAX};
use crate::membership;
use crate::transport::error::TransportError;
use crate::transport::wire::{
    len32, malformed, put_log_id, put_text, put_u32, put_u64, put_u8, put_vote, Cur,
};
use crate::types::{log_id, EsRaft, GroupId, LogId, NodeId, Vote};

// The controller's payloads, named here too: callers reach every frame
// payload through `codec`.
pub use crate::transport::control_codec::{
    decode_propose, decode_propose_reply, decode_read_index, decode_read_index_reply, encode_propose,
    encode_propose_reply, encode_read_index_reply, ProposeReply, ReadIndexReply,
};
pub use crate::transport::pre_vote_codec::{
    decode_pre_vote, decode_pre_vote_reply, encode_pre_vote, encode_pre_vote_reply, PreVoteReply,
    PreVoteRequest,
};

/// Smallest batch: the format's fixed header.
const BATCH_MIN_BYTES: usize = es_format::layout::HEADER_BYTES;
/// Bytes of an entry before its body: kind, term, index.
const ENTRY_HEAD_BYTES: usize = 17;
/// Bytes of a heartbeat at least: group, vote, two absent log ids.
const HEARTBEAT_MIN_BYTES: usize = 8 + 17 + 1 + 1;

const ENTRY_BLANK: u8 = 0;
const ENTRY_MEMBERSHIP: u8 = 1;
const ENTRY_BATCHES: u8 = 2;
const ENTRY_COMMAND: u8 = 3;

/// An AppendEntries without entries, as the Heartbeats frame carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub group: GroupId,
    pub vote: Vote,
    pub prev_log_id: Option<LogId>,
    pub leader_commit: Option<LogId>,
}

impl Heartbeat {
    /// The request openraft's `Raft::append_entries` takes.
    pub fn request(&self) -> AppendEntriesRequest<EsRaft> {
        AppendEntriesRequest {
            vote: self.vote,
            prev_log_id: self.prev_log_id,
            entries: Vec::new(),
            leader_commit: self.leader_commit,
        }
    }
}

/// An Error frame's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// One heartbeat's answer in a HeartbeatsOk frame.
pub type HeartbeatResult = Result<AppendEntriesResponse<NodeId>, ErrorBody>;

// --- Writing ------------------------------------------------------------------

/// Appends an AppendEntries payload to `out` (after a frame header the
/// caller reserved): the entries' batches are copied once, into `out`.
pub fn encode_append(
    out: &mut Vec<u8>,
    group: GroupId,
    rpc: &AppendEntriesRequest<EsRaft>,
) -> Result<(), TransportError> {
    put_u64(out, group);
    put_vote(out, &rpc.vote);
    put_log_id(out, &rpc.prev_log_id);
    put_log_id(out, &rpc.leader_commit);
    put_u32(out, len32(rpc.entries.len(), group)?);
    for e in &rpc.entries {
        let kind = match &e.payload {
            EsPayload::Blank => ENTRY_BLANK,
            EsPayload::Membership(_) => ENTRY_MEMBERSHIP,
            EsPayload::Batches(_) => ENTRY_BATCHES,
            EsPayload::Command(_) => ENTRY_COMMAND,
        };
        put_u8(out, kind);
        put_u64(out, e.log_id.leader_id.term);
        put_u64(out, e.log_id.index);
        match &e.payload {
            EsPayload::Blank => {}
            EsPayload::Membership(m) => {
                let body = membership::encode(m);
                put_u32(out, len32(body.len(), group)?);
                out.extend_from_slice(&body);
            }
            EsPayload::Command(c) => {
                put_u32(out, len32(c.len(), group)?);
                out.extend_from_slice(c);
            }
            EsPayload::Batches(bs) => {
                put_u32(out, len32(bs.len(), group)?);
                for b in bs {
                    out.extend_from_slice(b.bytes());
                }
            }
        }
    }
    Ok(())
}

/// An AppendEntriesOk payload.
pub fn encode_append_response(out: &mut Vec<u8>, r: &AppendEntriesResponse<NodeId>) {
    match r {
        AppendEntriesResponse::Success => put_u8(out, 0),
        AppendEntriesResponse::PartialSuccess(id) => {
            put_u8(out, 1);
            put_log_id(out, id);
        }
        AppendEntriesResponse::Conflict => put_u8(out, 2),
        AppendEntriesResponse::HigherVote(v) => {
            put_u8(out, 3);
            put_vote(out, v);
        }
    }
}

/// A Vote payload.
pub fn encode_vote(out: &mut Vec<u8>, group: GroupId, rpc: &VoteRequest<NodeId>) {
    put_u64(out, group);
    put_vote(out, &rpc.vote);
    put_log_id(out, &rpc.last_log_id);
}

/// A VoteOk payload.
pub fn encode_vote_response(out: &mut Vec<u8>, r: &VoteResponse<NodeId>) {
    put_vote(out, &r.vote);
    put_u8(out, r.vote_granted as u8);
    put_log_id(out, &r.last_log_id);
}

/// A Heartbeats payload (at most [`HEARTBEATS_PER_FRAME_MAX`]: callers split).
pub fn encode_heartbeats(out: &mut Vec<u8>, hbs: &[Heartbeat]) {
    put_u32(out, hbs.len() as u32);
    for h in hbs {
        put_u64(out, h.group);
        put_vote(out, &h.vote);
        put_log_id(out, &h.prev_log_id);
        put_log_id(out, &h.leader_commit);
    }
}

/// A HeartbeatsOk payload, the answers in the order of the heartbeats.
pub fn encode_heartbeat_results(out: &mut Vec<u8>, rs: &[HeartbeatResult]) {
    put_u32(out, rs.len() as u32);
    for r in rs {
        match r {
            Ok(r) => {
                put_u8(out, 0);
                encode_append_response(out, r);
            }
            Err(e) => {
                put_u8(out, 1);
                encode_error(out, e);
            }
        }
    }
}

/// An Error payload.
pub fn encode_error(out: &mut Vec<u8>, e: &ErrorBody) {
    put_text(out, &e.code);
    put_text(out, &e.message);
}

// --- Reading ------------------------------------------------------------------

fn entry(c: &mut Cur) -> Result<EsEntry, TransportError> {
    let kind = c.u8("entry kind")?;
    let term = c.u64("entry term")?;
    let index = c.u64("entry index")?;
    let body_len = |c: &mut Cur, what: &str| -> Result<usize, TransportError> {
        let n = c.u32(what)? as usize;
        if n > ENTRY_BODY_BYTES_MAX {
            return Err(malformed(format!("{what}: {n} bytes")));
        }
        Ok(n)
    };
    let payload = match kind {
        ENTRY_BLANK => EsPayload::Blank,
        ENTRY_MEMBERSHIP => {
            let n = body_len(c, "membership")?;
            let body = c.take(n, "membership")?;
            EsPayload::Membership(membership::decode(body).ok_or_else(|| malformed("a bad membership"))?)
        }
        ENTRY_COMMAND => {
            let n = body_len(c, "command")?;
            EsPayload::Command(c.take_bytes(n, "command")?)
        }
        ENTRY_BATCHES => {
            let n = c.count("batch count", BATCH_MIN_BYTES)?;
            if n == 0 {
                return Err(malformed("a data entry without batches"));
            }
            let mut batches = Vec::with_capacity(n);
            for _ in 0..n {
                // batch_len: little-endian u32 at 8 (es-format's layout).
                let head = c.peek(12, "batch header")?;
                let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
                if len < BATCH_MIN_BYTES {
                    return Err(malformed(format!("a batch of {len} bytes")));
                }
                batches.push(EntryBatch::Shared(c.take_bytes(len, "batch")?));
            }
            EsPayload::Batches(batches)
        }
        k => return Err(malformed(format!("unknown entry kind {k}"))),
    };
    Ok(EsEntry {
        log_id: log_id(term, index),
        payload,
    })
}

fn append_response(c: &mut Cur) -> Result<AppendEntriesResponse<NodeId>, TransportError> {
    Ok(match c.u8("append result")? {
        0 => AppendEntriesResponse::Success,
        1 => AppendEntriesResponse::PartialSuccess(c.log_id("matched")?),
        2 => AppendEntriesResponse::Conflict,
        3 => AppendEntriesResponse::HigherVote(c.vote()?),
        t => return Err(malformed(format!("unknown append result {t}"))),
    })
}

fn error(c: &mut Cur) -> Result<ErrorBody, TransportError> {
    Ok(ErrorBody {
        code: c.text("error code")?,
        message: c.text("error message")?,
    })
}

/// An AppendEntries payload: its group and request. The batches are
/// slices of `payload` (no copy).
pub fn decode_append(payload: Bytes) -> Result<(GroupId, AppendEntriesRequest<EsRaft>), TransportError> {
    let mut c = Cur::new(payload);
    let group = c.u64("group")?;
    let vote = c.vote()?;
    let prev_log_id = c.log_id("prev")?;
    let leader_commit = c.log_id("commit")?;
    let n = c.count("entry count", ENTRY_HEAD_BYTES)?;
    let mut entries = Vec::with_capacity(n);
    // openraft assumes what a leader sends is a run of its own log: the
    // entries follow `prev` one index at a time, terms never go down and
    // none is past the leader's term. It asserts that rather than checking
    // it, so a request that breaks it is refused here.
    // The index the next entry must have (`None`: past the last index).
    let mut next = match prev_log_id {
        None => Some(0),
        Some(p) => p.index.checked_add(1),
    };
    let mut term = prev_log_id.map_or(0, |p| p.leader_id.term);
    for _ in 0..n {
        let e = entry(&mut c)?;
        let id = e.log_id;
        if next != Some(id.index) {
            return Err(malformed(format!("entry {id} does not follow {prev_log_id:?}")));
        }
        if id.leader_id.term < term || id.leader_id.term > vote.leader_id.term {
            return Err(malformed(format!("entry {id}: its term is out of order")));
        }
        term = id.leader_id.term;
        next = id.index.checked_add(1);
        entries.push(e);
    }
    c.end("AppendEntries")?;
    Ok((
        group,
        AppendEntriesRequest {
            vote,
            prev_log_id,
            entries,
            leader_commit,
        },
    ))
}

/// An AppendEntriesOk payload.
pub fn decode_append_response(payload: Bytes) -> Result<AppendEntriesResponse<NodeId>, TransportError> {
    let mut c = Cur::new(payload);
    let r = append_response(&mut c)?;
    c.end("AppendEntriesOk")?;
    Ok(r)
}

/// A Vote payload: its group and request.
pub fn decode_vote(payload: Bytes) -> Result<(GroupId, VoteRequest<NodeId>), TransportError> {
    let mut c = Cur::new(payload);
    let group = c.u64("group")?;
    let vote = c.vote()?;
    let last_log_id = c.log_id("last")?;
    c.end("Vote")?;
    Ok((group, VoteRequest { vote, last_log_id }))
}

/// A VoteOk payload.
pub fn decode_vote_response(payload: Bytes) -> Result<VoteResponse<NodeId>, TransportError> {
    let mut c = Cur::new(payload);
    let vote = c.vote()?;
    let vote_granted = match c.u8("granted")? {
        0 => false,
        1 => true,
        t => return Err(malformed(format!("granted is {t}"))),
    };
    let last_log_id = c.log_id("last")?;
    c.end("VoteOk")?;
    Ok(VoteResponse {
        vote,
        vote_granted,
        last_log_id,
    })
}

/// A Heartbeats payload.
pub fn decode_heartbeats(payload: Bytes) -> Result<Vec<Heartbeat>, TransportError> {
    let mut c = Cur::new(payload);
    let n = c.count("heartbeat count", HEARTBEAT_MIN_BYTES)?;
    if n > HEARTBEATS_PER_FRAME_MAX {
        return Err(malformed(format!("{n} heartbeats in one frame")));
    }
    let mut hbs = Vec::with_capacity(n);
    for _ in 0..n {
        hbs.push(Heartbeat {
            group: c.u64("group")?,
            vote: c.vote()?,
            prev_log_id: c.log_id("prev")?,
            leader_commit: c.log_id("commit")?,
        });
    }
    c.end("Heartbeats")?;
    Ok(hbs)
}

/// A HeartbeatsOk payload.
pub fn decode_heartbeat_results(payload: Bytes) -> Result<Vec<HeartbeatResult>, TransportError> {
    let mut c = Cur::new(payload);
    let n = c.count("result count", 1)?;
    if n > HEARTBEATS_PER_FRAME_MAX {
        return Err(malformed(format!("{n} heartbeat results in one frame")));
    }
    let mut rs = Vec::with_capacity(n);
    for _ in 0..n {
        rs.push(match c.u8("result status")? {
            0 => Ok(append_response(&mut c)?),
            1 => Err(error(&mut c)?),
            t => return Err(malformed(format!("result status {t}"))),
        });
    }
    c.end("HeartbeatsOk")?;
    Ok(rs)
}

/// An Error payload.
pub fn decode_error(payload: Bytes) -> Result<ErrorBody, TransportError> {
    let mut c = Cur::new(payload);
    let e = error(&mut c)?;
    c.end("Error")?;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::types::Membership;
    use openraft::EmptyNode;
    use openraft::LeaderId;
    use proptest::prelude::*;
    use proptest::strategy::LazyJust;

    use crate::transport::codec_testing::{enc, opt_log_id, truncations_refused, vote};

    /// A batch-shaped byte string: its batch_len (LE at 8) is its length.
    fn batch() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), BATCH_MIN_BYTES..200).prop_map(|mut b| {
            let n = b.len() as u32;
            b[8..12].copy_from_slice(&n.to_le_bytes());
            Bytes::from(b)
        })
    }

    fn payload() -> impl Strategy<Value = EsPayload> {
        prop_oneof![
            LazyJust::new(|| EsPayload::Blank),
            proptest::collection::btree_set(1u64..9, 1..4).prop_map(|ids| {
                let nodes: BTreeMap<NodeId, EmptyNode> = ids.iter().map(|&i| (i, EmptyNode {})).collect();
                EsPayload::Membership(Membership::new(
                    vec![ids.into_iter().collect::<BTreeSet<_>>()],
                    nodes,
                ))
            }),
            proptest::collection::vec(batch(), 1..4)
                .prop_map(|bs| EsPayload::Batches(bs.into_iter().map(EntryBatch::Shared).collect())),
            proptest::collection::vec(any::<u8>(), 0..50).prop_map(|c| EsPayload::Command(Bytes::from(c))),
        ]
    }

    /// A request as a leader sends it: entries follow `prev`, terms rise
    /// (or stay) up to the leader's.
    fn append() -> impl Strategy<Value = (GroupId, AppendEntriesRequest<EsRaft>)> {
        (
            any::<u64>(),
            (0u64..1000, proptest::option::of(any::<u64>()), any::<bool>()),
            proptest::option::of((0u64..1000, 0u64..1 << 40)),
            opt_log_id(),
            proptest::collection::vec((0u64..3, payload()), 0..5),
        )
            .prop_map(|(g, (t, voted_for, committed), prev, leader_commit, steps)| {
                let prev_log_id = prev.map(|(term, index)| log_id(term, index));
                let mut term = prev.map_or(0, |p| p.0);
                let first = prev.map_or(0, |p| p.1 + 1);
                let mut entries = Vec::new();
                for (index, (up, payload)) in (first..).zip(steps) {
                    term += up;
                    entries.push(EsEntry {
                        log_id: log_id(term, index),
                        payload,
                    });
                }
                let vote = Vote {
                    leader_id: LeaderId {
                        term: term + t,
                        voted_for,
                    },
                    committed,
                };
                (
                    g,
                    AppendEntriesRequest {
                        vote,
                        prev_log_id,
                        entries,
                        leader_commit,
                    },
                )
            })
    }

    fn append_response() -> impl Strategy<Value = AppendEntriesResponse<NodeId>> {
        prop_oneof![
            LazyJust::new(|| AppendEntriesResponse::Success),
            LazyJust::new(|| AppendEntriesResponse::Conflict),
            opt_log_id().prop_map(AppendEntriesResponse::PartialSuccess),
            vote().prop_map(AppendEntriesResponse::HigherVote),
        ]
    }

    fn heartbeat() -> impl Strategy<Value = Heartbeat> {
        (any::<u64>(), vote(), opt_log_id(), opt_log_id()).prop_map(
            |(group, vote, prev_log_id, leader_commit)| Heartbeat {
                group,
                vote,
                prev_log_id,
                leader_commit,
            },
        )
    }

    fn error_body() -> impl Strategy<Value = ErrorBody> {
        ("[a-z_]{0,20}", ".{0,40}").prop_map(|(code, message)| ErrorBody { code, message })
    }

    fn enc_append(g: GroupId, r: &AppendEntriesRequest<EsRaft>) -> Vec<u8> {
        let mut out = Vec::new();
        encode_append(&mut out, g, r).unwrap();
        out
    }

    /// Every decoder on `b`: none panics; whatever decodes re-encodes to `b`.
    fn decode_all(b: &[u8]) -> Result<(), TestCaseError> {
        let b = Bytes::copy_from_slice(b);
        if let Ok((g, r)) = decode_append(b.clone()) {
            // A membership's JSON may be written differently than received.
            if !r
                .entries
                .iter()
                .any(|e| matches!(e.payload, EsPayload::Membership(_)))
            {
                prop_assert_eq!(&enc_append(g, &r)[..], &b[..]);
            }
        }
        if let Ok(r) = decode_append_response(b.clone()) {
            prop_assert_eq!(&enc(encode_append_response, &r)[..], &b[..]);
        }
        if let Ok((g, r)) = decode_vote(b.clone()) {
            let mut out = Vec::new();
            encode_vote(&mut out, g, &r);
            prop_assert_eq!(&out[..], &b[..]);
        }
        if let Ok(r) = decode_vote_response(b.clone()) {
            prop_assert_eq!(&enc(encode_vote_response, &r)[..], &b[..]);
        }
        if let Ok(r) = decode_heartbeats(b.clone()) {
            prop_assert_eq!(
                &enc(|o, v: &Vec<Heartbeat>| encode_heartbeats(o, v), &r)[..],
                &b[..]
            );
        }
        if let Ok(r) = decode_heartbeat_results(b.clone()) {
            prop_assert_eq!(
                &enc(|o, v: &Vec<HeartbeatResult>| encode_heartbeat_results(o, v), &r)[..],
                &b[..]
            );
        }
        if let Ok(r) = decode_error(b.clone()) {
            prop_assert_eq!(&enc(encode_error, &r)[..], &b[..]);
        }
        if let Ok(r) = decode_pre_vote(b.clone()) {
            prop_assert_eq!(&enc(encode_pre_vote, &r)[..], &b[..]);
        }
        if let Ok(r) = decode_pre_vote_reply(b.clone()) {
            prop_assert_eq!(&enc(encode_pre_vote_reply, &r)[..], &b[..]);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            decode_all(&b)?;
        }

        #[test]
        fn append_entries_round_trip_and_truncations_are_refused((g, r) in append()) {
            let b = enc_append(g, &r);
            let (g2, r2) = decode_append(Bytes::from(b.clone())).unwrap();
            prop_assert_eq!(g2, g);
            prop_assert_eq!(&enc_append(g2, &r2), &b);
            truncations_refused(&b, decode_append)?;
            // A flipped byte anywhere: decoded or refused, never a panic.
            for i in 0..b.len() {
                let mut f = b.clone();
                f[i] ^= 0x5a;
                decode_all(&f)?;
            }
        }

        #[test]
        fn responses_votes_heartbeats_and_errors_round_trip(
            ar in append_response(),
            (g, v, last) in (any::<u64>(), vote(), opt_log_id()),
            (granted, rv) in (any::<bool>(), vote()),
            hbs in proptest::collection::vec(heartbeat(), 0..20),
            results in proptest::collection::vec(prop_oneof![
                append_response().prop_map(Ok),
                error_body().prop_map(Err),
            ], 0..20),
            e in error_body(),
        ) {
            let b = enc(encode_append_response, &ar);
            prop_assert_eq!(decode_append_response(Bytes::from(b.clone())).unwrap(), ar);
            truncations_refused(&b, decode_append_response)?;

            let req = VoteRequest { vote: v, last_log_id: last };
            let mut b = Vec::new();
            encode_vote(&mut b, g, &req);
            prop_assert_eq!(decode_vote(Bytes::from(b.clone())).unwrap(), (g, req));
            truncations_refused(&b, decode_vote)?;

            let resp = VoteResponse { vote: rv, vote_granted: granted, last_log_id: last };
            let b = enc(encode_vote_response, &resp);
            prop_assert_eq!(decode_vote_response(Bytes::from(b.clone())).unwrap(), resp);
            truncations_refused(&b, decode_vote_response)?;

            let b = enc(|o, v: &Vec<Heartbeat>| encode_heartbeats(o, v), &hbs);
            prop_assert_eq!(decode_heartbeats(Bytes::from(b.clone())).unwrap(), hbs);
            truncations_refused(&b, decode_heartbeats)?;

            let b = enc(|o, v: &Vec<HeartbeatResult>| encode_heartbeat_results(o, v), &results);
            prop_assert_eq!(decode_heartbeat_results(Bytes::from(b.clone())).unwrap(), results);
            truncations_refused(&b, decode_heartbeat_results)?;

            let b = enc(encode_error, &e);
            prop_assert_eq!(decode_error(Bytes::from(b.clone())).unwrap(), e);
            truncations_refused(&b, decode_error)?;
        }
    }

    #[test]
    fn entries_that_are_not_a_run_of_the_leaders_log_are_refused() {
        let req = |prev: Option<LogId>, ids: &[(u64, u64)], vote_term: u64| AppendEntriesRequest::<EsRaft> {
            vote: Vote::new_committed(vote_term, 1),
            prev_log_id: prev,
            entries: ids
                .iter()
                .map(|&(t, i)| EsEntry {
                    log_id: log_id(t, i),
                    payload: EsPayload::Blank,
                })
                .collect(),
            leader_commit: None,
        };
        let decode = |r: AppendEntriesRequest<EsRaft>| decode_append(Bytes::from(enc_append(1, &r)));
        assert!(decode(req(None, &[(1, 0), (1, 1), (2, 2)], 2)).is_ok());
        assert!(decode(req(Some(log_id(1, 4)), &[(1, 5), (3, 6)], 3)).is_ok());
        assert!(
            decode(req(None, &[(1, 1)], 2)).is_err(),
            "the first entry is not after prev"
        );
        assert!(
            decode(req(Some(log_id(1, 4)), &[(1, 5), (1, 7)], 2)).is_err(),
            "a gap"
        );
        assert!(
            decode(req(Some(log_id(2, 4)), &[(1, 5)], 2)).is_err(),
            "a term below prev's"
        );
        assert!(
            decode(req(None, &[(2, 0), (1, 1)], 2)).is_err(),
            "a term going down"
        );
        assert!(
            decode(req(None, &[(3, 0)], 2)).is_err(),
            "a term past the leader's"
        );
        assert!(
            decode(req(Some(log_id(1, u64::MAX)), &[(1, 0)], 2)).is_err(),
            "nothing after the last index"
        );
    }

    #[test]
    fn counts_are_checked_before_allocating() {
        // An AppendEntries claiming 4 billion entries in a few bytes.
        let mut b = Vec::new();
        put_u64(&mut b, 1);
        put_vote(&mut b, &Vote::default());
        put_log_id(&mut b, &None);
        put_log_id(&mut b, &None);
        put_u32(&mut b, u32::MAX);
        assert!(matches!(
            decode_append(Bytes::from(b)),
            Err(TransportError::Malformed(_))
        ));
        // A data entry whose batch claims more bytes than there are.
        let mut b = Vec::new();
        put_u64(&mut b, 1);
        put_vote(&mut b, &Vote::default());
        put_log_id(&mut b, &None);
        put_log_id(&mut b, &None);
        put_u32(&mut b, 1);
        put_u8(&mut b, ENTRY_BATCHES);
        put_u64(&mut b, 1);
        put_u64(&mut b, 1);
        put_u32(&mut b, 1);
        let mut batch = vec![0u8; BATCH_MIN_BYTES];
        batch[8..12].copy_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&batch);
        assert!(decode_append(Bytes::from(b)).is_err());
        let mut b = Vec::new();
        put_u32(&mut b, u32::MAX);
        assert!(decode_heartbeats(Bytes::from(b.clone())).is_err());
        assert!(decode_heartbeat_results(Bytes::from(b)).is_err());
    }
}
