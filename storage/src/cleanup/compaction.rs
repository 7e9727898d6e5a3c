//! Key compaction: closed segments are rewritten so that only the latest
//! record of each key survives; offsets are kept (a batch may come out with
//! gaps, readers skip them); a tombstone (a keyed record with an empty
//! value) deletes its key and is itself dropped once `delete_retention_ms`
//! past its timestamp. The active segment is never touched.
//!
//! A pass:
//!
//! 1. **Map**: read the closed records not yet compacted (from
//!    `clean_upto`, see [`CompactionState`]) and keep, per key, the offset of
//!    its latest record, up to
//!    [`COMPACTION_MAP_BYTES_MAX`](crate::limits::COMPACTION_MAP_BYTES_MAX);
//!    mapping stops after the batch that crosses it, at offset `X`.
//! 2. **Group**: consecutive closed segments below `X` are grouped while
//!    their bytes fit `segment_bytes` (so small compacted segments merge).
//! 3. **Rewrite**, oldest group first: a record goes if a later record of its
//!    key is in the map; otherwise a tombstone below `X` goes once expired;
//!    everything else stays (keyless records included: they predate a
//!    switch to `compact`). A lone segment with nothing to drop is left as
//!    it is. The rest is written beside the group as `.cleaned` files and
//!    swapped in atomically (see `swap.rs`).
//!
//! Why dropping a tombstone is safe: older records of its key are below it,
//! so in this group or an earlier one, and the map (or an earlier finished
//! pass, for tombstones below `clean_upto`) makes them go first; groups
//! commit oldest first and a pass stops at its first error. A tombstone at or
//! past `X` is never dropped: older values of its key may be in the map's
//! range without the map knowing the tombstone.
//!
//! A replicated log (version 2 batches) is compacted below its cleanup
//! limit only (`closed_segments`); a rewritten batch keeps its Raft stamp,
//! control batches are dropped, and an entry's last kept batch carries its
//! `ENTRY_END` (`write_output`), so the output reads as whole entries.
//!
//! Work is bounded per step: reads and writes go in chunks of
//! [`COMPACTION_IO_CHUNK_BYTES`] with a yield between them, and the broker
//! runs cleanup in a low-share task queue, so produce and fetch on the shard
//! keep their latency.

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use glommio::io::{BufferedFile, OpenOptions};

use crate::batch::{self, BatchHeader};
use crate::cleanup::pass::CleanupReport;
use crate::cleanup::policy::CleanupPolicy;
use crate::cleanup::reclaim;
use crate::cleanup::swap::{self, Manifest};
use crate::io::dirs;
use crate::io::files;
use crate::io::segment_files::{self, Held};
use crate::limits::{COMPACTION_IO_CHUNK_BYTES, MAP_ENTRY_OVERHEAD_BYTES};
use crate::log::faults::FaultPoint;
use crate::log::partition::{LogState, PartitionLog};
use crate::log::segment::Segment;
use crate::read::scan;
use crate::read::scan::{FileSource, RawBatch, Scan};
use crate::record::StoredRecord;
use crate::{Offset, Result, StorageError};

/// What compaction remembers between passes of one partition (in memory;
/// a restart starts over with a full pass).
#[derive(Debug, Default)]
pub(crate) struct CompactionState {
    /// Every closed record below this was compacted against all closed
    /// records up to it by a pass that finished. `Offset(0)`: none yet.
    clean_upto: Offset,
    /// When the earliest kept tombstone expires: a pass is due then even
    /// with nothing new.
    next_tombstone_expiry_ms: Option<i64>,
    /// The `delete_retention_ms` the last pass used.
    delete_retention_ms: Option<u64>,
}

/// A closed segment, as a pass sees it.
#[derive(Clone, Debug)]
struct Input {
    base: Offset,
    id: u64,
    log_path: PathBuf,
    bytes: u64,
    next_offset: Offset,
    /// Records the pass drops from it, and its bytes once rewritten.
    drops: u64,
    kept_bytes: u64,
}

/// Per key, the offset of its latest mapped record.
#[derive(Default)]
struct KeyMap {
    latest: HashMap<Vec<u8>, u64>,
    bytes: usize,
}

