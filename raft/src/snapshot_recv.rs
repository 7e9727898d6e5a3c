//! `SnapshotReceiver`: a follower's side of a snapshot transfer, one per
//! partition replica (docs/design/raft-snapshots.md). It answers a
//! leader's offer with the last entry it keeps (its last applied one:
//! applied entries are committed, and Log Matching makes that prefix the
//! leader's), stages the chunks that follow in
//! `data/raft/<topic>/<p>/incoming/<transfer>.stage` (each batch's CRC and
//! stamp checked on arrival, the run checked to follow on without a gap),
//! and at done hands openraft a `Staged` snapshot to install
//! (`Raft::install_full_snapshot`; `snapshot_install.rs` puts it in the
//! log). A new offer drops the transfer before it and its file.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use es_storage::batch;
use glommio::io::{BufferedFile, OpenOptions};
use openraft::storage::Snapshot;
use openraft::Raft;

use crate::log_store::LogStore;
use crate::partition_sm::{read_descriptor, PartitionSm};
use crate::replica_stats::ReplicaStats;
use crate::snapshot::{EsSnapshot, StagedSuffix, Start};
use crate::snapshot_install::{clear_incoming, INCOMING};
use crate::transport::codec::ErrorBody;
use crate::transport::error::code;
use crate::transport::snapshot_codec::{Chunk, Done, Offer, OfferReply};
use crate::types::{EsRaft, LogId, Vote};

/// One transfer being received.
struct Transfer {
    id: u64,
    vote: Vote,
    last: LogId,
    end_offset: u64,
    after: Option<LogId>,
    /// The run replaces the whole log, from this offset (the leader's
    /// first hot offset at the offer).
    whole_from: Option<u64>,
    /// The first entry staged.
    first: Option<LogId>,
    /// The next chunk's seq.
    seq: u64,
    /// The offset the next batch must start at.
    next_offset: u64,
    /// The last batch's entry, and whether that entry ended.
    at: Option<(LogId, bool)>,
    file: Option<Rc<BufferedFile>>,
    name: String,
    written: u64,
}

/// A partition replica's receiving side; the server's registry holds it.
pub struct SnapshotReceiver {
    store: LogStore,
    sm: PartitionSm,
    stats: Rc<ReplicaStats>,
    current: RefCell<Option<Transfer>>,
    /// Tells chunks that arrived early (they run as tasks) that their turn
    /// came: the transfer and the seq of the next chunk to append. A
    /// transfer that ends or fails moves it to another transfer, so no
    /// chunk waits for a turn that will not come.
    turn: tokio::sync::watch::Sender<(u64, u64)>,
}

/// A transfer refused: what the leader sent does not hold together.
pub(crate) fn refuse(message: String) -> ErrorBody {
    ErrorBody {
        code: code::MALFORMED.into(),
        message,
    }
}

/// A transfer that failed here (no such transfer, a local error): the
/// leader may try again.
pub(crate) fn failed(message: String) -> ErrorBody {
    ErrorBody {
        code: code::NOT_READY.into(),
        message,
    }
}

impl SnapshotReceiver {
    pub(crate) fn new(store: LogStore, sm: PartitionSm, stats: Rc<ReplicaStats>) -> SnapshotReceiver {
        SnapshotReceiver {
            store,
            sm,
            stats,
            current: RefCell::new(None),
            turn: tokio::sync::watch::channel((0, 0)).0,
        }
    }

    fn incoming(&self) -> PathBuf {
        self.store.meta().dir().join(INCOMING)
    }

