//! `SnapshotSource`: a leader's side of a snapshot transfer
//! (`RaftNetwork::full_snapshot`; docs/design/raft-snapshots.md). It
//! offers the snapshot; the follower answers the last entry it keeps; the
//! leader streams the entries after it up to the snapshot's last, read
//! from its own log (`PartitionLog::read_entry_run`: the stored batches,
//! control batches included, from the page cache) in chunks of
//! `chunk_bytes`, at most `SNAPSHOT_CHUNKS_IN_FLIGHT` unanswered,
//! throttled to `bytes_per_sec`; then says done, and the follower
//! installs. The entries read may lie below the leader's purge point: a
//! read hold (`PartitionLog::hold_from`) keeps retention off them while
//! the transfer lives, so a late follower is never starved by a retention
//! faster than its transfer.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_storage::Offset;
use futures::stream::{FuturesOrdered, StreamExt};
use openraft::storage::Snapshot;

use crate::limits::{SNAPSHOT_CHUNKS_IN_FLIGHT, SNAPSHOT_CHUNK_LIMIT_BYTES, SNAPSHOT_DESCRIPTOR_BYTES_MAX};
use crate::log_store::LogStore;
use crate::partition_sm::read_descriptor;
use crate::replica_stats::{bump, ReplicaStats};
use crate::transport::error::TransportError;
use crate::transport::frame::RaftKind;
use crate::transport::link::GroupLink;
use crate::transport::snapshot_codec::{
    decode_chunk_reply, decode_done_reply, decode_offer_reply, encode_chunk, encode_done, encode_offer,
    Chunk, Done, Offer, OfferReply,
};
use crate::types::{EsRaft, LogId, Vote};

/// What a leader streams snapshots from, and how fast.
pub struct SnapshotSource {
    /// The log a partition's snapshot streams from (the controller's: where
    /// its image's entries end).
    store: LogStore,
    /// The snapshot is an image (the controller's), streamed whole in
    /// chunks (`snapshot_image.rs`).
    image: bool,
    chunk_bytes: usize,
    bytes_per_sec: u64,
    stats: Rc<ReplicaStats>,
}

/// Sends a frame of `kind` that `encode` writes over `link`; the answer,
/// as `decode` reads it.
async fn call<T>(
    link: &GroupLink,
    kind: RaftKind,
    encode: impl FnOnce(&mut Vec<u8>),
    decode: impl FnOnce(Bytes) -> Result<T, TransportError>,
) -> Result<T, TransportError> {
    let (_, p) = link
        .call(kind, |out| {
            encode(out);
            Ok(())
        })
        .await?;
    decode(p)
}

/// Offers a snapshot over `link`: the follower's answer.
pub(crate) async fn call_offer(link: &GroupLink, offer: &Offer) -> Result<OfferReply, TransportError> {
    call(
        link,
        RaftKind::SnapshotOffer,
        |o| encode_offer(o, offer),
        decode_offer_reply,
    )
    .await
}

/// Sends one chunk over `link`: the seq the follower took.
pub(crate) async fn call_chunk(link: &GroupLink, chunk: &Chunk) -> Result<u64, TransportError> {
    call(
        link,
        RaftKind::SnapshotChunk,
        |o| encode_chunk(o, chunk),
        decode_chunk_reply,
    )
    .await
}

/// Says a transfer is done over `link`: the follower's vote after it
/// installed (or refused: a higher vote).
pub(crate) async fn call_done(link: &GroupLink, done: &Done) -> Result<Vote, TransportError> {
    call(
        link,
        RaftKind::SnapshotDone,
        |o| encode_done(o, done),
        decode_done_reply,
    )
    .await
}

/// Waits until `sent` bytes since `started` are within `bytes_per_sec`
/// (0: unlimited): a transfer's throttle.
pub(crate) async fn pace(started: Instant, sent: u64, bytes_per_sec: u64) {
    if bytes_per_sec > 0 {
        let due = Duration::from_secs_f64(sent as f64 / bytes_per_sec as f64);
        let elapsed = started.elapsed();
        if due > elapsed {
            glommio::timer::sleep(due - elapsed).await;
        }
    }
}

fn storage(e: es_storage::StorageError) -> TransportError {
    TransportError::Unreachable {
        node: 0,
        why: format!("reading the log for a snapshot: {e}"),
    }
}

impl SnapshotSource {
    /// Streams from `store`'s log in chunks of `chunk_bytes`, at most
    /// `bytes_per_sec` per transfer (0: unlimited).
    pub(crate) fn new(
        store: LogStore,
        chunk_bytes: usize,
        bytes_per_sec: u64,
        stats: Rc<ReplicaStats>,
    ) -> SnapshotSource {
        SnapshotSource {
            store,
            image: false,
            chunk_bytes: chunk_bytes.max(1),
            bytes_per_sec,
            stats,
        }
    }

