//! es-protocol: the es binary protocol.
//!
//! A pure codec: frames (length-prefixed, request id, gzip flag), the
//! request and response payloads, error codes. No I/O and no async runtime;
//! the blocking client behind the `client` feature is the one exception and
//! lives in its own module. docs/protocol.md gives every byte; `limits` every bound. The
//! record-batch format is es-format's (`batch` is the protocol's face on it).
//!
//! Nothing here panics on what a peer sends: `unwrap` and indexing are
//! denied outside tests.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod batch;
pub mod codec;
pub mod error;
pub mod frame;
pub mod kind;
pub mod limits;
pub mod message;
pub mod requests;

#[cfg(feature = "client")]
pub mod client;

pub use error::{DecodeError, ErrorCode};
pub use frame::{Frame, FrameHeader, FLAG_GZIP, HEADER_BYTES};
pub use kind::Kind;
pub use message::{Request, Response};

/// The newest protocol version this crate speaks: 2 adds the Error
/// frame's `details` (docs/protocol.md, "Versions").
pub const PROTOCOL_VERSION: u16 = 2;

/// The oldest protocol version this crate still speaks (a broker answers
/// clients of any version from this one to [`PROTOCOL_VERSION`]).
pub const PROTOCOL_VERSION_MIN: u16 = 1;

/// The version a peer offering `min..=max` and this crate agree on: the
/// newest both speak, or `None`.
pub fn negotiate(min: u16, max: u16) -> Option<u16> {
    let v = max.min(PROTOCOL_VERSION);
    (v >= min.max(PROTOCOL_VERSION_MIN)).then_some(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn negotiates_the_newest_common_version() {
        use super::negotiate;
        assert_eq!(negotiate(1, 1), Some(1), "a version 1 client keeps version 1");
        assert_eq!(negotiate(1, 2), Some(2));
        assert_eq!(negotiate(1, 9), Some(2), "a newer client gets ours");
        assert_eq!(negotiate(2, 2), Some(2));
        assert_eq!(negotiate(3, 9), None);
        assert_eq!(negotiate(0, 0), None);
    }
}