/// Which records a pass keeps.
struct Rule<'a> {
    map: &'a KeyMap,
    mapped_upto: Offset,
    now_ms: i64,
    delete_retention_ms: u64,
}

impl Rule<'_> {
    /// Whether `r` survives; notes when a kept tombstone will expire.
    fn keep(&self, r: &StoredRecord, next_expiry: &mut Option<i64>) -> bool {
        let Some(key) = &r.key else {
            return true;
        };
        if self.map.latest.get(key).is_some_and(|&m| m > r.offset.0) {
            return false;
        }
        if r.offset >= self.mapped_upto || !r.value.is_empty() {
            return true;
        }
        let expires = r
            .timestamp_ms
            .saturating_add(i64::try_from(self.delete_retention_ms).unwrap_or(i64::MAX));
        if self.now_ms >= expires {
            return false;
        }
        *next_expiry = Some(next_expiry.map_or(expires, |e| e.min(expires)));
        true
    }
}

/// Reads a closed segment's batches a chunk at a time, with its own handle.
struct BatchReader {
    file: BufferedFile,
    path: PathBuf,
    pos: u64,
    end: u64,
}

impl BatchReader {
    async fn open(input: &Input) -> Result<BatchReader> {
        let file = BufferedFile::open(&input.log_path)
            .await
            .map_err(|e| StorageError::io(&input.log_path, e))?;
        Ok(BatchReader {
            file,
            path: input.log_path.clone(),
            pos: 0,
            end: input.bytes,
        })
    }

    async fn next_chunk(&mut self) -> Result<Option<Vec<RawBatch>>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let src = FileSource {
            file: &self.file,
            path: &self.path,
            recent: None,
        };
        let (got, damaged) = scan::read_batches(
            &src,
            &self.path,
            self.pos,
            self.end,
            COMPACTION_IO_CHUNK_BYTES,
            |_| Scan::Take,
        )
        .await?;
        // Compaction never rewrites past damage: the batches before it now,
        // the error on the next call.
        if let Some(d) = damaged.filter(|_| got.is_empty()) {
            return Err(d.error());
        }
        self.pos += got.iter().map(|b| b.bytes.len() as u64).sum::<u64>();
        if got.is_empty() {
            self.pos = self.end;
        }
        glommio::yield_if_needed().await;
        Ok(Some(got))
    }
}

fn decode(b: &RawBatch, path: &std::path::Path) -> Result<Vec<StoredRecord>> {
    batch::records(&b.header, &b.bytes).map_err(|e| StorageError::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason: format!("batch at offset {}: {e}", b.header.base_offset),
    })
}

impl PartitionLog {
    /// One compaction pass (the caller holds the maintenance permit).
    /// Returns early, changing nothing more, once the log is closed.
    pub(crate) async fn compact_pass(
        &self,
        policy: &CleanupPolicy,
        now_ms: i64,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let shared = self.shared().clone();
        let (closed, closed_end) = closed_segments(&shared);
        if closed.is_empty() {
            return Ok(());
        }
        let map_from = {
            let st = shared.compaction.borrow();
            let dirty = closed_end > st.clean_upto;
            let tombstones_due = st.next_tombstone_expiry_ms.is_some_and(|t| t <= now_ms);
            let policy_changed = st.delete_retention_ms != Some(policy.delete_retention_ms);
            if !dirty && !tombstones_due && !policy_changed {
                return Ok(());
            }
            st.clean_upto.max(closed[0].base)
        };
        let map_bytes_max = shared.config.borrow().compaction_map_bytes_max;
        let (map, mapped_upto) = build_map(&shared, &closed, map_from, closed_end, map_bytes_max).await?;
        let rule = Rule {
            map: &map,
            mapped_upto,
            now_ms,
            delete_retention_ms: policy.delete_retention_ms,
        };
        let segment_bytes = shared.config.borrow().segment_bytes;
        let mut next_expiry = None;
        let mut candidates = Vec::new();
        for mut input in closed.into_iter().filter(|s| s.base < mapped_upto) {
            if shared.is_stopped() {
                return Ok(());
            }
            (input.drops, input.kept_bytes) = measure(&input, &rule, &mut next_expiry).await?;
            candidates.push(input);
        }
        for group in groups(candidates, segment_bytes) {
            if shared.is_stopped() {
                return Ok(());
            }
            if group.len() == 1 && group[0].drops == 0 {
                continue;
            }
            if !rewrite_group(&shared, &group, &rule, &mut next_expiry, report).await? {
                return Ok(());
            }
        }
        let mut st = shared.compaction.borrow_mut();
        st.clean_upto = mapped_upto;
        st.next_tombstone_expiry_ms = next_expiry;
        st.delete_retention_ms = Some(policy.delete_retention_ms);
        report.compaction_passes += 1;
        Ok(())
    }
}

