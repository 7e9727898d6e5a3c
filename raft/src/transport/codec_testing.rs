//! What the codecs' property tests share (tests only): strategies for the
//! types every frame family carries, an encoder call, and the check that
//! a payload cut short or one byte too long is refused.

use bytes::Bytes;
use openraft::LeaderId;
use proptest::prelude::*;

use crate::transport::error::TransportError;
use crate::types::{log_id, LogId, Vote};

pub fn vote() -> impl Strategy<Value = Vote> {
    (any::<u64>(), proptest::option::of(any::<u64>()), any::<bool>()).prop_map(
        |(term, voted_for, committed)| Vote {
            leader_id: LeaderId { term, voted_for },
            committed,
        },
    )
}

pub fn opt_log_id() -> impl Strategy<Value = Option<LogId>> {
    proptest::option::of((any::<u64>(), any::<u64>()).prop_map(|(t, i)| log_id(t, i)))
}

/// `v` as `f` encodes it.
pub fn enc<T>(f: impl Fn(&mut Vec<u8>, &T), v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut out, v);
    out
}

/// Every proper prefix of a valid payload is refused, and so is one
/// trailing byte.
pub fn truncations_refused<T: std::fmt::Debug>(
    b: &[u8],
    decode: impl Fn(Bytes) -> Result<T, TransportError>,
) -> Result<(), TestCaseError> {
    for cut in 0..b.len() {
        prop_assert!(
            decode(Bytes::copy_from_slice(&b[..cut])).is_err(),
            "cut at {}",
            cut
        );
    }
    let mut longer = b.to_vec();
    longer.push(0);
    prop_assert!(decode(Bytes::from(longer)).is_err(), "a trailing byte");
    Ok(())
}