    /// A leader's offer: from where this replica needs its log.
    pub(crate) async fn offer(&self, o: Offer) -> Result<OfferReply, ErrorBody> {
        if let Some(mine) = self.store.meta().vote().filter(|v| *v > o.vote) {
            return Ok(OfferReply::HigherVote(mine));
        }
        let Some(last) = o.last else {
            return Err(refuse("a snapshot offer without a last entry".into()));
        };
        // Whatever an earlier transfer staged goes.
        self.end_transfer();
        clear_incoming(self.store.meta().dir())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let applied = self.sm.last_applied();
        if applied.is_some_and(|a| a.index >= last.index) || self.store.holds(last) {
            // This replica holds the snapshot's entries: nothing to send.
            *self.current.borrow_mut() = Some(Transfer {
                id: o.transfer,
                vote: o.vote,
                last,
                end_offset: o.end_offset,
                after: Some(last),
                whole_from: None,
                first: None,
                seq: 0,
                next_offset: o.end_offset,
                at: Some((last, true)),
                file: None,
                name: String::new(),
                written: 0,
            });
            return Ok(OfferReply::Nothing);
        }
        let mut from_offset = self.sm.committed_offset();
        let mut after = applied;
        let mut whole_from = None;
        if from_offset < o.log_start {
            // The leader's log starts past what this replica applied
            // (retention there deleted what it would need): the leader's
            // log from its first hot offset replaces this one whole.
            after = None;
            from_offset = o.log_start;
            whole_from = Some(o.log_start);
            tracing::info!(
                group = o.group,
                applied_end = self.sm.committed_offset(),
                leader_start = o.log_start,
                "the leader's log starts past this replica's: the whole log will be replaced"
            );
        }
        let name = format!("{}.stage", o.transfer);
        let dir = self.incoming();
        es_storage::create_dir_all(&dir)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .buffered_open(dir.join(&name))
            .await
            .map_err(|e| failed(format!("{}: {e}", dir.display())))?;
        *self.current.borrow_mut() = Some(Transfer {
            id: o.transfer,
            vote: o.vote,
            last,
            end_offset: o.end_offset,
            after,
            whole_from,
            first: None,
            seq: 0,
            next_offset: from_offset,
            at: after.map(|a| (a, true)),
            file: Some(Rc::new(file)),
            name,
            written: 0,
        });
        let _ = self.turn.send((o.transfer, 0));
        Ok(OfferReply::Stream { after, from_offset })
    }

    /// A chunk: checked and appended to the staged file in seq order.
    pub(crate) async fn chunk(&self, c: Chunk) -> Result<u64, ErrorBody> {
        let mut rx = self.turn.subscribe();
        // At most SNAPSHOT_CHUNKS_IN_FLIGHT chunks wait here (the leader's
        // bound); one whose transfer is gone fails below.
        let _ = rx.wait_for(|&(t, s)| t != c.transfer || s >= c.seq).await;
        let (file, pos, vote) = {
            let mut cur = self.current.borrow_mut();
            let Some(t) = cur.as_mut().filter(|t| t.id == c.transfer) else {
                return Err(failed(format!("no transfer {} here", c.transfer)));
            };
            if t.seq != c.seq {
                return Err(refuse(format!("chunk {} where {} was due", c.seq, t.seq)));
            }
            let Some(file) = t.file.clone() else {
                return Err(refuse("a chunk for a transfer with nothing to stream".into()));
            };
            (file, t.written, t.vote)
        };
        if let Err(why) = self.check_run(&c.batches, vote) {
            self.end_transfer();
            return Err(refuse(why));
        }
        let len = c.batches.len();
        let n = file.write_at(c.batches.to_vec(), pos).await.map_err(|e| {
            self.end_transfer();
            failed(format!("staging a chunk: {e}"))
        })?;
        if n < len {
            self.end_transfer();
            return Err(failed("staging a chunk: a short write".into()));
        }
        {
            let mut cur = self.current.borrow_mut();
            if let Some(t) = cur.as_mut().filter(|t| t.id == c.transfer) {
                t.written += len as u64;
                t.seq += 1;
            }
        }
        ReplicaStats::add(&self.stats.snapshot_bytes_received, len as u64);
        let _ = self.turn.send((c.transfer, c.seq + 1));
        Ok(c.seq)
    }

    /// Drops the transfer under way (its file goes at the next offer or
    /// open) and wakes its waiting chunks, which then fail.
    fn end_transfer(&self) {
        self.current.borrow_mut().take();
        let _ = self.turn.send((0, 0));
    }

