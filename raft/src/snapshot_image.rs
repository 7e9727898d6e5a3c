//! Snapshot transfer of an image: the controller group's snapshot (its
//! state as JSON, `controller/machine.rs`), which unlike a partition's is
//! not the log itself, and may outgrow a frame. Same frames as a
//! partition's transfer (`transport/snapshot_codec.rs`):
//!
//! 1. **Offer** (0x43): the snapshot's last log id, `end_offset` = the
//!    image's length in bytes (at most `CONTROLLER_SNAPSHOT_BYTES_MAX`),
//!    `log_start` = the offset after the snapshot's last entry in the
//!    leader's log; the follower answers "stream from 0" (or a higher
//!    vote).
//! 2. **Chunks** (0x44): the image's bytes in order, `--raft-snapshot-
//!    chunk-bytes` each, one unanswered at a time (an image is small next
//!    to a log), throttled to `--raft-recovery-bytes-per-sec`; the
//!    follower gathers them in memory.
//! 3. **Done** (0x45): a descriptor `{"bytes", "crc32"}` of the whole
//!    image; the follower checks both. Unless its log holds the snapshot's
//!    last entry, it first starts its log again, empty, at `log_start` and
//!    the entry after it (`LogStore::restart_at`): the log is a partition
//!    log whose offsets must be the leader's for the entries that follow.
//!    Then it installs the image through `Raft::install_full_snapshot`,
//!    which replaces the state machine's state at once
//!    (`ControllerSm::install_snapshot`: the image saved durably, then
//!    swapped in and published). A crash between the two leaves an empty
//!    log and the old snapshot: the node is behind the leader's purge
//!    point again and gets the image again.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use openraft::storage::Snapshot;
use openraft::Raft;
use serde_json::{json, Value};

use crate::controller::read_image_meta;
use crate::limits::CONTROLLER_SNAPSHOT_BYTES_MAX;
use crate::log_store::LogStore;
use crate::meta::RaftMeta;
use crate::replica_stats::{bump, ReplicaStats};
use crate::snapshot::EsSnapshot;
use crate::snapshot_recv::{failed, refuse};
use crate::snapshot_send::{call_chunk, call_done, call_offer, pace, SnapshotSource};
use crate::transport::codec::ErrorBody;
use crate::transport::error::TransportError;
use crate::transport::link::GroupLink;
use crate::transport::snapshot_codec::{Chunk, Done, Offer, OfferReply};
use crate::types::{EsRaft, LogId, Vote};

fn descriptor(image: &[u8]) -> Vec<u8> {
    json!({"bytes": image.len(), "crc32": crc32fast::hash(image)})
        .to_string()
        .into_bytes()
}

/// The leader's side: sends `snapshot`'s image over `link`; the
/// follower's vote after it installed (or refused: a higher vote).
pub(crate) async fn send(
    source: &SnapshotSource,
    link: &GroupLink,
    vote: Vote,
    snapshot: &Snapshot<EsRaft>,
) -> Result<Vote, TransportError> {
    let image = snapshot.snapshot.image();
    let Some(last) = snapshot.meta.last_log_id else {
        return Err(TransportError::Malformed(
            "a snapshot without a last entry".into(),
        ));
    };
    if image.len() > CONTROLLER_SNAPSHOT_BYTES_MAX {
        return Err(TransportError::Malformed(format!(
            "a snapshot image of {} bytes: at most {CONTROLLER_SNAPSHOT_BYTES_MAX}",
            image.len()
        )));
    }
    let store = source.store();
    let start = store
        .offset_after(last.index)
        .filter(|_| store.holds(last))
        .ok_or_else(|| TransportError::Unreachable {
            node: link.target(),
            why: format!("the controller log no longer holds the snapshot's last entry {last}"),
        })?;
    let group = link.group();
    let transfer: u64 = rand::random();
    let offer = Offer {
        group,
        transfer,
        vote,
        last: Some(last),
        end_offset: image.len() as u64,
        log_start: start,
    };
    match call_offer(link, &offer).await? {
        OfferReply::HigherVote(v) => return Ok(v),
        OfferReply::Nothing => {}
        OfferReply::Stream { .. } => {
            let started = Instant::now();
            let mut sent = 0u64;
            for (seq, part) in image.chunks(source.chunk_bytes()).enumerate() {
                sent += part.len() as u64;
                pace(started, sent, source.bytes_per_sec()).await;
                let chunk = Chunk {
                    group,
                    transfer,
                    seq: seq as u64,
                    batches: Bytes::copy_from_slice(part),
                };
                call_chunk(link, &chunk).await?;
                crate::replica_stats::ReplicaStats::add(
                    &source.stats().snapshot_bytes_sent,
                    part.len() as u64,
                );
            }
        }
    }
    let done = Done {
        group,
        transfer,
        vote,
        descriptor: Bytes::from(descriptor(image)),
    };
    let v = call_done(link, &done).await?;
    bump(&source.stats().snapshots_sent);
    tracing::info!(group, target = link.target(), snapshot = %last, bytes = image.len(), "controller snapshot sent");
    Ok(v)
}

