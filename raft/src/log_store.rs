//! `LogStore`: openraft's log storage over a partition's log. The segment
//! log is the Raft log (docs/design/raft-storage.md): an entry is placed
//! with `PartitionLog::append_entry` as version 2 batches stamped with its
//! `(term, index)`, and reported flushed when the log's `durable_index`
//! passes it (group commit, as for any append).
//!
//! Entries are found by index through an in-memory table (index → term,
//! segment, position, length), built at open by reading the log once and
//! kept as entries are placed, truncated and purged. (The spec's index v2,
//! a sparse on-disk lookup by raft index, replaces it later.)
//!
//! Truncating an uncommitted suffix cuts the log in place
//! (`PartitionLog::truncate_from`): the store's handle, and every clone of
//! it a broker holds, stays the log's; the store drops the entries cut
//! from its table.
//!
//! The log is replicated from `open` on: clients read below its committed
//! mark, which starts at the last committed log id the replica noted
//! (`RaftMeta`'s `committed` file), so a restarted replica serves what it
//! had committed before any leader tells it again; openraft re-applies the
//! entries up to it (`read_committed`) at start.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use es_storage::batch::{self, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP, MAGIC_V2};
use es_storage::{BatchBuf, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, Stamping};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageError, StorageIOError};

use crate::entry::{EntryBatch, EsEntry, EsPayload};
use crate::membership;
use crate::meta::RaftMeta;
use crate::snapshot_install::{self, Manifest, Step};
use crate::types::{log_id, EsRaft, LogId, NodeId, StorageResult, Vote};

/// Where an entry lies in the log.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Loc {
    term: u64,
    segment: Offset,
    position: u64,
    len: u64,
    /// The offset after the entry.
    next_offset: u64,
}

struct Inner {
    log: PartitionLog,
    meta: Rc<RaftMeta>,
    table: RefCell<BTreeMap<u64, Loc>>,
    /// Truncations begun so far: a read that sees it move had entries cut
    /// under it.
    cuts: Cell<u64>,
    /// The first index of the truncation under way: the log may have lost
    /// the entries from there before the table does.
    cutting_from: Cell<Option<u64>>,
}

/// A replica's Raft log over its partition log; clones share it.
#[derive(Clone)]
pub struct LogStore(Rc<Inner>);

fn read_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::read_logs(&std::io::Error::other(e.to_string())).into()
}

fn write_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_logs(&std::io::Error::other(e.to_string())).into()
}

impl LogStore {
    /// Opens the partition log in `log_dir` and the replica's metadata in
    /// `meta_dir`, and finds every entry the log holds.
    pub async fn open(
        log_dir: &Path,
        meta_dir: &Path,
        config: LogConfig,
        batcher: FsyncBatcher,
    ) -> StorageResult<LogStore> {
        let (log, _report) = PartitionLog::open(log_dir, config, batcher)
            .await
            .map_err(read_err)?;
        LogStore::from_log(log, meta_dir).await
    }

    /// The store over `log`, a partition log just opened (its owner opened
    /// it, and closes it: [`close_meta`](Self::close_meta) leaves it open),
    /// with the replica's metadata in `meta_dir`; finds every entry the log
    /// holds. No entry may have been placed in `log` since it was opened.
    pub async fn from_log(log: PartitionLog, meta_dir: &Path) -> StorageResult<LogStore> {
        let meta = Rc::new(RaftMeta::open(meta_dir).await?);
        // A snapshot install a crash interrupted is finished first; a
        // transfer's leftovers go (snapshot_install.rs).
        snapshot_install::recover(&log, &meta).await?;
        let mut table = BTreeMap::new();
        let mut open: Option<(u64, Loc)> = None;
        for p in log.placed_batches().await.map_err(read_err)? {
            let Some(r) = p.header.raft else { continue };
            let len = p.header.batch_len as u64;
            match &mut open {
                Some((index, loc)) if *index == r.index => {
                    loc.len += len;
                    loc.next_offset = p.header.next_offset().0;
                }
                _ => {
                    open = Some((
                        r.index,
                        Loc {
                            term: r.term,
                            segment: p.segment,
                            position: p.position,
                            len,
                            next_offset: p.header.next_offset().0,
                        },
                    ))
                }
            }
            if r.entry_end {
                if let Some((index, loc)) = open.take() {
                    table.insert(index, loc);
                }
            }
        }
        if let Some((&last, _)) = table.last_key_value() {
            log.resume_entries(last);
        }
        // Cleanup may touch what Raft purged, nothing after it.
        let mut cleanup_limit = 0;
        if let Some(purged) = meta.purged() {
            cleanup_limit = table
                .range(..=purged.index)
                .next_back()
                .map_or(log.hot_start_offset().0, |(_, l)| l.next_offset);
            table = table.split_off(&(purged.index + 1));
        }
        log.set_cleanup_limit(Offset(cleanup_limit));
        // Replicated from now on: clients read below the committed mark,
        // which starts at what this replica knew committed (its last
        // committed log id, as far as its log holds it).
        let committed = committed_in(&table, meta.committed())
            .and_then(|c| table.get(&c.index))
            .map_or(0, |l| l.next_offset);
        log.set_committed(Offset(committed));
        Ok(LogStore(Rc::new(Inner {
            log,
            meta,
            table: RefCell::new(table),
            cuts: Cell::new(0),
            cutting_from: Cell::new(None),
        })))
    }

