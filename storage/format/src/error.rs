//! `BatchError`: why bytes are not a valid batch.

/// Why bytes are not a valid batch (or run of batches).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// More bytes are needed to hold the header or the whole batch.
    #[error("incomplete batch: need {needed} bytes, have {have}")]
    Incomplete { needed: usize, have: usize },
    /// The bytes can never be a valid batch.
    #[error("malformed batch: {0}")]
    Malformed(String),
}
