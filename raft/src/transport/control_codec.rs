//! The payloads of the controller's frames: a command forwarded to the
//! controller leader and its read index (big-endian; the primitives are
//! `wire`'s).
//!
//! ```text
//! 0x48 ControllerPropose    u32 len, command (the controller's JSON)
//! 0xc8 ControllerProposeOk  u8 0, u32 len, result (the controller's JSON)
//!                           | 1 not leader, opt node | 2 unavailable, text
//!                           | 3 outcome unknown, text
//! 0x49 ControllerReadIndex  (empty)
//! 0xc9 ControllerReadIndexOk  u8 0, u64 committed index | 1 not leader,
//!                           opt node | 2 unavailable, text
//! ```
//!
//! Decoders take any bytes, bound every length by what remains, and return
//! [`TransportError::Malformed`], never panic (proptests below).

use bytes::Bytes;

use crate::limits::ENTRY_BODY_BYTES_MAX;
use crate::transport::error::TransportError;
use crate::transport::wire::{malformed, put_opt_node, put_text, put_u32, put_u64, put_u8, Cur};
use crate::types::NodeId;

/// The controller leader's answer to a forwarded command (0xc8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposeReply {
    /// Committed and applied: the controller's result (its encoding).
    Applied(Bytes),
    /// The node asked does not lead the controller; who does, if known.
    /// The command was not proposed.
    NotLeader(Option<NodeId>),
    /// Not proposed: the leader could not take it (why).
    Unavailable(String),
    /// Proposed, but whether it was committed is not known (why).
    OutcomeUnknown(String),
}

/// The controller leader's answer to a read-index request (0xc9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadIndexReply {
    /// The leader's committed index, its leadership confirmed by a quorum.
    Index(u64),
    /// The node asked does not lead the controller; who does, if known.
    NotLeader(Option<NodeId>),
    /// The leader could not confirm its leadership (why).
    Unavailable(String),
}

/// A ControllerPropose payload: the command's bytes (at most
/// [`ENTRY_BODY_BYTES_MAX`]: the caller checks).
pub fn encode_propose(out: &mut Vec<u8>, command: &[u8]) {
    put_u32(out, command.len() as u32);
    out.extend_from_slice(command);
}

/// A ControllerProposeOk payload.
pub fn encode_propose_reply(out: &mut Vec<u8>, r: &ProposeReply) {
    match r {
        ProposeReply::Applied(b) => {
            put_u8(out, 0);
            put_u32(out, b.len() as u32);
            out.extend_from_slice(b);
        }
        ProposeReply::NotLeader(n) => {
            put_u8(out, 1);
            put_opt_node(out, *n);
        }
        ProposeReply::Unavailable(why) => {
            put_u8(out, 2);
            put_text(out, why);
        }
        ProposeReply::OutcomeUnknown(why) => {
            put_u8(out, 3);
            put_text(out, why);
        }
    }
}

/// A ControllerReadIndexOk payload.
pub fn encode_read_index_reply(out: &mut Vec<u8>, r: &ReadIndexReply) {
    match r {
        ReadIndexReply::Index(i) => {
            put_u8(out, 0);
            put_u64(out, *i);
        }
        ReadIndexReply::NotLeader(n) => {
            put_u8(out, 1);
            put_opt_node(out, *n);
        }
        ReadIndexReply::Unavailable(why) => {
            put_u8(out, 2);
            put_text(out, why);
        }
    }
}

/// A ControllerPropose payload: the command's bytes (a slice of `payload`).
pub fn decode_propose(payload: Bytes) -> Result<Bytes, TransportError> {
    let mut c = Cur::new(payload);
    let n = c.u32("command length")? as usize;
    if n > ENTRY_BODY_BYTES_MAX {
        return Err(malformed(format!("a command of {n} bytes")));
    }
    let command = c.take_bytes(n, "command")?;
    c.end("ControllerPropose")?;
    Ok(command)
}

/// A ControllerProposeOk payload. The result is a slice of `payload`,
/// bounded by the frame it came in.
pub fn decode_propose_reply(payload: Bytes) -> Result<ProposeReply, TransportError> {
    let mut c = Cur::new(payload);
    let r = match c.u8("propose status")? {
        0 => {
            let n = c.u32("result length")? as usize;
            ProposeReply::Applied(c.take_bytes(n, "result")?)
        }
        1 => ProposeReply::NotLeader(c.opt_node()?),
        2 => ProposeReply::Unavailable(c.text("why")?),
        3 => ProposeReply::OutcomeUnknown(c.text("why")?),
        t => return Err(malformed(format!("propose status {t}"))),
    };
    c.end("ControllerProposeOk")?;
    Ok(r)
}