    /// Checks that `b` is whole batches, each CRC-valid, stamped, at the
    /// offset and entry that follow the run so far; advances the run.
    fn check_run(&self, b: &Bytes, vote: Vote) -> Result<(), String> {
        let mut cur = self.current.borrow_mut();
        let t = cur.as_mut().ok_or("the transfer is gone")?;
        let mut at = 0;
        while at < b.len() {
            let h = batch::check(&b[at..]).map_err(|e| format!("a chunk's batch: {e}"))?;
            let r = h.raft.ok_or("a chunk's batch has no raft stamp")?;
            let id = crate::types::log_id(r.term, r.index);
            let follows = match t.at {
                None => true,
                Some((prev, true)) => id.index == prev.index + 1 && id.leader_id.term >= prev.leader_id.term,
                Some((prev, false)) => id == prev,
            };
            if !follows || id.index > t.last.index || id.leader_id.term > vote.leader_id.term {
                return Err(format!("entry {id} does not follow {:?}", t.at));
            }
            if h.base_offset.0 != t.next_offset {
                return Err(format!(
                    "a batch at offset {} where {} was due",
                    h.base_offset, t.next_offset
                ));
            }
            t.next_offset = h.next_offset().0;
            t.first.get_or_insert(id);
            t.at = Some((id, r.entry_end));
            at += h.batch_len as usize;
        }
        Ok(())
    }

    /// Done: the staged run is complete; openraft installs it.
    pub(crate) async fn done(&self, raft: &Raft<EsRaft>, d: Done) -> Result<Vote, ErrorBody> {
        let t = {
            let mut cur = self.current.borrow_mut();
            match cur.take() {
                Some(t) if t.id == d.transfer => t,
                other => {
                    *cur = other;
                    return Err(failed(format!("no transfer {} here", d.transfer)));
                }
            }
        };
        let _ = self.turn.send((0, 0));
        // A whole-log transfer whose leader keeps nothing below the
        // snapshot's end (its retention deleted it all) stages nothing:
        // the log restarts empty at that end.
        let empty_whole = t.whole_from == Some(t.end_offset) && t.first.is_none();
        let whole = (empty_whole || t.at == Some((t.last, true))) && t.next_offset == t.end_offset;
        if !whole {
            return Err(refuse(format!(
                "done after {:?} at offset {}: the snapshot ends at {} (offset {})",
                t.at, t.next_offset, t.last, t.end_offset
            )));
        }
        let (meta, _) = read_descriptor(&d.descriptor).ok_or_else(|| refuse("a bad descriptor".into()))?;
        if meta.last_log_id != Some(t.last) {
            return Err(refuse("the descriptor is not the offer's snapshot".into()));
        }
        if let Some(file) = &t.file {
            file.fdatasync()
                .await
                .map_err(|e| failed(format!("staging: {e}")))?;
            es_storage::sync_dir(&self.incoming())
                .await
                .map_err(|e| failed(e.to_string()))?;
        }
        if let Some(file) = t.file {
            if let Ok(f) = Rc::try_unwrap(file) {
                let _ = f.close().await;
            }
        }
        let start = match (t.whole_from, t.first) {
            (Some(offset), Some(first)) => Some(Start {
                offset,
                index: first.index,
            }),
            (Some(offset), None) if empty_whole => {
                self.store
                    .restart_at(offset, t.last.index + 1)
                    .await
                    .map_err(|e| failed(format!("starting the log again at offset {offset}: {e}")))?;
                None
            }
            (Some(_), None) => return Err(refuse("a whole-log transfer with nothing staged".into())),
            _ => None,
        };
        let staged = StagedSuffix {
            descriptor: d.descriptor.to_vec(),
            after: t.after,
            start,
            staged: (!t.name.is_empty() && !empty_whole).then_some(t.name),
        };
        let resp = raft
            .install_full_snapshot(
                d.vote,
                Snapshot {
                    meta,
                    snapshot: Box::new(EsSnapshot::Staged(staged)),
                },
            )
            .await
            .map_err(|e| failed(format!("install: {e}")))?;
        crate::replica_stats::bump(&self.stats.snapshots_installed);
        if t.whole_from.is_some() {
            crate::replica_stats::bump(&self.stats.whole_log_installs);
        }
        tracing::info!(
            group = d.group,
            last = %t.last,
            end_offset = t.end_offset,
            whole_log = t.whole_from.is_some(),
            bytes = t.written,
            "installed a snapshot"
        );
        Ok(resp.vote)
    }
}
