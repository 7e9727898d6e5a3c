//! `HeartbeatMux`: a peer's heartbeats (AppendEntries without entries)
//! from all groups, gathered for `--raft-heartbeat-coalesce-us` after the
//! first one and sent as one Heartbeats frame (0x42); the peer answers all
//! in one HeartbeatsOk (0xc2), in order. openraft still runs one heartbeat
//! per group per interval; on the wire a thousand groups cost one frame
//! per peer per flush (Redpanda's `heartbeat_manager` at the wire level).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;
use openraft::raft::AppendEntriesResponse;

use crate::limits::HEARTBEATS_PER_FRAME_MAX;
use crate::transport::codec::{self, ErrorBody, Heartbeat};
use crate::transport::error::TransportError;
use crate::transport::frame::{self, RaftKind};
use crate::transport::peer::Peer;
use crate::types::NodeId;

/// One heartbeat's answer.
pub(crate) type HeartbeatAnswer = Result<AppendEntriesResponse<NodeId>, TransportError>;

type Queued = (Heartbeat, oneshot::Sender<HeartbeatAnswer>);

pub(crate) struct HeartbeatMux {
    coalesce: Duration,
    queue: RefCell<Vec<Queued>>,
    /// A flush is scheduled: later heartbeats join its frame.
    scheduled: Cell<bool>,
}

impl HeartbeatMux {
    pub(crate) fn new(coalesce: Duration) -> HeartbeatMux {
        HeartbeatMux {
            coalesce,
            queue: RefCell::new(Vec::new()),
            scheduled: Cell::new(false),
        }
    }
}

/// Queues `hb` for `peer` and waits for its answer. The heartbeat is
/// queued before this first yields, so heartbeats sent together (one
/// poll) always share a frame.
pub(crate) async fn send(peer: &Rc<Peer>, hb: Heartbeat) -> HeartbeatAnswer {
    let (tx, rx) = oneshot::channel();
    peer.mux.queue.borrow_mut().push((hb, tx));
    if !peer.mux.scheduled.replace(true) {
        let peer = peer.clone();
        glommio::spawn_local(async move {
            glommio::timer::sleep(peer.mux.coalesce).await;
            peer.mux.scheduled.set(false);
            let queued = std::mem::take(&mut *peer.mux.queue.borrow_mut());
            let mut rest = queued.into_iter().peekable();
            let mut sends = Vec::new();
            while rest.peek().is_some() {
                let chunk: Vec<Queued> = rest.by_ref().take(HEARTBEATS_PER_FRAME_MAX).collect();
                sends.push(flush(&peer, chunk));
            }
            futures::future::join_all(sends).await;
        })
        .detach();
    }
    rx.await.unwrap_or_else(|_| {
        Err(TransportError::Unreachable {
            node: peer.node,
            why: "the heartbeat was dropped".into(),
        })
    })
}

/// Sends one Heartbeats frame and hands each answer to its waiter.
async fn flush(peer: &Peer, chunk: Vec<Queued>) {
    let hbs: Vec<Heartbeat> = chunk.iter().map(|(h, _)| *h).collect();
    let mut out = frame::header(RaftKind::Heartbeats, 0, 0).to_vec();
    codec::encode_heartbeats(&mut out, &hbs);
    let payload_len = out.len() - es_protocol::frame::HEADER_BYTES;
    out[..es_protocol::frame::HEADER_BYTES].copy_from_slice(&frame::header(
        RaftKind::Heartbeats,
        0,
        payload_len,
    ));
    // Counted with the frame, before its answer: a reader of both
    // counters never sees more Heartbeats frames than heartbeats.
    peer.stats
        .heartbeats_sent
        .set(peer.stats.heartbeats_sent.get() + hbs.len() as u64);
    let answers: Result<Vec<HeartbeatAnswer>, TransportError> = async {
        let (kind, payload) = peer.call(out).await?;
        match kind {
            RaftKind::HeartbeatsOk => {
                let results = codec::decode_heartbeat_results(payload)?;
                if results.len() != hbs.len() {
                    return Err(TransportError::Malformed(format!(
                        "{} answers to {} heartbeats",
                        results.len(),
                        hbs.len()
                    )));
                }
                Ok(results
                    .into_iter()
                    .map(|r| {
                        r.map_err(|ErrorBody { code, message }| TransportError::Remote {
                            node: peer.node,
                            code,
                            message,
                        })
                    })
                    .collect())
            }
            RaftKind::Error => {
                let ErrorBody { code, message } = codec::decode_error(payload)?;
                Err(TransportError::Remote {
                    node: peer.node,
                    code,
                    message,
                })
            }
            other => Err(TransportError::Malformed(format!("{other:?} answers Heartbeats"))),
        }
    }
    .await;
    match answers {
        Ok(answers) => {
            for ((_, tx), a) in chunk.into_iter().zip(answers) {
                let _ = tx.send(a);
            }
        }
        Err(e) => {
            for (_, tx) in chunk {
                let _ = tx.send(Err(e.clone()));
            }
        }
    }
}