    /// The replica's metadata (its state machine shares it).
    pub fn meta(&self) -> Rc<RaftMeta> {
        self.0.meta.clone()
    }

    /// The partition log: one handle for the store's life (a truncation
    /// cuts it in place).
    pub fn log(&self) -> PartitionLog {
        self.0.log.clone()
    }

    /// Raises the log's high watermark (the state machine applied up to it).
    pub fn set_committed(&self, offset: u64) {
        self.0.log.set_committed(Offset(offset));
    }

    /// The log ids of the entries held, in order.
    pub fn log_ids(&self) -> Vec<LogId> {
        self.0
            .table
            .borrow()
            .iter()
            .map(|(&i, l)| log_id(l.term, i))
            .collect()
    }

    /// The offset after the last entry at or below index `index` held
    /// here (`None` when none is).
    pub fn offset_after(&self, index: u64) -> Option<u64> {
        self.0
            .table
            .borrow()
            .range(..=index)
            .next_back()
            .map(|(_, l)| l.next_offset)
    }

    /// The last entry at or below index `through` that ends at or below
    /// offset `cut` (every record of it lies below the cut): what a
    /// retention cut at `cut` lets a replica that applied `through` purge.
    /// `None` when no entry held does. Offsets rise with indexes, so this
    /// is a bisection over the table.
    pub fn last_entry_ending_by(&self, cut: u64, through: u64) -> Option<LogId> {
        let table = self.0.table.borrow();
        let at_or_below = |i: u64| table.range(..=i).next_back().map(|(&i, l)| (i, *l));
        let (mut hi, hl) = at_or_below(through)?;
        if hl.next_offset <= cut {
            return Some(log_id(hl.term, hi));
        }
        // Over indexes x: "the last entry at or below x ends by the cut"
        // holds at `lo`, not at `hi`, and turns false once.
        let (mut lo, fl) = table.first_key_value().map(|(&i, l)| (i, *l))?;
        if fl.next_offset > cut {
            return None;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match at_or_below(mid) {
                Some((_, l)) if l.next_offset <= cut => lo = mid,
                _ => hi = mid,
            }
        }
        at_or_below(lo).map(|(i, l)| log_id(l.term, i))
    }

    /// Closes the partition log and the metadata's committed file (a
    /// replica stopping).
    pub async fn close(&self) -> StorageResult<()> {
        self.close_meta().await;
        self.log().close().await.map_err(write_err)
    }

    /// Closes the metadata's committed file only (its last value written),
    /// leaving the partition log open: for a log its owner opened and
    /// closes ([`from_log`](Self::from_log)).
    pub async fn close_meta(&self) {
        self.0.meta.close().await;
    }