/// The closed segments (sealed, before the active one) and the base of the
/// first segment that is not closed.
fn closed_segments(shared: &LogState) -> (Vec<Input>, Offset) {
    let segments = shared.segments();
    let last = segments.active().base;
    let limit = shared.cleanup_bound();
    let mut out = Vec::new();
    for seg in segments.iter() {
        let base = seg.base;
        if base == last || !seg.sealed || seg.next_offset.0 > limit {
            return (out, base);
        }
        out.push(Input {
            base,
            id: seg.id,
            log_path: seg.log_path.clone(),
            bytes: seg.written_bytes,
            next_offset: seg.next_offset,
            drops: 0,
            kept_bytes: seg.written_bytes,
        });
    }
    unreachable!("the loop returns at the last segment")
}

/// Maps the latest offset of every key from `from` on, stopping after the
/// batch that fills the map. Returns the map and the offset up to which
/// every closed record was mapped.
async fn build_map(
    shared: &LogState,
    closed: &[Input],
    from: Offset,
    closed_end: Offset,
    bytes_max: usize,
) -> Result<(KeyMap, Offset)> {
    let mut map = KeyMap::default();
    for (i, input) in closed.iter().enumerate() {
        let end = closed.get(i + 1).map_or(closed_end, |n| n.base);
        if end <= from {
            continue;
        }
        let mut reader = BatchReader::open(input).await?;
        while let Some(chunk) = reader.next_chunk().await? {
            for b in chunk {
                if b.header.next_offset() <= from {
                    continue;
                }
                for r in decode(&b, &input.log_path)? {
                    let Some(key) = r.key else { continue };
                    if r.offset < from {
                        continue;
                    }
                    if map.latest.insert(key.clone(), r.offset.0).is_none() {
                        map.bytes += key.len() + MAP_ENTRY_OVERHEAD_BYTES;
                    }
                }
                if map.bytes > bytes_max {
                    tracing::info!(
                        partition = %shared.dir.display(),
                        keys = map.latest.len(),
                        upto = b.header.next_offset().0,
                        "compaction key map full; the rest waits for the next pass"
                    );
                    return Ok((map, b.header.next_offset()));
                }
            }
        }
    }
    Ok((map, closed_end))
}

/// Groups consecutive segments while what they keep fits `segment_bytes`
/// and their offsets fit one segment's `u32` relative offsets.
fn groups(segments: Vec<Input>, segment_bytes: u64) -> Vec<Vec<Input>> {
    let mut out: Vec<Vec<Input>> = Vec::new();
    let mut bytes = 0u64;
    for s in segments {
        let fits = out.last().is_some_and(|g| {
            bytes + s.kept_bytes <= segment_bytes && s.next_offset.0 - g[0].base.0 <= u32::MAX as u64
        });
        if fits {
            bytes += s.kept_bytes;
            out.last_mut().expect("fits needs a group").push(s);
        } else {
            bytes = s.kept_bytes;
            out.push(vec![s]);
        }
    }
    out
}

