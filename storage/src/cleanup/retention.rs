//! Retention: closed segments leave the hot tier, oldest first, once they
//! are entirely older than `retention_ms` (their newest record's timestamp
//! is older than now minus it) or while the partition holds more than
//! `retention_bytes` (the active segment counts, but is never removed).
//! Leaving means deleted or, for a tiered partition, moved to the cold
//! store. Cold retention deletes cold segments the same way, by
//! `cold_retention_ms` and `cold_retention_bytes`.
//!
//! Delete protocol, one segment at a time, oldest first:
//!
//! 1. the segment leaves the in-memory map (new reads no longer find it;
//!    reads in progress keep their file handle and finish);
//! 2. rename `<base>.log` to `<base>.log.deleting`: the decisive step, a
//!    segment is its `.log`;
//! 3. unlink `<base>.index`;
//! 4. fsync the directory;
//! 5. free the renamed file a step at a time, once no read holds it, and
//!    unlink it (reclaim.rs: unlinking a large file at once holds up the
//!    disk's fsyncs), and only then start on the next segment.
//!
//! So whatever a crash leaves is a suffix of the segments: the segment being
//! deleted is whole, gone, or gone but for its index or its `.deleting`
//! file, which open removes as leftovers; earlier segments are durably
//! gone, later ones untouched. The log start offset is the first remaining
//! segment's base, no marker needed. A failure in steps 2-4 poisons the
//! partition: it stops all cleanup, so a later segment is never deleted
//! while an earlier one might survive. A failure in step 5 only leaves the
//! file for the next open to remove (logged).
//!
//! Move protocol (tiered): `ColdStore::put` the log and index, and only once
//! the store confirms the copy is durable, run the delete protocol. A crash
//! in between leaves the segment in both tiers; reads use the hot copy and
//! the next pass moves it again (`put` replaces).

use crate::cleanup::pass::CleanupReport;
use crate::cleanup::policy::CleanupPolicy;
use crate::cleanup::reclaim;
use crate::io::dirs;
use crate::io::files;
use crate::io::segment_files::{self, Held};
use crate::log::faults::FaultPoint;
use crate::log::partition::PartitionLog;
use crate::log::segment::IndexState;
use crate::tier::cold::ColdSegmentInfo;
use crate::tier::state::ColdSegment;
use crate::{Offset, Result, StorageError};

/// Whether a segment whose newest record is `max_timestamp_ms` is entirely
/// older than `retention_ms` at `now_ms`. An empty segment (`i64::MIN`) is.
pub(crate) fn expired(max_timestamp_ms: i64, retention_ms: Option<u64>, now_ms: i64) -> bool {
    retention_ms.is_some_and(|r| {
        let r = i64::try_from(r).unwrap_or(i64::MAX);
        max_timestamp_ms < now_ms.saturating_sub(r)
    })
}

impl PartitionLog {
    /// The retention cut at `now_ms`, whatever the cleanup limit: the end
    /// of the last closed segment retention would remove (or move) now,
    /// oldest first, were nothing held back; `None` when it would remove
    /// none or the policy does not delete. A replicated log's cleanup pass
    /// purges its Raft log up to it before retention runs.
    pub fn retention_cut(&self, now_ms: i64) -> Option<Offset> {
        let shared = self.shared();
        let policy = shared.config.borrow().cleanup.clone();
        if !policy.delete {
            return None;
        }
        let segments = shared.segments();
        let mut total = segments.written_bytes();
        let mut cut = None;
        let mut it = segments.iter().peekable();
        while let Some(seg) = it.next() {
            if it.peek().is_none() || !seg.sealed {
                break;
            }
            let go = expired(seg.max_timestamp_ms, policy.retention_ms, now_ms)
                || policy.retention_bytes.is_some_and(|b| total > b);
            if !go {
                break;
            }
            total -= seg.written_bytes;
            cut = Some(seg.next_offset);
        }
        cut
    }

    /// Removes (or moves) closed segments past the hot retention limits. The
    /// caller holds the maintenance permit.
    pub(crate) async fn retention_pass(
        &self,
        policy: &CleanupPolicy,
        now_ms: i64,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let shared = self.shared().clone();
        if policy.tiered && shared.cold.is_none() {
            tracing::debug!(partition = %shared.dir.display(), "tiered without a cold store: segments are kept");
            return Ok(());
        }
        loop {
            if shared.is_stopped() {
                return Ok(());
            }
            let victim = {
                let segments = shared.segments();
                let total = segments.written_bytes();
                let mut it = segments.iter();
                let limit = shared.cleanup_bound();
                match (it.next(), it.next()) {
                    (Some(first), Some(_)) if first.sealed && first.next_offset.0 <= limit => {
                        let go = expired(first.max_timestamp_ms, policy.retention_ms, now_ms)
                            || policy.retention_bytes.is_some_and(|b| total > b);
                        go.then_some((first.base, first.written_bytes))
                    }
                    _ => None,
                }
            };
            let Some((base, bytes)) = victim else {
                return Ok(());
            };
            if policy.tiered {
                self.tier_segment(base).await?;
                report.segments_tiered += 1;
                report.bytes_tiered += bytes;
            }
            self.delete_hot_segment(base).await?;
            if !policy.tiered {
                report.segments_deleted += 1;
                report.bytes_deleted += bytes;
            }
        }
    }

