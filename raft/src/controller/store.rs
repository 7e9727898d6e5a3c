//! `ControllerStore`: the controller group's Raft log, a partition log in
//! format version 2 like any replica's ([`LogStore`]), under
//! `data/raft/__controller/log/` with the group's vote and snapshot in
//! `data/raft/__controller/`.
//!
//! A command (openraft's `EsPayload::Command`, what the leader's
//! `client_write` appends) is written as a data batch of one record whose
//! value is the command's JSON; everything else is the partition log
//! store's. Read back, a command entry is that batch (`EsPayload::Batches`),
//! sent to followers as stored bytes (their logs byte-identical, checked as
//! any replica's) and decoded by the state machine
//! ([`ControllerSm`](super::machine::ControllerSm)).

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::time::{SystemTime, UNIX_EPOCH};

use es_storage::batch::{encode_v2, RaftStamp};
use es_storage::{BatchBuf, Offset, ProducerStamp, Record};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageError, StorageIOError};

use crate::entry::{EntryBatch, EsEntry, EsPayload};
use crate::limits::ENTRY_BODY_BYTES_MAX;
use crate::log_store::LogStore;
use crate::types::{EsRaft, LogId, StorageResult, Vote};

/// The controller group's log store; clones share it.
#[derive(Clone)]
pub struct ControllerStore(LogStore);

/// A command as the batch that holds it: one record, no key, the command
/// as its value, stamped by the leader's log when placed.
// openraft's StorageError is what its storage traits return.
#[allow(clippy::result_large_err)]
pub fn command_batch(command: &[u8]) -> StorageResult<BatchBuf> {
    if command.len() > ENTRY_BODY_BYTES_MAX {
        return Err(StorageError::from(StorageIOError::write_logs(
            &std::io::Error::other(format!("a controller command of {} bytes", command.len())),
        )));
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let record = Record {
        key: None,
        value: command.to_vec(),
        timestamp_ms: now_ms,
    };
    let mut out = Vec::new();
    encode_v2(
        Offset(0),
        &[record],
        ProducerStamp::NONE,
        RaftStamp::default(),
        &mut out,
    );
    Ok(BatchBuf::from(out))
}

impl ControllerStore {
    /// The store over `log` (opened by the caller).
    pub fn new(log: LogStore) -> ControllerStore {
        ControllerStore(log)
    }

    /// The partition log store underneath.
    pub fn log_store(&self) -> &LogStore {
        &self.0
    }
}

impl RaftLogReader<EsRaft> for ControllerStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<EsEntry>> {
        self.0.try_get_log_entries(range).await
    }
}

impl RaftLogStorage<EsRaft> for ControllerStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<EsRaft>> {
        self.0.get_log_state().await
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.0.get_log_reader().await
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        self.0.save_vote(vote).await
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        self.0.read_vote().await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> StorageResult<()> {
        self.0.save_committed(committed).await
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId>> {
        self.0.read_committed().await
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<EsRaft>) -> StorageResult<()>
    where
        I: IntoIterator<Item = EsEntry>,
    {
        let mut placed = Vec::new();
        for e in entries {
            let payload = match e.payload {
                EsPayload::Command(c) => EsPayload::Batches(vec![EntryBatch::Owned(command_batch(&c)?)]),
                other => other,
            };
            placed.push(EsEntry {
                log_id: e.log_id,
                payload,
            });
        }
        self.0.append(placed, callback).await
    }

    async fn truncate(&mut self, from: LogId) -> StorageResult<()> {
        self.0.truncate(from).await
    }

    async fn purge(&mut self, upto: LogId) -> StorageResult<()> {
        // The partition log's purge (the purged id saved, the cleanup
        // limit raised); then, off openraft's path, cleanup deletes the
        // closed segments wholly below it (`ControllerConfig::log_config`).
        self.0.purge(upto).await?;
        let log = self.0.log();
        glommio::spawn_local(async move {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let (report, result) = log.cleanup(now).await;
            if let Err(e) = result {
                tracing::warn!(error = %e, "controller log cleanup failed; the next purge tries again");
            } else if report.segments_deleted > 0 {
                tracing::info!(
                    segments = report.segments_deleted,
                    "controller log segments deleted behind its snapshot"
                );
            }
        })
        .detach();
        Ok(())
    }
}

/// The command an entry's batches carry: the value of their one record.
pub fn command_of(batches: &[EntryBatch]) -> Result<Vec<u8>, String> {
    let [b] = batches else {
        return Err(format!("a controller entry of {} batches", batches.len()));
    };
    let bytes = b.bytes();
    let h = es_storage::batch::BatchHeader::parse(bytes).map_err(|e| e.to_string())?;
    let mut records = es_storage::batch::records(&h, bytes).map_err(|e| e.to_string())?;
    if records.len() != 1 {
        return Err(format!("a controller batch of {} records", records.len()));
    }
    Ok(records.swap_remove(0).value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_one_record_and_reads_back() {
        let b = command_batch(b"{\"x\":1}").unwrap();
        let got = command_of(&[EntryBatch::Shared(bytes::Bytes::copy_from_slice(&b))]).unwrap();
        assert_eq!(got, b"{\"x\":1}");
        assert!(command_of(&[]).is_err());
        let two = [
            EntryBatch::Shared(bytes::Bytes::copy_from_slice(&b)),
            EntryBatch::Shared(bytes::Bytes::copy_from_slice(&b)),
        ];
        assert!(command_of(&two).is_err());
        assert!(command_of(&[EntryBatch::Shared(bytes::Bytes::from_static(b"short"))]).is_err());
        assert!(command_batch(&vec![b'x'; ENTRY_BODY_BYTES_MAX + 1]).is_err());
    }
}
