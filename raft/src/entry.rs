//! `EsEntry`: one Raft log entry of es, and what a client proposes
//! ([`Proposal`]) and gets back ([`Applied`]).
//!
//! A data entry is one or more record batches: on the leader, as produced
//! ([`EntryBatch::Owned`], moved into the log without a copy); read back
//! from a log, as shared bytes ([`EntryBatch::Shared`]). Blank and
//! membership entries become zero-width control batches in a partition
//! log (docs/design/raft-storage.md).

use std::fmt;

use bytes::Bytes;
use es_storage::BatchBuf;
use openraft::entry::{FromAppData, RaftEntry, RaftPayload};
use openraft::{EmptyNode, RaftLogId};

use crate::types::{LogId, Membership, NodeId};

/// What a client proposes.
#[derive(Debug)]
pub enum Proposal {
    /// Record batches for a partition, in the order they get offsets.
    Batches(Vec<BatchBuf>),
    /// A controller command (its encoding is the controller's).
    Command(Bytes),
}

/// What applying an entry returns to its proposer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The base offset each batch of a `Batches` entry got (a retry of an
    /// idempotent batch: the first write's).
    Offsets(Vec<u64>),
    /// Per batch of a `Batches` entry, its base offset or why the
    /// partition's idempotent window refused it at apply (only when one
    /// was refused; `partition_sm.rs`).
    Produced(Vec<Result<u64, crate::controller::Refusal>>),
    /// The result of a controller command (its encoding is the controller's).
    Command(Bytes),
    /// Blank and membership entries.
    None,
}

/// One record batch of a data entry.
pub enum EntryBatch {
    /// As produced, on the leader before it is appended.
    Owned(BatchBuf),
    /// Read back from a log (or received from the leader).
    Shared(Bytes),
}

impl EntryBatch {
    /// The batch's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            EntryBatch::Owned(b) => b,
            EntryBatch::Shared(b) => b,
        }
    }
}

impl fmt::Debug for EntryBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Batch({} bytes)", self.bytes().len())
    }
}

/// What an entry carries.
#[derive(Debug)]
pub enum EsPayload {
    /// The entry a new leader appends.
    Blank,
    /// A membership change (and the first entry of a group).
    Membership(Membership),
    /// Record batches.
    Batches(Vec<EntryBatch>),
    /// A controller command.
    Command(Bytes),
}

/// One entry of an es Raft log.
#[derive(Debug)]
pub struct EsEntry {
    pub log_id: LogId,
    pub payload: EsPayload,
}

impl fmt::Display for EsEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.payload {
            EsPayload::Blank => "blank".to_string(),
            EsPayload::Membership(m) => format!("membership {m:?}"),
            EsPayload::Batches(b) => format!("{} batches", b.len()),
            EsPayload::Command(c) => format!("command of {} bytes", c.len()),
        };
        write!(f, "{}: {what}", self.log_id)
    }
}

impl RaftPayload<NodeId, EmptyNode> for EsEntry {
    fn is_blank(&self) -> bool {
        matches!(self.payload, EsPayload::Blank)
    }

    fn get_membership(&self) -> Option<&Membership> {
        match &self.payload {
            EsPayload::Membership(m) => Some(m),
            _ => None,
        }
    }
}

impl RaftLogId<NodeId> for EsEntry {
    fn get_log_id(&self) -> &LogId {
        &self.log_id
    }

    fn set_log_id(&mut self, log_id: &LogId) {
        self.log_id = *log_id;
    }
}

impl RaftEntry<NodeId, EmptyNode> for EsEntry {
    fn new_blank(log_id: LogId) -> Self {
        EsEntry {
            log_id,
            payload: EsPayload::Blank,
        }
    }

    fn new_membership(log_id: LogId, m: Membership) -> Self {
        EsEntry {
            log_id,
            payload: EsPayload::Membership(m),
        }
    }
}

impl FromAppData<Proposal> for EsEntry {
    fn from_app_data(p: Proposal) -> Self {
        let payload = match p {
            Proposal::Batches(b) => EsPayload::Batches(b.into_iter().map(EntryBatch::Owned).collect()),
            Proposal::Command(c) => EsPayload::Command(c),
        };
        EsEntry {
            log_id: LogId::default(),
            payload,
        }
    }
}

impl EsEntry {
    /// A copy of the entry whose batches are shared bytes (an owned batch
    /// is copied once): what an in-memory log keeps and hands out.
    pub fn duplicate(&self) -> EsEntry {
        let payload = match &self.payload {
            EsPayload::Blank => EsPayload::Blank,
            EsPayload::Membership(m) => EsPayload::Membership(m.clone()),
            EsPayload::Command(c) => EsPayload::Command(c.clone()),
            EsPayload::Batches(bs) => EsPayload::Batches(
                bs.iter()
                    .map(|b| match b {
                        EntryBatch::Owned(b) => EntryBatch::Shared(Bytes::copy_from_slice(b)),
                        EntryBatch::Shared(b) => EntryBatch::Shared(b.clone()),
                    })
                    .collect(),
            ),
        };
        EsEntry {
            log_id: self.log_id,
            payload,
        }
    }
}