/// How many records of `input` the rule drops, and the bytes its batches
/// will take once rewritten (read only).
async fn measure(input: &Input, rule: &Rule<'_>, next_expiry: &mut Option<i64>) -> Result<(u64, u64)> {
    let (mut drops, mut kept_bytes) = (0u64, 0u64);
    let mut reader = BatchReader::open(input).await?;
    while let Some(chunk) = reader.next_chunk().await? {
        for b in chunk {
            let records = decode(&b, &input.log_path)?;
            let total = records.len();
            let kept: Vec<&StoredRecord> = records.iter().filter(|r| rule.keep(r, next_expiry)).collect();
            drops += (total - kept.len()) as u64;
            kept_bytes += match kept.len() {
                0 => 0,
                n if n == total => b.bytes.len() as u64,
                _ => {
                    (b.header.header_len()
                        + kept
                            .iter()
                            .map(|r| {
                                batch::RECORD_OVERHEAD_BYTES
                                    + r.key.as_ref().map_or(0, |k| k.len())
                                    + r.value.len()
                            })
                            .sum::<usize>()) as u64
                }
            };
        }
    }
    Ok((drops, kept_bytes))
}

/// Writes the compacted group beside it and swaps it in. `Ok(false)` when
/// the log closed meanwhile (nothing changed).
async fn rewrite_group(
    shared: &Rc<LogState>,
    group: &[Input],
    rule: &Rule<'_>,
    next_expiry: &mut Option<i64>,
    report: &mut CleanupReport,
) -> Result<bool> {
    let dir = shared.dir.clone();
    let out_base = group[0].base;
    let written = write_output(shared, group, rule, next_expiry).await;
    let (mut seg, file, dropped) = match written {
        Ok(Some(w)) => w,
        Ok(None) => {
            let _ = swap::discard_outputs(&dir, out_base).await;
            return Ok(false);
        }
        Err(e @ StorageError::FaultInjected(_)) => return Err(e),
        Err(e) => {
            let _ = swap::discard_outputs(&dir, out_base).await;
            return Err(e);
        }
    };
    let out_id = seg.id;
    let manifest = Manifest {
        output: out_base,
        inputs: group.iter().map(|s| s.base).collect(),
    };
    // The directory stays open until the swap is done: once committed, no
    // step needs a new descriptor, which a shard out of them would not get.
    let held = match glommio::io::Directory::open(&dir).await {
        Ok(d) => d,
        Err(e) => {
            let _ = swap::discard_outputs(&dir, out_base).await;
            return Err(StorageError::io(&dir, e));
        }
    };
    if let Err(e) = swap::prepare(&dir, &manifest).await {
        // Nothing committed: the old set stands.
        let _ = swap::discard_outputs(&dir, out_base).await;
        let _ = held.close().await;
        return Err(e);
    }
    if let Err(e) = swap::commit(&dir, &held).await {
        // The manifest may or may not have reached the disk: only a restart
        // (recovery) knows which set wins.
        shared.poison(&e);
        return Err(e);
    }
    shared.faults.check(FaultPoint::CompactionCommitted)?;
    // The inputs' read handles: their files are freed once reads are done.
    let mut replaced = Vec::with_capacity(group.len());
    seg.created = true;
    seg.sealed = true;
    let inputs: Vec<(Offset, u64)> = group.iter().map(|s| (s.base, s.id)).collect();
    let removed = shared.segments_mut().replace_run(&inputs, seg);
    for mut old in removed {
        let reads = old.file.take().map(Held::Active);
        replaced.push((
            old.base,
            reads.or_else(|| segment_files::take(old.id).map(Held::Closed)),
        ));
    }
    // Its read handle goes to the shard's cache of closed segments' files.
    segment_files::adopt(out_id, file).await;
    let finished = swap::finish(&dir, &manifest, Some(&shared.faults), Some(&held)).await;
    let _ = held.close().await;
    if let Err(e) = finished {
        if !matches!(e, StorageError::FaultInjected(_)) {
            shared.poison(&e);
        }
        return Err(e);
    }
    for (base, held) in replaced {
        let trash = dirs::deleting_log_path(&dir, base);
        if let Err(e) = reclaim::release(&trash, held, || shared.is_stopped()).await {
            tracing::warn!(file = %trash.display(), error = %e, "could not free a compacted segment; the next open removes it");
        }
    }
    let before: u64 = group.iter().map(|s| s.bytes).sum();
    let after = shared.segments().expect(out_base).written_bytes;
    report.compacted_segments += group.len() as u64;
    report.compaction_bytes_reclaimed += before.saturating_sub(after);
    report.compaction_records_dropped += dropped;
    Ok(true)
}

