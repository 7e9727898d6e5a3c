//! Appending: offsets and a file position are given to a batch at once,
//! in call order (`place_with`), and the batch queued for the write loop
//! (`write_loop.rs`); the append then waits on `written` or `durable`.

use crate::batch::{self, BatchHeader};
use crate::log::segment::Segment;
use crate::record::{ProducerStamp, Record};
use crate::write::batch_buf::BatchBuf;
use crate::write::early::{EarlyTicket, EarlyWrite};
use crate::{LogConfig, Offset, Result, StorageError};

use super::partition::{Appended, Inner, LogState, PartitionLog, Pending};
use super::write_loop::write_loop;

impl PartitionLog {
    /// Appends `records` as one batch and returns once it is written (stage
    /// one). Offsets are assigned in call order. Call [`wait_durable`] with
    /// the returned `next_offset` before acknowledging anything.
    ///
    /// [`wait_durable`]: PartitionLog::wait_durable
    pub async fn append(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        let appended = self.place(records, producer)?;
        self.shared
            .written
            .wait_for(appended.next_offset.0)
            .await
            .map_err(|e| self.shared.wait_error(e))?;
        Ok(appended)
    }

    /// Appends and waits until the batch is fsynced: the only form whose
    /// result may be acknowledged to a client.
    pub async fn append_durable(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        let appended = self.place(records, producer)?;
        self.wait_durable(appended.next_offset).await?;
        Ok(appended)
    }

    /// Assigns offsets to `records` and queues them for writing, without
    /// waiting: synchronous, so a caller that must record where a batch went
    /// before anything else runs on the shard (idempotent producers) can.
    /// Nothing is acknowledged before [`wait_durable`] on `next_offset`,
    /// which the caller starts before it next awaits: a batch refused (see
    /// `rewind`) fails the waits in progress for it, while a wait begun
    /// afterwards waits for whatever is placed at those offsets next.
    ///
    /// [`wait_durable`]: PartitionLog::wait_durable
    pub fn append_placed(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        self.place(records, producer)
    }

    /// Appends a batch a producer built in the batch format (offsets 0, 1,
    /// ... and its producer stamp in the header): checked in full
    /// (`batch::check_produced`), given offsets from the next one, and
    /// queued as it came, without decoding a record. Synchronous like
    /// [`append_placed`](PartitionLog::append_placed); nothing is
    /// acknowledged before [`wait_durable`](PartitionLog::wait_durable).
    /// `early`: the ticket of the [`EarlyWrite`] that wrote the batch's
    /// pages while it arrived, if one did ([`begin_early`]).
    ///
    /// [`begin_early`]: PartitionLog::begin_early
    pub fn append_batch_placed(
        &self,
        batch: impl Into<BatchBuf>,
        early: Option<EarlyTicket>,
    ) -> Result<Appended> {
        let batch = batch.into();
        let (header, keyless) = batch::check_produced_summed(&batch, batch.received_checksum())
            .map_err(|e| StorageError::Invalid(format!("produced batch: {e}")))?;
        self.place_with(
            batch.len(),
            header.record_count as usize,
            keyless,
            early,
            Placing::Batch,
            |base| {
                let mut batch = batch;
                batch::rebase(&mut batch, base);
                batch
            },
        )
    }

    /// Where within its page a batch of `len` bytes placed now would
    /// start: the offset a large batch is received at so that it lies in
    /// memory as in the file (`ReceivingBatch`). A guess for a batch still
    /// arriving: whatever is placed first moves it.
    pub fn next_in_page_offset(&self, len: usize) -> usize {
        let inner = self.shared.inner.borrow();
        let config = self.shared.config.borrow();
        let active = inner.segments.active();
        if !active.is_empty() && must_roll(active, len as u64, &config) {
            return 0;
        }
        (active.dirty_bytes % crate::io::page_buf::PAGE_BYTES) as usize
    }

    /// Like [`append_batch_placed`](PartitionLog::append_batch_placed),
    /// returning once the batch is fsynced.
    pub async fn append_batch_durable(
        &self,
        batch: impl Into<BatchBuf>,
        early: Option<EarlyTicket>,
    ) -> Result<Appended> {
        let appended = self.append_batch_placed(batch, early)?;
        self.wait_durable(appended.next_offset).await?;
        Ok(appended)
    }

    /// Starts writing the pages of a produced batch of `len` bytes while it
    /// is still arriving (`early.rs`), where it will go if nothing else is
    /// placed first. Feed it with [`EarlyWrite::arrived`], then place the
    /// whole batch with its ticket. `None` when the partition cannot: it
    /// is closed or failed, another early write is under way, the batch
    /// would start a new segment, the active segment's writer is not open
    /// yet (before its first write) or does not write direct, or the batch
    /// has no whole page past its first one.
    pub fn begin_early(&self, len: usize) -> Option<EarlyWrite> {
        let shared = &self.shared;
        let mut inner = shared.inner.borrow_mut();
        if inner.closed
            || inner.failure.is_some()
            || inner.rewinding.is_some()
            || inner.truncating
            || inner.early.is_busy()
        {
            return None;
        }
        let config = shared.config.borrow();
        let active = inner.segments.active();
        if len > config.batch_bytes_max || active.is_empty() || must_roll(active, len as u64, &config) {
            return None;
        }
        let writer = active.writer.clone().filter(|w| w.is_direct())?;
        let (segment, position) = (active.base, active.dirty_bytes);
        EarlyWrite::begin(shared, &mut inner.early, writer, segment, position, len)
    }