    /// Installs a snapshot received from a leader (snapshot_install.rs,
    /// steps 2-6): commits `m`, cuts the log after `m.after`, places the
    /// staged entries, saves the descriptor, removes the manifest; then
    /// the cleanup limit rises to `end_offset` (everything up to the
    /// snapshot is purged: openraft purges it as it installs). The caller
    /// (the state machine) sets the committed mark. `stop_after` ends it
    /// there, as a crash would (tests).
    pub(crate) async fn install(
        &self,
        m: &Manifest,
        end_offset: u64,
        stop_after: Option<Step>,
    ) -> StorageResult<()> {
        let stop = |s: Step| stop_after == Some(s);
        snapshot_install::commit(&self.0.meta, m).await?;
        if stop(Step::Committed) {
            return Ok(());
        }
        // Nothing staged: this log holds the snapshot's entries, and what
        // follows them stays (openraft cut a conflicting tail already).
        if m.staged.is_some() {
            match m.start {
                Some(_) => self.reset(m).await?,
                None => self.cut(m.after.map_or(0, |a| a.index + 1)).await?,
            }
        }
        if stop(Step::Cut) {
            return Ok(());
        }
        if let Some(name) = &m.staged {
            let path = snapshot_install::staged_path(self.0.meta.dir(), name);
            snapshot_install::place_staged(&self.0.log, &path, m.after, |id, p| {
                self.0.table.borrow_mut().insert(
                    id.index,
                    Loc {
                        term: id.leader_id.term,
                        segment: p.segment,
                        position: p.position,
                        len: p.len,
                        next_offset: p.next_offset.0,
                    },
                );
            })
            .await?;
        }
        if stop(Step::Placed) {
            return Ok(());
        }
        self.0.meta.save_snapshot(m.descriptor.clone()).await?;
        if stop(Step::Described) {
            return Ok(());
        }
        snapshot_install::finish(&self.0.meta).await?;
        if let Some(purged) = self.0.meta.purged() {
            let mut table = self.0.table.borrow_mut();
            let keep = table.split_off(&(purged.index + 1));
            *table = keep;
        }
        if end_offset > self.0.log.cleanup_limit().0 {
            self.0.log.set_cleanup_limit(Offset(end_offset));
        }
        Ok(())
    }

    /// Whether this log holds entry `id`.
    pub(crate) fn holds(&self, id: LogId) -> bool {
        self.0
            .table
            .borrow()
            .get(&id.index)
            .is_some_and(|l| l.term == id.leader_id.term)
    }

    /// Resets the log to start where a whole-log install's staged entries
    /// do: every entry goes (snapshot_install.rs).
    async fn reset(&self, m: &Manifest) -> StorageResult<()> {
        self.0.cuts.set(self.0.cuts.get() + 1);
        self.0.cutting_from.set(Some(0));
        let reset = snapshot_install::cut(&self.0.log, m).await;
        self.0.cutting_from.set(None);
        reset?;
        self.0.table.borrow_mut().clear();
        Ok(())
    }

    /// Empties the log and starts it again at `offset`, the next entry
    /// placed being `first_index`: a controller image installed in place of
    /// entries this log does not hold (`snapshot_image.rs`).
    pub(crate) async fn restart_at(&self, offset: u64, first_index: u64) -> StorageResult<()> {
        let m = Manifest {
            after: None,
            start: Some(crate::snapshot::Start {
                offset,
                index: first_index,
            }),
            staged: None,
            descriptor: Vec::new(),
        };
        self.reset(&m).await
    }

    /// Makes the store say again what the log holds after a write the log
    /// refused (a full disk; its openraft instance stopped on the error):
    /// once every write placed has landed, an entry whose end was never
    /// written is cut from the log (`PartitionLog::cut_unfinished_entry`)
    /// and the entries placed but refused leave the table. For a store a
    /// new openraft instance is started over (`controller/restart.rs`).
    pub(crate) async fn resync(&self) -> StorageResult<()> {
        self.0.cuts.set(self.0.cuts.get() + 1);
        let cut = self.0.log.cut_unfinished_entry().await;
        cut.map_err(write_err)?;
        let written = self.0.log.written_index();
        self.0.table.borrow_mut().split_off(&written);
        Ok(())
    }

    /// Cuts every entry from `index` on (the store's `truncate`).
    async fn cut(&self, index: u64) -> StorageResult<()> {
        self.0.cuts.set(self.0.cuts.get() + 1);
        self.0.cutting_from.set(Some(index));
        // The table loses the entries only once the log has: a failed cut
        // poisons the log, and the table still says what may be on disk.
        let cut = self.0.log.truncate_from(index).await;
        self.0.cutting_from.set(None);
        cut.map_err(write_err)?;
        self.0.table.borrow_mut().split_off(&index);
        Ok(())
    }

    async fn read_entry(&self, index: u64, loc: Loc) -> StorageResult<EsEntry> {
        let raws = self
            .log()
            .read_at(loc.segment, loc.position, loc.position + loc.len)
            .await
            .map_err(read_err)?;
        let id = log_id(loc.term, index);
        let bad = |why: &str| read_err(format!("entry {id}: {why}"));
        let first = raws
            .first()
            .ok_or_else(|| bad("no batch where the entry was placed"))?;
        for b in &raws {
            let r = b.header.raft.ok_or_else(|| bad("a version 1 batch"))?;
            if (r.term, r.index) != (loc.term, index) {
                return Err(bad("the batch there has another stamp"));
            }
        }
        let payload = match batch::control_body(&first.header, &first.bytes) {
            Some((CONTROL_BLANK, _)) => EsPayload::Blank,
            Some((CONTROL_MEMBERSHIP, body)) => {
                EsPayload::Membership(membership::decode(body).ok_or_else(|| bad("bad membership"))?)
            }
            Some((kind, _)) => return Err(bad(&format!("unknown control kind {kind}"))),
            None => EsPayload::Batches(raws.into_iter().map(|b| EntryBatch::Shared(b.bytes)).collect()),
        };
        Ok(EsEntry { log_id: id, payload })
    }
}