/// Writes `<base>.log.cleaned` and `<base>.index.cleaned` for the group,
/// durable (files and directory). `None` if the log closed meanwhile.
async fn write_output(
    shared: &LogState,
    group: &[Input],
    rule: &Rule<'_>,
    next_expiry: &mut Option<i64>,
) -> Result<Option<(Segment, BufferedFile, u64)>> {
    let dir = &shared.dir;
    let out_base = group[0].base;
    let path = dirs::cleaned_log_path(dir, out_base);
    let interval = shared.config.borrow().index_interval_bytes;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .buffered_open(&path)
        .await
        .map_err(|e| StorageError::io(&path, e))?;
    let mut seg = Segment::empty(dir, out_base);
    let mut buf: Vec<u8> = Vec::new();
    let mut flushed = 0u64; // file position of buf[0]
    let mut dropped = 0u64;
    // A replicated log's entries: the last kept batch of the entry being
    // read, written once the next batch tells whether it ends the entry.
    let mut held: Option<Bytes> = None;
    for input in group {
        let mut reader = BatchReader::open(input).await?;
        while let Some(chunk) = reader.next_chunk().await? {
            for b in chunk {
                let records = decode(&b, &input.log_path)?;
                let total = records.len();
                let kept: Vec<StoredRecord> = records
                    .into_iter()
                    .filter(|r| rule.keep(r, next_expiry))
                    .collect();
                dropped += (total - kept.len()) as u64;
                let Some(stamp) = b.header.raft else {
                    // Version 1: kept as it is, rewritten, or dropped.
                    if kept.is_empty() {
                        continue;
                    }
                    let start = buf.len();
                    if kept.len() == total {
                        buf.extend_from_slice(&b.bytes);
                    } else {
                        batch::encode_kept(b.header.base_offset, &kept, b.header.producer, &mut buf);
                    }
                    let h = BatchHeader::parse(&buf[start..]).expect("a batch we just wrote");
                    seg.note_batch(&h, flushed + start as u64, interval);
                    continue;
                };
                // Version 2 (spec 1.6): a control batch (no records) is
                // dropped; a data batch keeps its stamp; and the last kept
                // batch of an entry carries its ENTRY_END, so that the
                // rewritten log still reads as whole entries (recovery
                // ends a log at an unfinished one). Below the cleanup
                // limit Raft never reads, so an entry that loses all its
                // batches leaves a harmless hole in the indexes.
                let this = if kept.is_empty() || stamp.control {
                    None
                } else if kept.len() == total {
                    Some(b.bytes.clone())
                } else {
                    let mut out = Vec::new();
                    batch::encode_kept_v2(b.header.base_offset, &kept, b.header.producer, stamp, &mut out);
                    Some(Bytes::from(out))
                };
                match this {
                    Some(bytes) => {
                        if let Some(prev) = held.take() {
                            place(&mut seg, &mut buf, flushed, &prev, false, interval);
                        }
                        if stamp.entry_end {
                            place(&mut seg, &mut buf, flushed, &bytes, false, interval);
                        } else {
                            held = Some(bytes);
                        }
                    }
                    None if stamp.entry_end => {
                        if let Some(prev) = held.take() {
                            place(&mut seg, &mut buf, flushed, &prev, true, interval);
                        }
                    }
                    None => {}
                }
            }
            if buf.len() >= COMPACTION_IO_CHUNK_BYTES {
                let n = buf.len() as u64;
                files::write_all(&file, &path, std::mem::take(&mut buf), flushed).await?;
                flushed += n;
            }
            if shared.is_stopped() {
                let _ = file.close().await;
                return Ok(None);
            }
        }
    }
    // A closed segment ends with a whole entry (placement and recovery
    // see to it); a batch still held is written as it was, defensively.
    if let Some(prev) = held.take() {
        place(&mut seg, &mut buf, flushed, &prev, false, interval);
    }
    if !buf.is_empty() {
        let n = buf.len() as u64;
        files::write_all(&file, &path, buf, flushed).await?;
        flushed += n;
    }
    seg.written_bytes = flushed;
    assert_eq!(seg.written_bytes, seg.dirty_bytes, "every kept batch was written");
    let group_end = group.last().expect("a group is not empty").next_offset;
    seg.next_offset = seg.next_offset.max(group_end);
    file.fdatasync().await.map_err(|e| StorageError::io(&path, e))?;
    let index = seg.index_file_bytes();
    files::write_file_synced(&dirs::cleaned_index_path(dir, out_base), index).await?;
    dirs::sync_dir(dir).await?;
    shared.faults.check(FaultPoint::CompactionOutputWritten)?;
    Ok(Some((seg, file, dropped)))
}