    /// Copies closed segment `base` to the cold store, durably.
    async fn tier_segment(&self, base: Offset) -> Result<()> {
        let shared = self.shared();
        let cold = shared.cold.as_ref().expect("checked by the caller");
        let index = self.sealed_index_bytes(base).await?;
        let (info, log_path) = {
            let segments = shared.segments();
            let seg = segments.expect(base);
            (
                ColdSegmentInfo {
                    base,
                    next_offset: seg.next_offset,
                    log_bytes: seg.written_bytes,
                    max_timestamp_ms: seg.max_timestamp_ms,
                },
                seg.log_path.clone(),
            )
        };
        cold.store.put(&cold.partition, info, &log_path, index).await?;
        cold.segments
            .borrow_mut()
            .insert(base, ColdSegment { info, index: None });
        shared.faults.check(FaultPoint::TierCopied)
    }

    /// The exact `.index` file of sealed segment `base`, rebuilt from the log
    /// if the one on disk is damaged.
    async fn sealed_index_bytes(&self, base: Offset) -> Result<Vec<u8>> {
        let shared = self.shared();
        loop {
            let (footer, path, id) = {
                let segments = shared.segments();
                let seg = segments.expect(base);
                match &seg.index {
                    IndexState::Loaded(ix) => {
                        return Ok(ix.encode_file(seg.written_bytes, seg.next_offset, seg.max_timestamp_ms))
                    }
                    IndexState::OnDisk(f) => (*f, seg.index_path.clone(), seg.id),
                }
            };
            match files::read_index(&path, &footer).await {
                Some(ix) => {
                    return Ok(ix.encode_file(footer.log_bytes, footer.next_offset, footer.max_timestamp_ms))
                }
                None => {
                    shared.rebuild_index(base, id).await?;
                }
            }
        }
    }

    /// The delete protocol for the first segment, `base`.
    async fn delete_hot_segment(&self, base: Offset) -> Result<()> {
        let shared = self.shared();
        let mut seg = shared.segments_mut().remove_oldest(base);
        // Its read handle, for reads still under way: freed once they end.
        let held = seg
            .file
            .take()
            .map(Held::Active)
            .or_else(|| segment_files::take(seg.id).map(Held::Closed));
        let trash = dirs::deleting_log_path(&shared.dir, base);
        let steps = async {
            dirs::rename_if_exists(&seg.log_path, &trash).await?;
            shared.faults.check(FaultPoint::RetentionLogRemoved)?;
            dirs::remove_if_exists(&seg.index_path).await?;
            dirs::sync_dir(&shared.dir).await?;
            shared.faults.check(FaultPoint::RetentionSegmentRemoved)
        };
        let stepped = steps.await;
        match &stepped {
            // Out of descriptors (the directory's fsync needs one), the log
            // is consistent whichever of its steps reach the disk: the
            // segment has left it, and its file is freed as usual.
            Err(e) if crate::log::write_failure::storage_out_of_descriptors(e) => {}
            Err(e) => {
                if !matches!(e, StorageError::FaultInjected(_)) {
                    shared.poison(e);
                }
                if let Some(held) = held {
                    held.close().await;
                }
                return stepped;
            }
            Ok(()) => {}
        }
        if let Err(e) = reclaim::release(&trash, held, || shared.is_stopped()).await {
            tracing::warn!(file = %trash.display(), error = %e, "could not free a deleted segment; the next open removes it");
        }
        stepped?;
        tracing::debug!(partition = %shared.dir.display(), base = base.0, "segment left the hot tier");
        Ok(())
    }

    /// Deletes cold segments past the cold retention limits, oldest first.
    pub(crate) async fn cold_retention_pass(
        &self,
        policy: &CleanupPolicy,
        now_ms: i64,
        report: &mut CleanupReport,
    ) -> Result<()> {
        let shared = self.shared().clone();
        let Some(cold) = &shared.cold else {
            return Ok(());
        };
        loop {
            if shared.is_stopped() {
                return Ok(());
            }
            let victim = {
                let segs = cold.segments.borrow();
                let total: u64 = segs.values().map(|s| s.info.log_bytes).sum();
                segs.values().next().and_then(|first| {
                    let go = expired(first.info.max_timestamp_ms, policy.cold_retention_ms, now_ms)
                        || policy.cold_retention_bytes.is_some_and(|b| total > b);
                    go.then(|| first.clone())
                })
            };
            let Some(victim) = victim else {
                return Ok(());
            };
            let base = victim.info.base;
            cold.segments.borrow_mut().remove(&base);
            if let Err(e) = cold.store.delete(&cold.partition, base).await {
                // Still the oldest as far as we know: keep it, so a later
                // segment is never deleted before it.
                cold.segments.borrow_mut().insert(base, victim);
                return Err(e);
            }
            report.cold_segments_deleted += 1;
            report.cold_bytes_deleted += victim.info.log_bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry() {
        assert!(!expired(100, None, 1_000_000));
        assert!(expired(100, Some(50), 200));
        assert!(!expired(150, Some(50), 200), "exactly retention_ms old is kept");
        assert!(expired(i64::MIN, Some(1), 0), "an empty segment is expired");
        assert!(!expired(0, Some(u64::MAX), i64::MAX));
    }
}