/// The committed log id `saved` as far as the log `table` holds it: the
/// file is written behind and never fsynced, and a crash can end the log
/// before it (an entry is committed once a majority holds it; this
/// replica's copy may not have been fsynced). Every entry of the log up
/// to `saved` is committed (the log is a prefix of the log the replica
/// accepted, which held `saved`), so the last one at or below it is.
/// `None` when the table holds neither it nor an entry below it, or holds
/// another entry at its index (a file that does not match the log is
/// not trusted).
fn committed_in(table: &BTreeMap<u64, Loc>, saved: Option<LogId>) -> Option<LogId> {
    let saved = saved?;
    let (&index, loc) = table.range(..=saved.index).next_back()?;
    if index == saved.index && loc.term != saved.leader_id.term {
        tracing::warn!(%saved, term = loc.term, "the committed log id does not match the log; not used");
        return None;
    }
    Some(log_id(loc.term, index))
}

/// A version 2 batch from what openraft hands the store.
fn v2(b: EntryBatch) -> (BatchBuf, bool) {
    match b {
        // A leader's: as produced; a version 1 batch is copied into v2.
        EntryBatch::Owned(b) if b.get(16) == Some(&MAGIC_V2) => (b, false),
        EntryBatch::Owned(b) => (BatchBuf::from(batch::upgrade(&b, RaftStamp::default())), false),
        // Read from a log (the leader's, sent on): stamped already.
        EntryBatch::Shared(b) => (BatchBuf::from(b.to_vec()), true),
    }
}

// openraft's StorageError is what its storage traits return.
#[allow(clippy::result_large_err)]
pub(crate) fn body_of(payload: EsPayload) -> StorageResult<EntryBody> {
    Ok(match payload {
        EsPayload::Blank => EntryBody::Control {
            kind: CONTROL_BLANK,
            body: Vec::new(),
        },
        EsPayload::Membership(m) => EntryBody::Control {
            kind: CONTROL_MEMBERSHIP,
            body: membership::encode(&m),
        },
        EsPayload::Batches(bs) => {
            let mut stamped = false;
            let bufs = bs
                .into_iter()
                .map(|b| {
                    let (buf, s) = v2(b);
                    stamped |= s;
                    buf
                })
                .collect();
            let stamping = if stamped {
                Stamping::Verify
            } else {
                Stamping::Leader
            };
            EntryBody::Batches(bufs, stamping)
        }
        EsPayload::Command(_) => return Err(write_err("a partition log takes no controller command")),
    })
}

