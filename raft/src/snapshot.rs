//! `EsSnapshot`: what a snapshot of an es state machine holds.
//!
//! A built snapshot is an image (bytes): the in-memory test machine's
//! state, or a partition's descriptor (`partition_sm.rs`): the records it
//! covers are the log itself. A snapshot received from a leader
//! (`snapshot_recv.rs`) is `Staged`: the descriptor, the run of the
//! leader's log this replica lacked, staged in `incoming/`, and where that
//! run starts; installing it (`snapshot_install.rs`) puts the run in the
//! log (docs/design/raft-snapshots.md).

use crate::types::LogId;

/// A snapshot's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EsSnapshot {
    /// The state machine's image, as its `build_snapshot` encoded it.
    Image(Vec<u8>),
    /// Received from a leader, to install.
    Staged(StagedSuffix),
}

/// Where a whole-log install starts the log again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    /// The offset of the first staged batch.
    pub offset: u64,
    /// The index of the first staged entry.
    pub index: u64,
}

/// A snapshot received from a leader: its descriptor and the entries this
/// replica lacked, staged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedSuffix {
    /// The snapshot's descriptor (`partition_sm.rs`, the idempotent
    /// window's image included), as the leader sent it.
    pub descriptor: Vec<u8>,
    /// The last entry this replica keeps: the staged entries follow it
    /// (`None`: they replace the whole log).
    pub after: Option<LogId>,
    /// Where the staged entries start when they replace the whole log (the
    /// leader's first hot offset and the index of its first entry there):
    /// the log is reset to start there (`PartitionLog::reset_to`).
    pub start: Option<Start>,
    /// The staged file's name in `incoming/`; `None`: nothing was streamed
    /// (this replica held the snapshot's entries).
    pub staged: Option<String>,
}

impl EsSnapshot {
    /// The image's bytes (a staged snapshot's: its descriptor).
    pub fn image(&self) -> &[u8] {
        match self {
            EsSnapshot::Image(b) => b,
            EsSnapshot::Staged(s) => &s.descriptor,
        }
    }
}