/// Appends the kept version 2 batch `bytes` to `buf` (whose first byte
/// lies at `flushed` in the output) and notes it in the output's index;
/// `end_entry` gives it `ENTRY_END` (the batches after it in its entry
/// were dropped), its checksum fixed in O(1) (`batch::restamp`).
fn place(seg: &mut Segment, buf: &mut Vec<u8>, flushed: u64, bytes: &[u8], end_entry: bool, interval: u32) {
    let start = buf.len();
    buf.extend_from_slice(bytes);
    let h = BatchHeader::parse(&buf[start..]).expect("a batch we kept");
    if end_entry {
        if let Some(stamp) = h.raft {
            let stamp = batch::RaftStamp {
                entry_end: true,
                ..stamp
            };
            batch::restamp(&mut buf[start..], h.base_offset, stamp);
        }
    }
    let h = BatchHeader::parse(&buf[start..]).expect("a batch we kept");
    seg.note_batch(&h, flushed + start as u64, interval);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(base: u64, kept_bytes: u64, next: u64) -> Input {
        Input {
            base: Offset(base),
            id: 0,
            log_path: PathBuf::new(),
            bytes: 5000,
            next_offset: Offset(next),
            drops: 0,
            kept_bytes,
        }
    }

    #[test]
    fn groups_fit_segment_bytes() {
        let segs = vec![
            input(0, 100, 10),
            input(10, 300, 20),
            input(20, 700, 30),
            input(30, 50, 40),
            input(40, 2000, 50),
            input(50, 10, 60),
        ];
        let g: Vec<Vec<u64>> = groups(segs, 1000)
            .into_iter()
            .map(|g| g.iter().map(|s| s.base.0).collect())
            .collect();
        assert_eq!(g, vec![vec![0, 10], vec![20, 30], vec![40], vec![50]]);
    }

    #[test]
    fn the_rule() {
        let mut map = KeyMap::default();
        map.latest.insert(b"a".to_vec(), 10);
        map.latest.insert(b"t".to_vec(), 12);
        let rule = Rule {
            map: &map,
            mapped_upto: Offset(20),
            now_ms: 1000,
            delete_retention_ms: 100,
        };
        let r = |offset: u64, key: Option<&str>, value: &str, ts: i64| StoredRecord {
            offset: Offset(offset),
            timestamp_ms: ts,
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.as_bytes().to_vec(),
        };
        let mut next = None;
        assert!(!rule.keep(&r(3, Some("a"), "old", 0), &mut next), "superseded");
        assert!(rule.keep(&r(10, Some("a"), "new", 0), &mut next), "latest");
        assert!(rule.keep(&r(4, None, "keyless", 0), &mut next), "keyless stays");
        assert!(
            rule.keep(&r(5, Some("b"), "unmapped", 0), &mut next),
            "not in the map"
        );
        assert!(
            !rule.keep(&r(12, Some("t"), "", 900), &mut next),
            "expired tombstone"
        );
        assert!(
            rule.keep(&r(12, Some("t"), "", 950), &mut next),
            "fresh tombstone"
        );
        assert_eq!(next, Some(1050));
        assert!(
            rule.keep(&r(25, Some("u"), "", 0), &mut next),
            "tombstone past the map"
        );
    }
}
