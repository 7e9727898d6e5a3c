//! Producer state of a partition across restarts: a snapshot
//! (`<data-dir>/producers/<topic>/<partition>.json`, atomic) of the
//! partition's producer table as it stood at one offset, plus a scan of the
//! batches written after it. The batches carry producer id, epoch and
//! sequence, so the state is derived data and a crash can never make a
//! retry write twice; the snapshot only shortens the scan.
//!
//! A snapshot is taken when the partition opens (after its rebuild), when
//! a segment rolls (as Kafka writes one per segment), after the expiry
//! sweep forgot producers of the partition, and at a clean close. So after
//! a `kill -9` start-up scans only the batches of the active segment, the
//! one recovery scans anyway, however much was written since the start.
//!
//! Invariant: a snapshot describes exactly the batches below its offset,
//! and is written only once they are all durable. It is captured
//! synchronously (the table then holds exactly the batches placed below
//! the log's next offset: a batch is placed and recorded with no await
//! between) and written after `wait_durable` of that offset; if that never
//! comes (a failed fsync), nothing is written.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use es_storage::{Offset, PartitionLog};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorCode};
use crate::limits::{PRODUCER_SCAN_READ_BYTES, SNAPSHOT_WRITES_PER_SHARD_MAX};
use crate::producers::idempotence::{ProducerImage, ProducerTable, TableImage};

thread_local! {
    /// The shard's turns to write a snapshot (one shard per thread).
    static WRITE_TURNS: Rc<glommio::sync::Semaphore> =
        Rc::new(glommio::sync::Semaphore::new(SNAPSHOT_WRITES_PER_SHARD_MAX));
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    /// The state covers every batch below this offset.
    offset: u64,
    producers: Vec<ProducerImage>,
    /// The largest producer id the partition ever held, expired ones too
    /// (absent in snapshots written before expiry existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    largest_producer_id: Option<i64>,
}

fn dir(data_dir: &Path, topic: &str) -> PathBuf {
    data_dir.join("producers").join(topic)
}

/// Saves `image`, valid for the log below `offset` (every batch below it
/// durable: the caller's word).
async fn save_image(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    image: TableImage,
    offset: Offset,
) -> Result<(), ApiError> {
    let snap = Snapshot {
        offset: offset.0,
        producers: image.producers,
        largest_producer_id: image.largest_seen,
    };
    let bytes = serde_json::to_vec(&snap).expect("snapshot serializes");
    crate::topics::fsops::write_atomic(&dir(data_dir, topic), &format!("{partition}.json"), bytes).await
}

/// Removes a topic's snapshots (topic deleted).
pub async fn remove_topic(data_dir: &Path, topic: &str) -> Result<(), ApiError> {
    crate::topics::fsops::remove_dir_all(&dir(data_dir, topic)).await
}

/// What loading a partition's producer state read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// The offset the scan started at (the snapshot's, or the log start).
    pub scanned_from: u64,
    /// Batches read after it.
    pub batches_scanned: u64,
    /// The snapshot on disk (or its absence, with no batch to read) still
    /// says it all: none needs writing at open.
    pub current: bool,
}

