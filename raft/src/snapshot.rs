//! `EsSnapshot`: what a snapshot of an es state machine holds.
//!
//! Phase 0-1: an image (bytes) of the state machine: the in-memory test
//! machine's state, or a partition's descriptor (`partition_sm.rs`). The
//! partition snapshot that streams committed segments to a late replica
//! (the spec's §5) replaces it in phase 3.

/// A snapshot's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EsSnapshot {
    /// The state machine's image, as its `build_snapshot` encoded it.
    Image(Vec<u8>),
}

impl EsSnapshot {
    /// The image's bytes.
    pub fn image(&self) -> &[u8] {
        match self {
            EsSnapshot::Image(b) => b,
        }
    }
}
