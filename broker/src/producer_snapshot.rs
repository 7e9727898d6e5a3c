//! Producer state of a partition across restarts: a snapshot written at
//! clean shutdown and after each start-up rebuild
//! (`<data-dir>/producers/<topic>/<partition>.json`, atomic), plus a scan of
//! the batches written after it. Without a usable snapshot the whole log is
//! scanned: the batches carry producer id, epoch and sequence, so the state
//! is derived data and a crash can never make a retry write twice.

use std::path::{Path, PathBuf};

use es_storage::{Offset, PartitionLog};
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::idempotence::{ProducerTable, TableImage};

/// Bytes read per step while scanning a log for producer batches.
const SCAN_READ_BYTES: usize = 4 << 20;

#[derive(Serialize, Deserialize)]
struct Snapshot {
    /// The state covers every batch below this offset.
    offset: u64,
    producers: TableImage,
}

fn dir(data_dir: &Path, topic: &str) -> PathBuf {
    data_dir.join("producers").join(topic)
}

/// Saves `table`, valid for the log below `offset`.
pub async fn save(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    table: &ProducerTable,
    offset: Offset,
) -> Result<(), ApiError> {
    let snap = Snapshot {
        offset: offset.0,
        producers: table.image(),
    };
    let bytes = serde_json::to_vec(&snap).expect("snapshot serializes");
    crate::fsops::write_atomic(&dir(data_dir, topic), &format!("{partition}.json"), bytes).await
}

/// Removes a topic's snapshots (topic deleted).
pub async fn remove_topic(data_dir: &Path, topic: &str) -> Result<(), ApiError> {
    crate::fsops::remove_dir_all(&dir(data_dir, topic)).await
}

/// The producer table of `log`: the snapshot if it is usable, then every
/// batch after it; and whether that took no batch (so the snapshot on disk,
/// or its absence with nothing to read, still says it all: no save needed).
pub async fn load(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    log: &PartitionLog,
) -> Result<(ProducerTable, bool), ApiError> {
    let path = dir(data_dir, topic).join(format!("{partition}.json"));
    let end = log.durable_offset();
    // `kept`: what is on disk (a usable snapshot, or none) may stay.
    let (mut table, mut from, kept) = match crate::fsops::read_small(&path).await? {
        Some(bytes) => match serde_json::from_slice::<Snapshot>(&bytes) {
            // A snapshot past the log's end describes batches recovery
            // trimmed: not usable.
            Ok(s) if s.offset <= end.0 => (ProducerTable::from_image(s.producers), Offset(s.offset), true),
            Ok(_) => (ProducerTable::default(), log.log_start_offset(), false),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable producer snapshot; rebuilding from the log");
                (ProducerTable::default(), log.log_start_offset(), false)
            }
        },
        None => (ProducerTable::default(), log.log_start_offset(), true),
    };
    from = from.max(log.log_start_offset());
    let current = kept && from >= end;
    while from < end {
        let batches = log
            .read_batches(from, SCAN_READ_BYTES, end)
            .await
            .map_err(ApiError::storage)?;
        let Some(last) = batches.last() else { break };
        let next = last.header.next_offset();
        for b in &batches {
            table.rebuild(
                b.header.producer,
                b.header.last_offset_delta + 1,
                b.header.base_offset.0,
            );
        }
        if next <= from {
            break;
        }
        from = next;
    }
    // The producer id registry's next id stays past every id seen here.
    if let Some(id) = table.largest_producer_id() {
        crate::producer_ids::note_partition_producer_id(id);
    }
    Ok((table, current))
}
