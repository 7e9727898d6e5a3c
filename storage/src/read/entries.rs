//! Reading a replicated partition's log by position: the batches of a Raft
//! entry where its log store found it, every batch of the hot tier with
//! its place, from which that store builds its entry table at open, and
//! runs of entries for a snapshot transfer (`read_entry_run`).

use crate::batch::BatchHeader;
use crate::log::partition::PartitionLog;
use crate::read::scan::{self, FileSource, RawBatch, Scan};
use crate::{Offset, Result, StorageError};

/// Where a run of entries read for a snapshot transfer goes on: a segment
/// and a position in it (a batch boundary).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EntryCursor {
    pub segment: Offset,
    pub position: u64,
}

/// What [`PartitionLog::read_entry_run`] read.
#[derive(Clone, Debug)]
pub struct EntryRun {
    /// The batches, control batches included, in log order.
    pub batches: Vec<RawBatch>,
    /// Where the next read starts; `None`: the run reached the last entry
    /// asked for (or the log's end).
    pub next: Option<EntryCursor>,
}

/// A batch and where it lies: its segment's base and its position there.
#[derive(Clone, Debug)]
pub struct PlacedBatch {
    pub segment: Offset,
    pub position: u64,
    pub header: BatchHeader,
}

impl PartitionLog {
    /// The whole, checked batches in `[position, end)` of segment `base`
    /// (batch boundaries), read from recent writes or the page cache.
    pub async fn read_at(&self, base: Offset, position: u64, end: u64) -> Result<Vec<RawBatch>> {
        let shared = self.shared();
        let Some((file, path, _, written, _, recent)) = shared.reader(base, |_| position).await? else {
            return Err(StorageError::Invalid(format!(
                "segment {base} of {} is gone",
                shared.dir.display()
            )));
        };
        let src = FileSource {
            file: &file,
            path: &path,
            recent: recent.as_deref(),
        };
        let end = end.min(written);
        let (batches, damaged) =
            scan::read_batches(&src, &path, position, end, usize::MAX, |_| Scan::Take).await?;
        if let Some(d) = damaged {
            shared.report_damage(&d);
            return Err(d.error());
        }
        Ok(batches)
    }

    /// Where a snapshot transfer of the entries from offset `from` on
    /// starts reading: the first segment's start when `from` is the hot
    /// tier's start; else the sparse index's position for offset
    /// `from - 1` in its segment. That batch holds a record below `from`,
    /// so it lies before every batch of an entry starting at `from`,
    /// zero-width control batches included (the index points at data
    /// batches only, and a control batch at an indexed batch's offset may
    /// sit just before it). Entries are told apart by index, so starting
    /// early takes nothing twice. `OffsetOutOfRange` when `from` is below
    /// the hot tier (cold segments are not transferred).
    pub async fn entry_cursor(&self, from: Offset) -> Result<EntryCursor> {
        let shared = self.shared();
        let hot_start = shared.hot_start();
        if from < hot_start {
            return Err(StorageError::OffsetOutOfRange {
                offset: from.0,
                log_start: hot_start.0,
            });
        }
        if from == hot_start {
            return Ok(EntryCursor {
                segment: hot_start,
                position: 0,
            });
        }
        let at = Offset(from.0 - 1);
        let Some(base) = shared.segment_for(at) else {
            return Err(StorageError::Invalid("the log has no segment".into()));
        };
        if !shared.ensure_index(base).await? {
            // Replaced meanwhile (compaction): start at its first batch.
            return Ok(EntryCursor {
                segment: shared.segment_for(at).unwrap_or(base),
                position: 0,
            });
        }
        let position = shared.segments().get(base).map_or(0, |s| s.position_for(at));
        Ok(EntryCursor {
            segment: base,
            position,
        })
    }

    /// The batches (control batches included) of the entries with an
    /// index in `[first_index, through_index]`, from `at` on: about
    /// `max_bytes` of them (at least one when one is there), never more
    /// than `limit_bytes` (at least one batch's worth), for a snapshot
    /// transfer. A replicated log only. A segment removed under
    /// the read (retention) is `Invalid`: the transfer starts over.
    pub async fn read_entry_run(
        &self,
        at: EntryCursor,
        first_index: u64,
        through_index: u64,
        max_bytes: usize,
        limit_bytes: usize,
    ) -> Result<EntryRun> {
        let shared = self.shared();
        let mut cursor = at;
        loop {
            let Some((file, path, start, end, next, recent)) =
                shared.reader(cursor.segment, |_| cursor.position).await?
            else {
                return Err(StorageError::Invalid(format!(
                    "segment {} of {} is gone",
                    cursor.segment,
                    shared.dir.display()
                )));
            };
            let src = FileSource {
                file: &file,
                path: &path,
                recent: recent.as_deref(),
            };
            let start = start.max(cursor.position);
            let mut stopped = false;
            // The end of each batch taken, in order.
            let mut ends = Vec::new();
            let mut pos = start;
            let read = scan::read_batches_limited(&src, &path, start, end, max_bytes, limit_bytes, |h| {
                let at = pos;
                pos += h.batch_len as u64;
                match h.raft {
                    Some(r) if r.index > through_index => {
                        stopped = true;
                        Scan::Stop
                    }
                    Some(r) if r.index >= first_index => {
                        ends.push(at + h.batch_len as u64);
                        Scan::Take
                    }
                    _ => Scan::Skip,
                }
            })
            .await?;
            let (batches, damaged) = (read.batches, read.damaged);
            if let Some(len) = read.over_limit.filter(|_| batches.is_empty()) {
                return Err(StorageError::Invalid(format!(
                    "a batch of {len} bytes is over the transfer's limit of {limit_bytes}"
                )));
            }
            if let Some(d) = damaged {
                if batches.is_empty() {
                    shared.report_damage(&d);
                    return Err(d.error());
                }
            }
            let last_entry_done = batches.last().is_some_and(|b| {
                b.header
                    .raft
                    .is_some_and(|r| r.index >= through_index && r.entry_end)
            });
            if stopped || last_entry_done {
                return Ok(EntryRun { batches, next: None });
            }
            if !batches.is_empty() {
                let position = ends.get(batches.len() - 1).copied().unwrap_or(end);
                return Ok(EntryRun {
                    batches,
                    next: Some(EntryCursor {
                        segment: cursor.segment,
                        position,
                    }),
                });
            }
            // Nothing to take in the rest of this segment: the next one.
            match next {
                Some(n) => {
                    cursor = EntryCursor {
                        segment: n,
                        position: 0,
                    }
                }
                None => return Ok(EntryRun { batches, next: None }),
            }
        }
    }

    /// Every written batch of the hot tier, in log order, with where it
    /// lies. Reads the whole hot tier: a replicated log's store calls it
    /// once, at open.
    pub async fn placed_batches(&self) -> Result<Vec<PlacedBatch>> {
        let bases: Vec<Offset> = self.shared().segments().iter().map(|s| s.base).collect();
        let mut out = Vec::new();
        for base in bases {
            let mut position = 0;
            for b in self.read_at(base, 0, u64::MAX).await? {
                out.push(PlacedBatch {
                    segment: base,
                    position,
                    header: b.header,
                });
                position += b.header.batch_len as u64;
            }
        }
        Ok(out)
    }
}