/// A ControllerReadIndex payload: empty.
pub fn decode_read_index(payload: Bytes) -> Result<(), TransportError> {
    Cur::new(payload).end("ControllerReadIndex")
}

/// A ControllerReadIndexOk payload.
pub fn decode_read_index_reply(payload: Bytes) -> Result<ReadIndexReply, TransportError> {
    let mut c = Cur::new(payload);
    let r = match c.u8("read index status")? {
        0 => ReadIndexReply::Index(c.u64("index")?),
        1 => ReadIndexReply::NotLeader(c.opt_node()?),
        2 => ReadIndexReply::Unavailable(c.text("why")?),
        t => return Err(malformed(format!("read index status {t}"))),
    };
    c.end("ControllerReadIndexOk")?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::codec_testing::{enc, truncations_refused};
    use proptest::prelude::*;

    /// Every decoder on `b`: none panics; whatever decodes re-encodes to `b`.
    fn decode_all(b: &[u8]) -> Result<(), TestCaseError> {
        let b = Bytes::copy_from_slice(b);
        if let Ok(c) = decode_propose(b.clone()) {
            prop_assert_eq!(&enc(|o, c: &Bytes| encode_propose(o, c), &c)[..], &b[..]);
        }
        if let Ok(r) = decode_propose_reply(b.clone()) {
            prop_assert_eq!(&enc(encode_propose_reply, &r)[..], &b[..]);
        }
        if decode_read_index(b.clone()).is_ok() {
            prop_assert!(b.is_empty());
        }
        if let Ok(r) = decode_read_index_reply(b.clone()) {
            prop_assert_eq!(&enc(encode_read_index_reply, &r)[..], &b[..]);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            decode_all(&b)?;
        }
    }

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(any::<char>(), 0..20).prop_map(|c| c.into_iter().collect())
    }

    fn propose_reply() -> impl Strategy<Value = ProposeReply> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..80).prop_map(|b| ProposeReply::Applied(Bytes::from(b))),
            proptest::option::of(any::<u64>()).prop_map(ProposeReply::NotLeader),
            text().prop_map(ProposeReply::Unavailable),
            text().prop_map(ProposeReply::OutcomeUnknown),
        ]
    }

    fn read_index_reply() -> impl Strategy<Value = ReadIndexReply> {
        prop_oneof![
            any::<u64>().prop_map(ReadIndexReply::Index),
            proptest::option::of(any::<u64>()).prop_map(ReadIndexReply::NotLeader),
            text().prop_map(ReadIndexReply::Unavailable),
        ]
    }

    /// Every byte of `b` flipped in turn: decoded or refused, never a panic.
    fn flips_never_panic(b: &[u8]) -> Result<(), TestCaseError> {
        for i in 0..b.len() {
            let mut f = b.to_vec();
            f[i] ^= 0x5a;
            decode_all(&f)?;
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn controller_frames_round_trip_and_truncations_are_refused(
            command in proptest::collection::vec(any::<u8>(), 0..200),
            pr in propose_reply(),
            rr in read_index_reply(),
        ) {
            let b = enc(|o, c: &Vec<u8>| encode_propose(o, c), &command);
            prop_assert_eq!(&decode_propose(Bytes::from(b.clone())).unwrap()[..], &command[..]);
            truncations_refused(&b, decode_propose)?;
            flips_never_panic(&b)?;

            let b = enc(encode_propose_reply, &pr);
            prop_assert_eq!(decode_propose_reply(Bytes::from(b.clone())).unwrap(), pr);
            truncations_refused(&b, decode_propose_reply)?;
            flips_never_panic(&b)?;

            let b = enc(encode_read_index_reply, &rr);
            prop_assert_eq!(decode_read_index_reply(Bytes::from(b.clone())).unwrap(), rr);
            truncations_refused(&b, decode_read_index_reply)?;
            flips_never_panic(&b)?;
        }
    }

    #[test]
    fn a_command_over_the_bound_is_refused_before_it_is_read() {
        let mut b = Vec::new();
        put_u32(&mut b, (ENTRY_BODY_BYTES_MAX + 1) as u32);
        b.resize(4 + ENTRY_BODY_BYTES_MAX + 1, b'x');
        assert!(decode_propose(Bytes::from(b)).is_err());
        assert!(decode_read_index(Bytes::from_static(b"x")).is_err());
        let mut b = Vec::new();
        put_u8(&mut b, 0);
        put_u32(&mut b, u32::MAX);
        assert!(
            decode_propose_reply(Bytes::from(b)).is_err(),
            "a result longer than its frame"
        );
    }
}
