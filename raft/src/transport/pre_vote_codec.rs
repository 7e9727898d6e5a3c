//! The pre-vote frames' payloads (0x46, `crate::pre_vote`): fixed-size,
//! so a decoder reads at most [`PRE_VOTE_BYTES_MAX`] bytes and refuses
//! anything longer.
//!
//! ```text
//! 0x46 PreVote    u64 group, u64 term (the one the candidate would
//!                 campaign in), opt logid last (the candidate's)
//! 0xc6 PreVoteOk  u8 granted, u64 term (the answering replica's)
//! ```

use bytes::Bytes;

use crate::transport::error::TransportError;
use crate::transport::wire::{malformed, put_log_id, put_u64, put_u8, Cur};
use crate::types::{GroupId, LogId};

/// Bytes of the longest PreVote payload: group, term, a present log id.
pub const PRE_VOTE_BYTES_MAX: usize = 8 + 8 + 17;

/// A pre-vote request: may the sender campaign in `term`?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreVoteRequest {
    pub group: GroupId,
    /// The candidate's current term + 1.
    pub term: u64,
    /// The candidate's last log id.
    pub last_log_id: Option<LogId>,
}

/// The answer to a [`PreVoteRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreVoteReply {
    pub granted: bool,
    /// The answering replica's current term (for the candidate's logs).
    pub term: u64,
}

/// A PreVote payload.
pub fn encode_pre_vote(out: &mut Vec<u8>, r: &PreVoteRequest) {
    put_u64(out, r.group);
    put_u64(out, r.term);
    put_log_id(out, &r.last_log_id);
}

/// A PreVoteOk payload.
pub fn encode_pre_vote_reply(out: &mut Vec<u8>, r: &PreVoteReply) {
    put_u8(out, r.granted as u8);
    put_u64(out, r.term);
}

/// A PreVote payload.
pub fn decode_pre_vote(payload: Bytes) -> Result<PreVoteRequest, TransportError> {
    if payload.len() > PRE_VOTE_BYTES_MAX {
        return Err(malformed(format!("a PreVote of {} bytes", payload.len())));
    }
    let mut c = Cur::new(payload);
    let group = c.u64("group")?;
    let term = c.u64("term")?;
    let last_log_id = c.log_id("last")?;
    c.end("PreVote")?;
    Ok(PreVoteRequest {
        group,
        term,
        last_log_id,
    })
}

/// A PreVoteOk payload.
pub fn decode_pre_vote_reply(payload: Bytes) -> Result<PreVoteReply, TransportError> {
    let mut c = Cur::new(payload);
    let granted = match c.u8("granted")? {
        0 => false,
        1 => true,
        t => return Err(malformed(format!("granted is {t}"))),
    };
    let term = c.u64("term")?;
    c.end("PreVoteOk")?;
    Ok(PreVoteReply { granted, term })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::codec_testing::{enc, opt_log_id, truncations_refused};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn random_bytes_never_panic_and_what_decodes_re_encodes(
            b in proptest::collection::vec(any::<u8>(), 0..60),
        ) {
            let bytes = Bytes::from(b.clone());
            if let Ok(r) = decode_pre_vote(bytes.clone()) {
                prop_assert_eq!(enc(encode_pre_vote, &r), b.clone());
            }
            if let Ok(r) = decode_pre_vote_reply(bytes) {
                prop_assert_eq!(enc(encode_pre_vote_reply, &r), b);
            }
        }

        #[test]
        fn pre_votes_round_trip_and_truncations_are_refused(
            group in any::<u64>(),
            term in any::<u64>(),
            last in opt_log_id(),
            granted in any::<bool>(),
        ) {
            let req = PreVoteRequest { group, term, last_log_id: last };
            let b = enc(encode_pre_vote, &req);
            prop_assert!(b.len() <= PRE_VOTE_BYTES_MAX);
            prop_assert_eq!(decode_pre_vote(Bytes::from(b.clone())).unwrap(), req);
            truncations_refused(&b, decode_pre_vote)?;
            for i in 0..b.len() {
                let mut f = b.clone();
                f[i] ^= 0x5a;
                if let Ok(r) = decode_pre_vote(Bytes::from(f.clone())) {
                    prop_assert_eq!(enc(encode_pre_vote, &r), f);
                }
            }

            let reply = PreVoteReply { granted, term };
            let b = enc(encode_pre_vote_reply, &reply);
            prop_assert_eq!(decode_pre_vote_reply(Bytes::from(b.clone())).unwrap(), reply);
            truncations_refused(&b, decode_pre_vote_reply)?;
        }
    }
}
