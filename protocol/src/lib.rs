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

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 1;