/// One image being received.
struct Transfer {
    id: u64,
    last: LogId,
    /// The offset after the last entry in the leader's log.
    start: u64,
    len: usize,
    seq: u64,
    buf: Vec<u8>,
}

/// A follower's side of image transfers (the controller group's); the
/// transport's registry holds it.
pub struct ImageReceiver {
    store: LogStore,
    meta: Rc<RaftMeta>,
    stats: Rc<ReplicaStats>,
    current: RefCell<Option<Transfer>>,
}

impl ImageReceiver {
    /// Receives images for the group whose log is `store`.
    pub(crate) fn new(store: LogStore, stats: Rc<ReplicaStats>) -> ImageReceiver {
        ImageReceiver {
            meta: store.meta(),
            store,
            stats,
            current: RefCell::new(None),
        }
    }

    /// A leader's offer: a new transfer replaces any before it.
    pub(crate) fn offer(&self, o: Offer) -> Result<OfferReply, ErrorBody> {
        if let Some(mine) = self.meta.vote().filter(|v| *v > o.vote) {
            return Ok(OfferReply::HigherVote(mine));
        }
        let Some(last) = o.last else {
            return Err(refuse("a snapshot offer without a last entry".into()));
        };
        let len = usize::try_from(o.end_offset)
            .ok()
            .filter(|&n| n <= CONTROLLER_SNAPSHOT_BYTES_MAX)
            .ok_or_else(|| refuse(format!("a snapshot image of {} bytes", o.end_offset)))?;
        *self.current.borrow_mut() = Some(Transfer {
            id: o.transfer,
            last,
            start: o.log_start,
            len,
            seq: 0,
            buf: Vec::new(),
        });
        Ok(OfferReply::Stream {
            after: None,
            from_offset: 0,
        })
    }

    /// A chunk: the image's next bytes.
    pub(crate) fn chunk(&self, c: Chunk) -> Result<u64, ErrorBody> {
        let mut cur = self.current.borrow_mut();
        let Some(t) = cur.as_mut().filter(|t| t.id == c.transfer) else {
            return Err(failed(format!("no transfer {} here", c.transfer)));
        };
        if t.seq != c.seq {
            let e = refuse(format!("chunk {} where {} was due", c.seq, t.seq));
            *cur = None;
            return Err(e);
        }
        if t.buf.len() + c.batches.len() > t.len {
            *cur = None;
            return Err(refuse("the chunks run past the image's length".into()));
        }
        t.buf.extend_from_slice(&c.batches);
        t.seq += 1;
        ReplicaStats::add(&self.stats.snapshot_bytes_received, c.batches.len() as u64);
        Ok(c.seq)
    }

    /// Done: the image is whole and checked; openraft installs it.
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
        let want: Value =
            serde_json::from_slice(&d.descriptor).map_err(|_| refuse("a bad image descriptor".into()))?;
        let whole = want["bytes"].as_u64() == Some(t.len as u64)
            && t.buf.len() == t.len
            && want["crc32"].as_u64() == Some(crc32fast::hash(&t.buf) as u64);
        if !whole {
            return Err(refuse(format!(
                "the image received ({} bytes) is not the one described ({want})",
                t.buf.len()
            )));
        }
        let meta = read_image_meta(&t.buf).ok_or_else(|| refuse("the image does not parse".into()))?;
        if meta.last_log_id != Some(t.last) {
            return Err(refuse("the image is not the offer's snapshot".into()));
        }
        if !self.store.holds(t.last) {
            self.store
                .restart_at(t.start, t.last.index + 1)
                .await
                .map_err(|e| failed(format!("starting the log again at offset {}: {e}", t.start)))?;
        }
        let resp = raft
            .install_full_snapshot(
                d.vote,
                Snapshot {
                    meta,
                    snapshot: Box::new(EsSnapshot::Image(t.buf)),
                },
            )
            .await
            .map_err(|e| failed(format!("install: {e}")))?;
        bump(&self.stats.snapshots_installed);
        Ok(resp.vote)
    }
}