impl RaftLogReader<EsRaft> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<EsEntry>> {
        let locs: Vec<(u64, Loc)> = {
            let table = self.0.table.borrow();
            let lo = match range.start_bound() {
                Bound::Included(&i) => Bound::Included(i),
                Bound::Excluded(&i) => Bound::Excluded(i),
                Bound::Unbounded => Bound::Unbounded,
            };
            let hi = match range.end_bound() {
                Bound::Included(&i) => Bound::Included(i),
                Bound::Excluded(&i) => Bound::Excluded(i),
                Bound::Unbounded => Bound::Unbounded,
            };
            // Placed but not yet written (a leader's replication reads its
            // new entries as soon as they are placed): the answer ends
            // before them, and openraft asks again.
            let written = self.0.log.written_index();
            table
                .range((lo, hi))
                .take_while(|(&i, _)| i < written)
                .map(|(&i, &l)| (i, l))
                .collect()
        };
        let cuts = self.0.cuts.get();
        let mut out = Vec::with_capacity(locs.len());
        for (index, loc) in locs {
            match self.read_entry(index, loc).await {
                Ok(e) => out.push(e),
                // Cut while the read was on its way (a deposed leader's
                // replication reads the suffix that its follower side,
                // hearing the new leader, truncates): what was read is
                // still a prefix the log held, and openraft takes a
                // shorter answer and asks again. An error with no cut is
                // the log's.
                Err(_)
                    if self.0.cuts.get() != cuts || self.0.cutting_from.get().is_some_and(|f| index >= f) =>
                {
                    break
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

impl RaftLogStorage<EsRaft> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<EsRaft>> {
        let purged = self.0.meta.purged();
        let last = self
            .0
            .table
            .borrow()
            .last_key_value()
            .map(|(&i, l)| log_id(l.term, i));
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        self.0.meta.save_vote(vote).await
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        Ok(self.0.meta.vote())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> StorageResult<()> {
        self.0.meta.note_committed(committed);
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId>> {
        Ok(committed_in(&self.0.table.borrow(), self.0.meta.committed()))
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<EsRaft>) -> StorageResult<()>
    where
        I: IntoIterator<Item = EsEntry>,
    {
        let log = self.log();
        let mut last = None;
        for e in entries {
            let (term, index) = (e.log_id.leader_id.term, e.log_id.index);
            let body = body_of(e.payload)?;
            let proposed = matches!(body, EntryBody::Batches(_, Stamping::Leader));
            let placed = match log.append_entry(term, index, body) {
                Ok(placed) => placed,
                // A leader's proposal the log refuses (a batch over the
                // topic's limits that produce did not catch) becomes a
                // blank entry: refusing the append would stop the group.
                // Applied, it answers no offsets: its produces are told
                // nothing was written. A follower's copy is never
                // replaced: it must hold what the leader holds.
                Err(es_storage::StorageError::Invalid(why)) if proposed => {
                    tracing::warn!(term, index, %why, "the log refused a proposed entry; it is written as a blank entry");
                    let blank = EntryBody::Control {
                        kind: CONTROL_BLANK,
                        body: Vec::new(),
                    };
                    log.append_entry(term, index, blank).map_err(write_err)?
                }
                Err(e) => return Err(write_err(e)),
            };
            self.0.table.borrow_mut().insert(
                index,
                Loc {
                    term,
                    segment: placed.segment,
                    position: placed.position,
                    len: placed.len,
                    next_offset: placed.next_offset.0,
                },
            );
            last = Some(index);
        }
        match last {
            None => callback.log_io_completed(Ok(())),
            Some(last) => {
                glommio::spawn_local(async move {
                    let flushed = log.wait_durable_index(last).await.map_err(std::io::Error::other);
                    callback.log_io_completed(flushed);
                })
                .detach();
            }
        }
        Ok(())
    }

    async fn truncate(&mut self, from: LogId) -> StorageResult<()> {
        if self.0.table.borrow().range(from.index..).next().is_none() {
            return Ok(());
        }
        self.cut(from.index).await
    }

    async fn purge(&mut self, upto: LogId) -> StorageResult<()> {
        self.0.meta.save_purged(&upto).await?;
        let limit = {
            let mut table = self.0.table.borrow_mut();
            // Only for an entry this log holds: a purge that follows a
            // snapshot install may run before the install placed it (the
            // install raises the limit then).
            let limit = table
                .get(&upto.index)
                .filter(|l| l.term == upto.leader_id.term)
                .map(|l| l.next_offset);
            let keep = table.split_off(&(upto.index + 1));
            *table = keep;
            limit
        };
        if let Some(limit) = limit.filter(|&l| l > self.0.log.cleanup_limit().0) {
            self.0.log.set_cleanup_limit(Offset(limit));
        }
        Ok(())
    }
}

/// The bytes of each batch of a data entry, for tests and the transport.
pub fn batch_bytes(e: &EsEntry) -> Vec<Bytes> {
    match &e.payload {
        EsPayload::Batches(bs) => bs.iter().map(|b| Bytes::copy_from_slice(b.bytes())).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_hint_is_taken_as_far_as_the_log_holds_it() {
        let loc = |term| Loc {
            term,
            segment: Offset(0),
            position: 0,
            len: 0,
            next_offset: 0,
        };
        let table: BTreeMap<u64, Loc> = [(1, loc(1)), (2, loc(1)), (3, loc(2)), (4, loc(2))].into();
        assert_eq!(committed_in(&table, None), None);
        assert_eq!(committed_in(&table, Some(log_id(2, 3))), Some(log_id(2, 3)));
        assert_eq!(
            committed_in(&table, Some(log_id(3, 9))),
            Some(log_id(2, 4)),
            "past the log's end: its last entry"
        );
        assert_eq!(
            committed_in(&table, Some(log_id(1, 4))),
            None,
            "another entry at its index"
        );
        assert_eq!(committed_in(&table, Some(log_id(1, 0))), None, "below the log");
        assert_eq!(committed_in(&BTreeMap::new(), Some(log_id(1, 1))), None);
    }
}