/// The producer table of `log` at `now_ms`: the snapshot if it is usable,
/// then every batch after it.
pub async fn load(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    log: &PartitionLog,
    now_ms: i64,
) -> Result<(ProducerTable, Loaded), ApiError> {
    let path = dir(data_dir, topic).join(format!("{partition}.json"));
    let end = log.durable_offset();
    // `kept`: what is on disk (a usable snapshot, or none) may stay.
    let (mut table, mut from, kept) = match crate::topics::fsops::read_small(&path).await? {
        Some(bytes) => match serde_json::from_slice::<Snapshot>(&bytes) {
            // A snapshot past the log's end describes batches recovery
            // trimmed: not usable.
            Ok(s) if s.offset <= end.0 => {
                let image = TableImage {
                    producers: s.producers,
                    largest_seen: s.largest_producer_id,
                };
                (ProducerTable::from_image(image, now_ms), Offset(s.offset), true)
            }
            Ok(_) => (ProducerTable::default(), log.log_start_offset(), false),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable producer snapshot; rebuilding from the log");
                (ProducerTable::default(), log.log_start_offset(), false)
            }
        },
        None => (ProducerTable::default(), log.log_start_offset(), true),
    };
    from = from.max(log.log_start_offset());
    let mut loaded = Loaded {
        scanned_from: from.0,
        batches_scanned: 0,
        current: kept && from >= end,
    };
    while from < end {
        let batches = log
            .read_batches(from, PRODUCER_SCAN_READ_BYTES, end)
            .await
            .map_err(ApiError::storage)?;
        let Some(last) = batches.last() else { break };
        let next = last.header.next_offset();
        loaded.batches_scanned += batches.len() as u64;
        for b in &batches {
            table.rebuild(
                b.header.producer,
                b.header.last_offset_delta + 1,
                b.header.base_offset.0,
                now_ms,
            );
        }
        if next <= from {
            break;
        }
        from = next;
    }
    // The producer id registry's next id stays past every id seen here.
    if let Some(id) = table.largest_producer_id() {
        crate::producers::ids::note_partition_producer_id(id);
    }
    Ok((table, loaded))
}

/// The idempotent producer state of one open partition, on its shard.
pub struct PartitionProducers {
    pub table: ProducerTable,
    pub snapshots: Rc<Snapshots>,
}

/// The snapshots of one open partition: written one at a time, never one
/// older than the last written, never after the partition closed.
pub struct Snapshots {
    data_dir: PathBuf,
    topic: String,
    partition: u32,
    writing: glommio::sync::Semaphore,
    /// Offset of the newest snapshot written.
    newest: Cell<u64>,
    closed: Cell<bool>,
}

impl Snapshots {
    /// Those of a partition whose snapshot at `offset` was just written.
    pub fn new(data_dir: &Path, topic: &str, partition: u32, offset: Offset) -> Rc<Snapshots> {
        Rc::new(Snapshots {
            data_dir: data_dir.to_path_buf(),
            topic: topic.to_string(),
            partition,
            writing: glommio::sync::Semaphore::new(1),
            newest: Cell::new(offset.0),
            closed: Cell::new(false),
        })
    }

    /// Takes a snapshot of `table` as it stands now, valid below the log's
    /// next offset, and writes it (in a task of its own) once everything
    /// below that offset is durable. Call it with no await since the last
    /// batch was placed and recorded.
    pub fn take(self: &Rc<Self>, table: &ProducerTable, log: &PartitionLog, why: &'static str) {
        let offset = log.next_offset();
        let log = log.clone();
        let durable = async move { log.wait_durable(offset).await.is_ok() };
        self.take_when(table.image(), offset, durable, why);
    }

    /// Takes a snapshot of `image`, the table as it stood below `offset`,
    /// to be written once `durable` says every batch below it is (`false`:
    /// they never will be).
    fn take_when(
        self: &Rc<Self>,
        image: TableImage,
        offset: Offset,
        durable: impl std::future::Future<Output = bool> + 'static,
        why: &'static str,
    ) {
        if self.closed.get() {
            return;
        }
        let me = self.clone();
        glommio::spawn_local(async move {
            // Only batches that are durable may be in a snapshot: one that
            // never becomes durable (a failed fsync) is never written.
            if !durable.await {
                return;
            }
            let turns = WRITE_TURNS.with(Rc::clone);
            let _turn = turns.acquire_permit(1).await;
            let _permit = me.writing.acquire_permit(1).await;
            if me.closed.get() || offset.0 <= me.newest.get() {
                return;
            }
            match save_image(&me.data_dir, &me.topic, me.partition, image, offset).await {
                Ok(()) => {
                    me.newest.set(offset.0);
                    metrics::counter!("es_producer_snapshots_total", "reason" => why).increment(1);
                }
                Err(e) => tracing::warn!(
                    topic = %me.topic,
                    partition = me.partition,
                    error = %e,
                    "producer snapshot not saved; the next start scans from the one before"
                ),
            }
        })
        .detach();
    }