    /// Assigns offsets and a file position to a new batch and queues it for
    /// the writer. Synchronous, so call order is offset order.
    pub(super) fn place(&self, records: &[Record], producer: ProducerStamp) -> Result<Appended> {
        if records.is_empty() {
            return Err(StorageError::Invalid(
                "an append needs at least one record".into(),
            ));
        }
        let keyless = records.iter().any(|r| r.key.is_none());
        let len = batch::encoded_len(records);
        self.place_with(len, records.len(), keyless, None, Placing::Batch, |base| {
            let mut out = Vec::with_capacity(len);
            batch::encode(base, records, producer, &mut out);
            BatchBuf::from(out)
        })
    }

    /// Places a batch of `len` bytes holding `count` records, which
    /// `make(base_offset)` returns, on the pending write. Ends any early
    /// write under way; `early` names the batch's own, whose pages are then
    /// not written again if it landed where they went. `placing`: a batch
    /// of its own, or one of a Raft entry (`entries.rs`), whose roll was
    /// decided for the whole entry.
    pub(super) fn place_with(
        &self,
        len: usize,
        count: usize,
        keyless: bool,
        early: Option<EarlyTicket>,
        placing: Placing,
        make: impl FnOnce(Offset) -> BatchBuf,
    ) -> Result<Appended> {
        let shared = &self.shared;
        let mut inner = shared.inner.borrow_mut();
        if inner.closed || inner.failure.is_some() {
            drop(inner);
            return Err(shared.refusal());
        }
        if let Some(reason) = &inner.rewinding {
            return Err(StorageError::Refused {
                path: shared.dir.clone(),
                reason: format!("the log is going back to its last complete write after {reason}"),
            });
        }
        if inner.truncating {
            return Err(truncating(shared));
        }
        let config = shared.config.borrow().clone();
        if config.cleanup.compact && keyless {
            return Err(StorageError::Invalid(
                "a record has no key: a compacted log keeps the latest record per key, so every record needs one"
                    .into(),
            ));
        }
        if len > config.batch_bytes_max {
            return Err(StorageError::Invalid(format!(
                "batch of {len} bytes exceeds batch_bytes_max {}",
                config.batch_bytes_max
            )));
        }
        let base = inner.next_offset;
        let count = count as u64;
        let roll = matches!(placing, Placing::Batch) && {
            let active = inner.segments.active();
            !active.is_empty()
                && (must_roll(active, len as u64, &config)
                    || base.0 + count - active.base.0 > u32::MAX as u64)
        };
        if roll {
            inner.segments.roll(&shared.dir, base);
        }
        let Inner {
            segments,
            pending,
            early: early_state,
            ..
        } = &mut *inner;
        let (seg_base, position) = (segments.active().base, segments.active().dirty_bytes);
        let prewritten = early_state.place(early, seg_base, position);
        // A batch written early starts a write of its own, so that the
        // pages it skips are its own. Any other joins a write not started
        // yet (one larger write beats two; a batch that lies in memory as
        // in the file is still written from its own pages: writer.rs
        // `Plan`).
        let joins_tail = prewritten.is_none()
            && pending
                .back()
                .is_some_and(|p| p.segment == seg_base && p.position + p.len == position);
        if !joins_tail {
            pending.push_back(Pending {
                segment: seg_base,
                position,
                parts: Vec::new(),
                len: 0,
                end: base,
                appends: 0,
                prewritten,
                mark: segments.active().mark(),
                end_index: 0,
            });
        }
        let job = pending.back_mut().expect("just pushed");
        let bytes = make(base);
        assert_eq!(bytes.len(), len, "a batch is as long as it said");
        let header = BatchHeader::parse(&bytes).expect("we just encoded it");
        job.len += bytes.len() as u64;
        job.parts.push(bytes);
        segments.place_batch(&header, position, config.index_interval_bytes);
        job.end = header.next_offset();
        job.appends += 1;
        if let Placing::EntryBatch { end_index: Some(i) } = placing {
            job.end_index = i;
        }
        inner.next_offset = header.next_offset();
        // The log ends where its active segment does (`segment_set.rs`).
        debug_assert_eq!(inner.segments.active().next_offset, inner.next_offset);
        let start_writer = !std::mem::replace(&mut inner.writer_running, true);
        drop(inner);
        if start_writer {
            // glommio runs a task it spawns at once, up to its first await:
            // the write loop may start (and, on an error it meets without
            // waiting, begin a rewind) before this returns. Nothing of
            // `inner` is borrowed here.
            glommio::spawn_local(write_loop(shared.clone())).detach();
        }
        Ok(Appended {
            base_offset: base,
            next_offset: header.next_offset(),
        })
    }
}

/// The error of a placement while the log cuts an uncommitted suffix.
pub(super) fn truncating(shared: &LogState) -> StorageError {
    StorageError::Refused {
        path: shared.dir.clone(),
        reason: "the log is cutting an uncommitted suffix".into(),
    }
}

/// How a batch is placed.
#[derive(Copy, Clone, Debug)]
pub(super) enum Placing {
    /// On its own: it may roll the log.
    Batch,
    /// As part of a Raft entry, whose roll was decided before its first
    /// batch; the entry's last batch carries the index after the entry.
    EntryBatch { end_index: Option<u64> },
}

/// Whether a batch of `len` bytes must start a new segment after `active`
/// (not empty): by size or by age.
pub(super) fn must_roll(active: &Segment, len: u64, config: &LogConfig) -> bool {
    active.dirty_bytes + len > config.segment_bytes
        || config
            .segment_age
            .is_some_and(|age| active.opened_at.elapsed() >= age)
}
