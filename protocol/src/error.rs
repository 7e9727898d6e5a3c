//! Decoding errors, and the error codes shared with the HTTP API.

/// Why bytes are not a valid frame or payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// More bytes are needed (only from [`crate::frame::check`]).
    #[error("incomplete frame: need {needed} bytes, have {have}")]
    Incomplete { needed: usize, have: usize },
    /// The frame is larger than the receiver's limit.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
    /// The bytes can never be valid.
    #[error("malformed: {0}")]
    Malformed(String),
}

impl DecodeError {
    pub fn malformed(what: impl Into<String>) -> DecodeError {
        DecodeError::Malformed(what.into())
    }
}

/// A record batch that does not decode makes its frame malformed: the
/// format's reason, as is. (`Incomplete` stays the frame reader's own.)
impl From<es_format::BatchError> for DecodeError {
    fn from(e: es_format::BatchError) -> DecodeError {
        match e {
            es_format::BatchError::Malformed(why) => DecodeError::Malformed(why),
            e @ es_format::BatchError::Incomplete { .. } => DecodeError::Malformed(e.to_string()),
        }
    }
}

/// Error codes carried by error frames: the same snake_case codes as the
/// HTTP API (docs/api.md), plus the protocol's own.
pub struct ErrorCode;

impl ErrorCode {
    /// A frame or payload could not be decoded; the connection is closed.
    pub const MALFORMED_FRAME: &'static str = "malformed_frame";
    /// A frame over the size limit; the connection is closed.
    pub const FRAME_TOO_LARGE: &'static str = "frame_too_large";
    /// An unknown request kind; the connection is closed.
    pub const UNKNOWN_REQUEST: &'static str = "unknown_request";
    /// The first frame was not a Hello, or no common version.
    pub const HANDSHAKE_REQUIRED: &'static str = "handshake_required";
    pub const UNSUPPORTED_VERSION: &'static str = "unsupported_version";
    /// A frame of 64 KiB or more stopped arriving midway for the broker's
    /// `--frame-stall-ms` (it held room other requests need); the
    /// connection is closed.
    pub const FRAME_STALLED: &'static str = "frame_stalled";
    /// No API key, or one that is malformed, unknown, wrong or revoked
    /// (`--auth required`); the connection is closed.
    pub const UNAUTHENTICATED: &'static str = "unauthenticated";
    /// The key has no grant for this operation; the connection stays open.
    pub const FORBIDDEN: &'static str = "forbidden";
    /// The group or producer id belongs to another key.
    pub const NOT_OWNER: &'static str = "not_owner";
    /// Key management: no key has that id.
    pub const KEY_NOT_FOUND: &'static str = "key_not_found";
    /// Revoking or demoting the last admin key.
    pub const LAST_ADMIN: &'static str = "last_admin";
    /// Cluster mode: this broker does not lead the partition; the Error
    /// frame's details (version 2) name the leader, `{"leader": {...}}`
    /// or null, or per partition `{"leaders": {"<p>": ...}}`. Definite:
    /// nothing was written, so the request may be sent to the leader.
    pub const NOT_LEADER: &'static str = "not_leader";
    /// Cluster mode: no leader now (an election, or a lost quorum);
    /// nothing was written: retry after a backoff.
    pub const LEADER_NOT_AVAILABLE: &'static str = "leader_not_available";
    /// Cluster mode: proposed, but whether it was written is unknown; only
    /// an idempotent producer may retry it (same sequence).
    pub const OUTCOME_UNKNOWN: &'static str = "outcome_unknown";
    /// Cluster mode: group requests go to the coordinator (the controller
    /// leader's node); the details (version 2) name it,
    /// `{"coordinator": {...}}` or null. Nothing was done.
    pub const NOT_COORDINATOR: &'static str = "not_coordinator";
    /// Cluster mode: no group coordinator now (the controller group is
    /// electing); nothing was done: retry after a backoff.
    pub const COORDINATOR_NOT_AVAILABLE: &'static str = "coordinator_not_available";
    /// The request names something that does not exist (`DescribeCluster`
    /// on a standalone broker).
    pub const NOT_FOUND: &'static str = "not_found";
}