    /// Streams snapshot images (the controller's, whose log is `store`) in
    /// chunks of `chunk_bytes`, at most `bytes_per_sec` (0: unlimited).
    pub(crate) fn for_images(
        store: LogStore,
        chunk_bytes: usize,
        bytes_per_sec: u64,
        stats: Rc<ReplicaStats>,
    ) -> SnapshotSource {
        SnapshotSource {
            image: true,
            ..SnapshotSource::new(store, chunk_bytes, bytes_per_sec, stats)
        }
    }

    pub(crate) fn store(&self) -> &LogStore {
        &self.store
    }

    pub(crate) fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    pub(crate) fn bytes_per_sec(&self) -> u64 {
        self.bytes_per_sec
    }

    pub(crate) fn stats(&self) -> &Rc<ReplicaStats> {
        &self.stats
    }

    /// Sends `snapshot` over `link`; the follower's vote after it installed
    /// (or refused: a higher vote).
    pub(crate) async fn send(
        &self,
        link: &GroupLink,
        vote: Vote,
        snapshot: &Snapshot<EsRaft>,
    ) -> Result<Vote, TransportError> {
        if self.image {
            return crate::snapshot_image::send(self, link, vote, snapshot).await;
        }
        let store = &self.store;
        let image = snapshot.snapshot.image();
        if image.len() > SNAPSHOT_DESCRIPTOR_BYTES_MAX {
            return Err(TransportError::Malformed(format!(
                "a snapshot descriptor of {} bytes",
                image.len()
            )));
        }
        let (meta, end_offset) = read_descriptor(image)
            .ok_or_else(|| TransportError::Malformed("the snapshot's descriptor does not parse".into()))?;
        let Some(last) = meta.last_log_id else {
            return Err(TransportError::Malformed(
                "a snapshot without a last entry".into(),
            ));
        };
        let group = link.group();
        let transfer: u64 = rand::random();
        // Retention keeps off what this transfer may read until it ends: a
        // transfer cut short by a deleted segment would start over, and
        // with retention faster than the stream, never finish.
        let log = store.log();
        let log_start = log.hot_start_offset();
        let _hold = log.hold_from(log_start);
        let offer = Offer {
            group,
            transfer,
            vote,
            last: Some(last),
            end_offset,
            log_start: log_start.0,
        };
        match call_offer(link, &offer).await? {
            OfferReply::HigherVote(v) => return Ok(v),
            OfferReply::Nothing => {}
            OfferReply::Stream { after, from_offset } => {
                self.stream(store, link, transfer, after, from_offset, last)
                    .await?;
            }
        }
        let done = Done {
            group,
            transfer,
            vote,
            descriptor: Bytes::copy_from_slice(image),
        };
        let v = call_done(link, &done).await?;
        bump(&self.stats.snapshots_sent);
        tracing::info!(group, target = link.target(), snapshot = %last, "snapshot sent");
        Ok(v)
    }

    /// Streams the entries after `after` through `last`, from `from_offset`.
    async fn stream(
        &self,
        store: &LogStore,
        link: &GroupLink,
        transfer: u64,
        after: Option<LogId>,
        from_offset: u64,
        last: LogId,
    ) -> Result<(), TransportError> {
        let log = store.log();
        let first = after.map_or(0, |a| a.index + 1);
        let mut cursor = Some(log.entry_cursor(Offset(from_offset)).await.map_err(storage)?);
        let mut in_flight = FuturesOrdered::new();
        let started = Instant::now();
        let mut sent = 0u64;
        let mut seq = 0u64;
        loop {
            while in_flight.len() < SNAPSHOT_CHUNKS_IN_FLIGHT {
                let Some(at) = cursor else { break };
                let run = log
                    .read_entry_run(
                        at,
                        first,
                        last.index,
                        self.chunk_bytes,
                        SNAPSHOT_CHUNK_LIMIT_BYTES,
                    )
                    .await
                    .map_err(storage)?;
                cursor = run.next;
                if run.batches.is_empty() {
                    continue;
                }
                let mut buf = Vec::with_capacity(run.batches.iter().map(|b| b.bytes.len()).sum());
                for b in &run.batches {
                    buf.extend_from_slice(&b.bytes);
                }
                sent += buf.len() as u64;
                pace(started, sent, self.bytes_per_sec).await;
                ReplicaStats::add(&self.stats.snapshot_bytes_sent, buf.len() as u64);
                let chunk = Chunk {
                    group: link.group(),
                    transfer,
                    seq,
                    batches: Bytes::from(buf),
                };
                seq += 1;
                in_flight.push_back(async move { call_chunk(link, &chunk).await });
            }
            match in_flight.next().await {
                None => return Ok(()),
                Some(r) => {
                    r?;
                }
            }
        }
    }
}

impl std::fmt::Debug for SnapshotSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotSource")
            .field("chunk_bytes", &self.chunk_bytes)
            .field("bytes_per_sec", &self.bytes_per_sec)
            .finish()
    }
}
