//! Raft entries in a replicated partition's log: the partition's segment
//! log is its Raft log (docs/design/raft-storage.md). An entry is one or
//! more version 2 batches stamped with its `(term, index)`, the last one
//! marked `ENTRY_END`; a blank or membership entry is one zero-width
//! control batch. An entry is placed in one synchronous step with one roll
//! decision, so it never spans segments (an entry larger than a segment
//! gets a segment of its own). A log that never takes an entry (a
//! standalone broker's) never runs any of this.

use crate::batch::{self, RaftStamp};
use crate::write::batch_buf::BatchBuf;
use crate::{Offset, Result, StorageError};

use super::append::{must_roll, truncating, Placing};
use super::partition::PartitionLog;

/// What an entry holds.
pub enum EntryBody {
    /// A blank or membership entry: a zero-width control batch of `kind`
    /// (`batch::CONTROL_BLANK`, `CONTROL_MEMBERSHIP`) and `body`.
    Control { kind: u8, body: Vec<u8> },
    /// Version 2 data batches. `Stamping` says whether they are stamped
    /// here (a leader's) or carry the stamp and offsets already (a
    /// follower's copy of the leader's).
    Batches(Vec<BatchBuf>, Stamping),
}

/// Whether an entry's batches get their stamp and offsets here.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stamping {
    /// Restamp each batch: base offset from the log, the entry's stamp.
    Leader,
    /// Check that each batch carries the entry's stamp and the offsets the
    /// log expects, and place it as it is.
    Verify,
}

/// Where an entry landed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedEntry {
    /// The segment holding it, and the position of its first batch.
    pub segment: Offset,
    pub position: u64,
    /// Bytes of all its batches.
    pub len: u64,
    /// The base offset of each batch (one for a control batch).
    pub bases: Vec<Offset>,
    /// The offset after the entry (its first base for a control entry).
    pub next_offset: Offset,
}

impl PartitionLog {
    /// Places the Raft entry `(term, index)` and queues it for writing:
    /// synchronous, so entries are placed in call order. The entry is
    /// durable once [`wait_durable_index`](Self::wait_durable_index) for
    /// `index` returns. Nothing is placed if any batch is refused.
    pub fn append_entry(&self, term: u64, index: u64, body: EntryBody) -> Result<PlacedEntry> {
        let invalid = |why: String| StorageError::Invalid(format!("entry {term}/{index}: {why}"));
        let mut parts: Vec<(BatchBuf, usize, bool)> = Vec::new();
        match body {
            EntryBody::Control { kind, body } => {
                let mut out = Vec::new();
                batch::encode_control(self.next_offset(), term, index, kind, &body, &mut out);
                parts.push((BatchBuf::from(out), 0, false));
            }
            EntryBody::Batches(batches, stamping) => {
                if batches.is_empty() {
                    return Err(invalid("a data entry holds at least one batch".into()));
                }
                let mut expected = self.next_offset();
                let n = batches.len();
                for (i, b) in batches.into_iter().enumerate() {
                    let h = batch::check(&b).map_err(|e| invalid(e.to_string()))?;
                    if h.batch_len as usize != b.len() {
                        return Err(invalid("bytes after a batch".into()));
                    }
                    let Some(stamp) = h.raft.filter(|r| !r.control) else {
                        return Err(invalid("an entry's data batches are version 2".into()));
                    };
                    let keyless = batch::records(&h, &b)
                        .map_err(|e| invalid(e.to_string()))?
                        .iter()
                        .any(|r| r.key.is_none());
                    if stamping == Stamping::Verify {
                        let want = (term, index, i + 1 == n);
                        if (stamp.term, stamp.index, stamp.entry_end) != want || h.base_offset != expected {
                            return Err(invalid(format!(
                                "batch {i} is stamped {}/{} at offset {}, the log expects {term}/{index} at {expected}",
                                stamp.term, stamp.index, h.base_offset
                            )));
                        }
                    } else if h.last_offset_delta as u64 + 1 != h.record_count as u64 {
                        return Err(invalid("a produced batch numbers its records 0, 1, ...".into()));
                    }
                    expected = h.next_offset();
                    parts.push((b, h.record_count as usize, keyless));
                }
            }
        }
        let total: u64 = parts.iter().map(|(b, _, _)| b.len() as u64).sum();
        let count: u64 = parts.iter().map(|(_, c, _)| *c as u64).sum();
        // Whatever would refuse one batch refuses the entry before any of
        // it is placed: an entry is placed whole or not at all.
        {
            let inner = self.shared.inner.borrow();
            if inner.closed || inner.failure.is_some() || inner.rewinding.is_some() {
                drop(inner);
                return Err(self.shared.refusal());
            }
            if inner.truncating {
                return Err(truncating(&self.shared));
            }
            let config = self.shared.config.borrow();
            if parts.iter().any(|(b, _, _)| b.len() > config.batch_bytes_max) {
                return Err(invalid(format!(
                    "a batch exceeds batch_bytes_max {}",
                    config.batch_bytes_max
                )));
            }
            if config.cleanup.compact && parts.iter().any(|(_, _, keyless)| *keyless) {
                return Err(invalid("a compacted log needs a key on every record".into()));
            }
        }
        self.roll_for_entry(total, count);
        let n = parts.len();
        let mut placed: Option<PlacedEntry> = None;
        for (i, (b, records, keyless)) in parts.into_iter().enumerate() {
            let (segment, position) = {
                let segs = self.shared.segments();
                (segs.active().base, segs.active().dirty_bytes)
            };
            let end_index = (i + 1 == n).then_some(index + 1);
            let stamp = RaftStamp {
                term,
                index,
                control: records == 0,
                entry_end: i + 1 == n,
            };
            let appended = self.place_with(
                b.len(),
                records,
                keyless,
                None,
                Placing::EntryBatch { end_index },
                |base| {
                    let mut b = b;
                    batch::restamp(&mut b, base, stamp);
                    b
                },
            )?;
            let p = placed.get_or_insert(PlacedEntry {
                segment,
                position,
                len: 0,
                bases: Vec::new(),
                next_offset: appended.base_offset,
            });
            p.bases.push(appended.base_offset);
            p.next_offset = appended.next_offset;
        }
        {
            let mut inner = self.shared.inner.borrow_mut();
            inner.placed_index = inner.placed_index.max(index + 1);
        }
        let mut placed = placed.expect("an entry has a batch");
        placed.len = total;
        Ok(placed)
    }