    /// No snapshot is written from now on (the partition closes or is
    /// deleted); waits for one being written.
    pub async fn close(&self) {
        self.closed.set(true);
        let _permit = self.writing.acquire_permit(1).await;
    }

    /// Writes the snapshot of a closed partition: every placed batch is
    /// durable (the log closed cleanly), so `table` covers the whole log.
    pub async fn save_closed(&self, table: &ProducerTable, log: &PartitionLog) -> Result<(), ApiError> {
        self.close().await;
        save_image(
            &self.data_dir,
            &self.topic,
            self.partition,
            table.image(),
            log.durable_offset(),
        )
        .await?;
        metrics::counter!("es_producer_snapshots_total", "reason" => "close").increment(1);
        Ok(())
    }
}

/// Writes the snapshot of a partition that just opened: `table` holds
/// every batch of the log, all durable. Nothing is written when the one on
/// disk is `loaded.current` (a clean start writes nothing).
pub async fn save_opened(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    table: &ProducerTable,
    log: &PartitionLog,
    loaded: &Loaded,
) -> Result<Rc<Snapshots>, ApiError> {
    let offset = log.durable_offset();
    if loaded.current {
        return Ok(Snapshots::new(data_dir, topic, partition, offset));
    }
    if let Err(e) = save_image(data_dir, topic, partition, table.image(), offset).await {
        // Derived data (the next start scans from the snapshot before, if
        // any): a full disk does not keep a partition shut.
        if e.code != ErrorCode::Unavailable {
            return Err(e);
        }
        tracing::warn!(topic, partition, error = %e, "producer snapshot not saved; the next start scans again");
        return Ok(Snapshots::new(data_dir, topic, partition, Offset(0)));
    }
    metrics::counter!("es_producer_snapshots_total", "reason" => "open").increment(1);
    Ok(Snapshots::new(data_dir, topic, partition, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producers::idempotence::{Check, ProducerFields};
    use futures::channel::oneshot;

    const F: ProducerFields = ProducerFields {
        producer_id: 7,
        epoch: 0,
        sequence: 0,
    };

    fn read(path: &Path) -> Option<Snapshot> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok() // blocking-ok: a test
    }

    async fn let_tasks_run() {
        for _ in 0..8 {
            glommio::executor().yield_task_queue_now().await;
        }
    }

    /// A snapshot is written only once every batch below its offset is
    /// durable, never when that fails, and never over a newer one.
    #[test]
    fn a_snapshot_waits_for_its_batches_to_be_durable() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data_dir = tmp.path().to_path_buf();
        crate::test_executor::run(async move {
            let path = dir(&data_dir, "t").join("0.json");
            let snaps = Snapshots::new(&data_dir, "t", 0, Offset(0));
            let mut table = ProducerTable::default();
            table.record(F, 1, 0, 5);

            let (failed, never) = oneshot::channel::<bool>();
            snaps.take_when(
                table.image(),
                Offset(1),
                async move { never.await.unwrap_or(false) },
                "roll",
            );
            let_tasks_run().await;
            assert!(read(&path).is_none(), "not durable yet: nothing written");
            failed.send(false).expect("the task waits");
            let_tasks_run().await;
            assert!(read(&path).is_none(), "never durable: never written");

            let (synced, durable) = oneshot::channel::<bool>();
            snaps.take_when(
                table.image(),
                Offset(1),
                async move { durable.await.unwrap_or(false) },
                "roll",
            );
            synced.send(true).expect("the task waits");
            while snaps.newest.get() < 1 {
                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
            }
            let written = read(&path).expect("written once durable");
            assert_eq!(written.offset, 1);
            let back = ProducerTable::from_image(
                TableImage {
                    producers: written.producers,
                    largest_seen: written.largest_producer_id,
                },
                10,
            );
            assert_eq!(back.check(F, 1).unwrap(), Check::Duplicate(0));

            // An older one, durable later, is not written over it.
            snaps.take_when(
                ProducerTable::default().image(),
                Offset(0),
                async { true },
                "roll",
            );
            let_tasks_run().await;
            snaps.close().await;
            assert_eq!(read(&path).expect("kept").offset, 1);
        });
    }
}