    /// Rolls the log before an entry of `len` bytes and `count` records if
    /// its active segment must roll for it (by size, age or offsets). A
    /// segment that holds only zero-width batches never rolls: its
    /// successor would have the same base.
    fn roll_for_entry(&self, len: u64, count: u64) {
        let shared = &self.shared;
        let mut inner = shared.inner.borrow_mut();
        let config = shared.config.borrow().clone();
        let base = inner.next_offset;
        let roll = {
            let active = inner.segments.active();
            active.next_offset > active.base
                && (must_roll(active, len, &config) || base.0 + count - active.base.0 > u32::MAX as u64)
        };
        if roll && inner.failure.is_none() && !inner.closed && inner.rewinding.is_none() && !inner.truncating
        {
            inner.segments.roll(&shared.dir, base);
        }
    }

    /// The high watermark: every record below it may be served to
    /// clients. A replicated log's is `min(committed, written)`, its
    /// committed mark set by its state machine
    /// ([`set_committed`](Self::set_committed)); a standalone log's is
    /// [`durable_offset`](Self::durable_offset).
    pub fn committed_offset(&self) -> Offset {
        let shared = &self.shared;
        if shared.replicated.get() {
            Offset(shared.committed.get().min(shared.written.get()))
        } else {
            self.durable_offset()
        }
    }

    /// Whether the log is replicated: its high watermark is the committed
    /// mark its state machine sets, not `durable`.
    pub fn is_replicated(&self) -> bool {
        self.shared.replicated.get()
    }

    /// Raises a replicated log's committed mark to `offset` (the offset
    /// after the last applied entry); the first call makes the log
    /// replicated (`set_committed(Offset(0))` at open: nothing is served
    /// before its state machine says it is committed). Never lowers it:
    /// truncation never cuts a committed entry.
    pub fn set_committed(&self, offset: Offset) {
        self.shared.replicated.set(true);
        self.shared.committed.advance_to_at_least(offset.0);
    }

    /// Resolves once the high watermark ([`committed_offset`](Self::committed_offset))
    /// is at least `offset`: a long-polling reader's wait.
    pub async fn wait_committed(&self, offset: Offset) -> Result<()> {
        let shared = &self.shared;
        if !shared.replicated.get() {
            return self.wait_durable(offset).await;
        }
        // `written` first: a wait above an uncommitted suffix that is cut
        // ends with `Truncated` (the offsets will hold other records). It
        // may also move back while `committed` is waited on (a cut above
        // the committed mark), so both are checked again at the end.
        loop {
            for mark in [&shared.written, &shared.committed] {
                mark.wait_for(offset.0).await.map_err(|e| shared.wait_error(e))?;
            }
            if self.committed_offset() >= offset {
                return Ok(());
            }
        }
    }

    /// Limits retention, compaction and tiering to segments that end at or
    /// below `offset` (the end of the last entry purged from the Raft log):
    /// cleanup never touches an entry Raft may still read or truncate.
    pub fn set_cleanup_limit(&self, offset: Offset) {
        self.shared.cleanup_limit.set(offset.0);
    }

    /// See [`set_cleanup_limit`](Self::set_cleanup_limit); `u64::MAX` when
    /// unlimited (a standalone log).
    pub fn cleanup_limit(&self) -> Offset {
        Offset(self.shared.cleanup_limit.get())
    }

    /// Every entry with an index below this is written.
    pub fn written_index(&self) -> u64 {
        self.shared.written_index.get()
    }

    /// Every entry with an index below this is fsynced.
    pub fn durable_index(&self) -> u64 {
        self.shared.durable_index.get()
    }

    /// Resolves once the entry `index` (and every one before it) is fsynced.
    pub async fn wait_durable_index(&self, index: u64) -> Result<()> {
        self.shared
            .durable_index
            .wait_for(index + 1)
            .await
            .map_err(|e| self.shared.wait_error(e))
    }

    /// Sets the index marks of a log just opened whose last entry is
    /// `last_index` (its store found it): every entry on disk is durable.
    /// Only before the first entry is placed, and never backwards.
    pub fn resume_entries(&self, last_index: u64) {
        let next = last_index + 1;
        {
            let mut inner = self.shared.inner.borrow_mut();
            inner.placed_index = inner.placed_index.max(next);
        }
        if next > self.shared.written_index.get() {
            self.shared.written_index.advance(next);
        }
        if next > self.shared.durable_index.get() {
            self.shared.durable_index.advance(next);
        }
    }
}
