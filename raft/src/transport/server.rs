//! `RaftServer`: a shard's server side of the raft transport. For each
//! connection a peer opens: the preamble (right magic and version, this
//! cluster, this shard), then TLS when configured (the certificate must
//! name the node the preamble claims), then frames until it closes. Each
//! request runs as its own task (requests are pipelined; answers go back
//! in the order they finish), routed by group id through the shard's
//! [`GroupRegistry`]. A request's frame holds its bytes of the shard's
//! budget from before its payload is read until it is answered. Control
//! frames (not openraft's: the controller's, the broker's) go to the
//! [`ControlHandler`] set on the server; without one they are answered
//! `unsupported`.
//!
//! Refusals are counted ([`TransportStats::refused`]) and logged; nothing a
//! peer sends can do more than close its own connection.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::future::{AbortHandle, Abortable};
use futures::io::{AsyncReadExt, AsyncWriteExt, WriteHalf};
use futures::{FutureExt, StreamExt};
use glommio::net::{TcpListener, TcpStream};
use openraft::error::RaftError;
use openraft::raft::AppendEntriesResponse;

use crate::election_timer::PreVoteStats;
use crate::limits::HANDSHAKE_TIMEOUT;
use crate::runtime::GlommioRuntime;
use crate::transport::budget::InflightBudget;
use crate::transport::codec::{self, ErrorBody, HeartbeatResult};
use crate::transport::config::TransportConfig;
use crate::transport::control::ControlHandler;
use crate::transport::error::{code, TransportError};
use crate::transport::frame::{self, RaftKind};
use crate::transport::preamble::{check_cluster, Preamble, PREAMBLE_BYTES};
use crate::transport::registry::GroupRegistry;
use crate::transport::registry::Receiver;
use crate::transport::snapshot_codec;
use crate::transport::stats::TransportStats;
use crate::transport::stream::{read_frame, PeerStream, ReadError};
use crate::transport::tls::TlsRefusal;
use crate::types::NodeId;

/// Why an accepted connection was not served.
#[derive(Debug)]
pub struct Refused {
    /// The counter's reason: `preamble`, `cluster`, `wrong_shard`, `tls`,
    /// `peer_name`, `timeout`.
    pub reason: &'static str,
    pub detail: String,
}

struct Inner {
    config: TransportConfig,
    shard: u16,
    registry: GroupRegistry,
    control: RefCell<Option<Rc<dyn ControlHandler>>>,
    stats: Rc<TransportStats>,
    budget: InflightBudget,
    /// Tasks to stop at close: the accept loop and each connection.
    tasks: RefCell<HashMap<u64, AbortHandle>>,
    next_task: Cell<u64>,
    closed: Cell<bool>,
}

/// The server side of one shard; clones share it.
#[derive(Clone)]
pub struct RaftServer(Rc<Inner>);

/// Removes a finished task's abort handle.
struct TaskGuard(Rc<Inner>, u64);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.tasks.borrow_mut().remove(&self.1);
    }
}

impl RaftServer {
    /// The server of shard `shard`, answering for the groups of `registry`.
    pub fn new(
        config: TransportConfig,
        shard: u16,
        registry: GroupRegistry,
        stats: Rc<TransportStats>,
        budget: InflightBudget,
    ) -> RaftServer {
        RaftServer(Rc::new(Inner {
            config,
            shard,
            registry,
            control: RefCell::new(None),
            stats,
            budget,
            tasks: RefCell::new(HashMap::new()),
            next_task: Cell::new(0),
            closed: Cell::new(false),
        }))
    }

    /// Sends the control frames this shard receives from now on to
    /// `handler` (the controller on shard 0; the broker's on every shard).
    pub fn set_control_handler(&self, handler: Rc<dyn ControlHandler>) {
        *self.0.control.borrow_mut() = Some(handler);
    }

    /// Runs `fut` as a task that [`close`](Self::close) stops.
    fn spawn(&self, fut: impl std::future::Future<Output = ()> + 'static) {
        if self.0.closed.get() {
            return;
        }
        let id = self.0.next_task.get();
        self.0.next_task.set(id + 1);
        let (abort, reg) = AbortHandle::new_pair();
        self.0.tasks.borrow_mut().insert(id, abort);
        let guard = TaskGuard(self.0.clone(), id);
        glommio::spawn_local(async move {
            let _guard = guard;
            let _ = Abortable::new(fut, reg).await;
        })
        .detach();
    }

    /// Accepts connections on `listener` and serves each, until
    /// [`close`](Self::close). A connection meant for another shard is
    /// refused (`wrong_shard`): a broker with several shards reads the
    /// preamble itself ([`read_preamble`](Self::read_preamble)) and hands
    /// the connection to the owning shard's [`serve`](Self::serve).
    pub fn start(&self, listener: TcpListener) {
        let me = self.clone();
        self.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok(stream) => {
                        let me2 = me.clone();
                        me.spawn(async move {
                            match me2.read_preamble(stream).await {
                                Ok((stream, p)) => me2.serve_now(stream, p).await,
                                Err(r) => me2.refuse(r),
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "raft listener: accept failed");
                        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }

    fn refuse(&self, r: Refused) {
        self.0.stats.refuse(r.reason);
        tracing::warn!(reason = r.reason, detail = %r.detail, "raft connection refused");
    }

    /// Reads and checks the preamble of an accepted connection (sets
    /// TCP_NODELAY: glommio does not). Checks the cluster; the shard is
    /// the caller's to route (`Preamble::dest_shard`).
    pub async fn read_preamble(&self, mut stream: TcpStream) -> Result<(TcpStream, Preamble), Refused> {
        let refused = |reason, detail: String| Refused { reason, detail };
        stream
            .set_nodelay(true)
            .map_err(|e| refused("preamble", format!("TCP_NODELAY: {e}")))?;
        let mut b = [0u8; PREAMBLE_BYTES];
        match GlommioRuntime::within(HANDSHAKE_TIMEOUT, stream.read_exact(&mut b)).await {
            Err(_) => return Err(refused("timeout", "no preamble in time".into())),
            Ok(Err(e)) => return Err(refused("preamble", format!("reading the preamble: {e}"))),
            Ok(Ok(())) => {}
        }
        let p = Preamble::decode(&b).map_err(|e| refused("preamble", e.to_string()))?;
        if let Err(why) = check_cluster(self.0.config.cluster_field(), p.cluster_hash) {
            return Err(refused(
                "cluster",
                format!("node {} belongs to another cluster: {why}", p.source_node),
            ));
        }
        Ok((stream, p))
    }

    /// Serves a connection whose preamble was read, on this shard.
    pub fn serve(&self, stream: TcpStream, preamble: Preamble) {
        let me = self.clone();
        self.spawn(async move { me.serve_now(stream, preamble).await });
    }

    async fn serve_now(&self, stream: TcpStream, p: Preamble) {
        if p.dest_shard != self.0.shard {
            return self.refuse(Refused {
                reason: "wrong_shard",
                detail: format!("meant for shard {}, this is {}", p.dest_shard, self.0.shard),
            });
        }
        if p.source_node == self.0.config.node_id || !self.0.config.peers.contains_key(&p.source_node) {
            return self.refuse(Refused {
                reason: "preamble",
                detail: format!("node {} is not a peer of this node", p.source_node),
            });
        }
        let stream: PeerStream = match &self.0.config.tls {
            None => Box::new(stream),
            Some(tls) => match tls.accept(p.source_node, stream, HANDSHAKE_TIMEOUT).await {
                Ok(s) => Box::new(s),
                Err(TlsRefusal::Timeout) => {
                    return self.refuse(Refused {
                        reason: "timeout",
                        detail: format!("node {}: no TLS handshake in time", p.source_node),
                    })
                }
                Err(TlsRefusal::Handshake(e)) => {
                    return self.refuse(Refused {
                        reason: "tls",
                        detail: format!("node {}: {e}", p.source_node),
                    })
                }
                Err(TlsRefusal::Name(why)) => {
                    return self.refuse(Refused {
                        reason: "peer_name",
                        detail: format!("node {}: {why}", p.source_node),
                    })
                }
            },
        };
        TransportStats::bump(&self.0.stats.accepted);
        tracing::debug!(peer = p.source_node, "raft connection accepted");
        let why = self.frames(stream, p.source_node).await;
        tracing::debug!(peer = p.source_node, why, "raft connection closed");
    }

    /// Reads requests until the connection ends; each runs as a task.
    async fn frames(&self, stream: PeerStream, from: NodeId) -> String {
        let (mut r, w) = stream.split();
        let (tx, rx) = mpsc::unbounded::<Vec<u8>>();
        let writer = write_loop(w, rx, self.0.stats.clone()).fuse();
        let reader = async {
            loop {
                let (h, payload, permit) = match read_frame(&mut r, Some(&self.0.budget)).await {
                    Ok(f) => f,
                    Err(ReadError::Io(e)) => return format!("read: {e}"),
                    Err(ReadError::Frame(e)) => return e.to_string(),
                };
                self.0.stats.received(h.kind as u8);
                if !h.kind.is_request() {
                    return format!("a response ({:?}) on a server connection", h.kind);
                }
                let tx = tx.clone();
                let registry = self.0.registry.clone();
                let stats = self.0.stats.clone();
                let control = self.0.control.borrow().clone();
                glommio::spawn_local(async move {
                    let (kind, body) = if h.kind.is_control() {
                        answer_control(control, from, h.kind, payload).await
                    } else {
                        answer(&registry, &stats, h.kind, payload).await
                    };
                    let _ = tx.unbounded_send(frame::encode(kind, h.request_id, &body));
                    drop(permit);
                })
                .detach();
            }
        }
        .fuse();
        futures::pin_mut!(reader, writer);
        futures::select! {
            why = reader => why,
            why = writer => why,
        }
    }

    /// Stops accepting and closes every connection (the shard stops).
    pub fn close(&self) {
        self.0.closed.set(true);
        let tasks: Vec<AbortHandle> = self.0.tasks.borrow_mut().drain().map(|(_, a)| a).collect();
        for t in tasks {
            t.abort();
        }
    }

    /// The shard's counters.
    pub fn stats(&self) -> &Rc<TransportStats> {
        &self.0.stats
    }
}

async fn write_loop(
    mut w: WriteHalf<PeerStream>,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
    stats: Rc<TransportStats>,
) -> String {
    while let Some(f) = rx.next().await {
        stats.sent(f[4]);
        if let Err(e) = w.write_all(&f).await {
            return format!("write: {e}");
        }
        while let Ok(f) = rx.try_recv() {
            stats.sent(f[4]);
            if let Err(e) = w.write_all(&f).await {
                return format!("write: {e}");
            }
        }
        if let Err(e) = w.flush().await {
            return format!("write: {e}");
        }
    }
    "closed".into()
}

fn error_frame(e: ErrorBody) -> (RaftKind, Vec<u8>) {
    let mut out = Vec::new();
    codec::encode_error(&mut out, &e);
    (RaftKind::Error, out)
}

fn malformed(e: TransportError) -> ErrorBody {
    ErrorBody {
        code: code::MALFORMED.into(),
        message: e.to_string(),
    }
}

fn stopped(group: u64, e: RaftError<u64>) -> ErrorBody {
    ErrorBody {
        code: code::NOT_READY.into(),
        message: format!("group {group}: {e}"),
    }
}

/// Notes that `group` heard from its leader if this replica accepted the
/// leader's append: not refused for a higher vote (a conflict is accepted:
/// the vote is the leader's, only the logs differ).
fn heard_if_accepted(registry: &GroupRegistry, group: u64, resp: &AppendEntriesResponse<NodeId>) {
    if !matches!(resp, AppendEntriesResponse::HigherVote(_)) {
        registry.heard_from_leader(group);
    }
}

/// The answer to one control request: its handler's.
async fn answer_control(
    control: Option<Rc<dyn ControlHandler>>,
    from: NodeId,
    kind: RaftKind,
    payload: Bytes,
) -> (RaftKind, Vec<u8>) {
    let r = match control {
        Some(h) => h.handle(from, kind, payload).await,
        None => Err(ErrorBody {
            code: code::UNSUPPORTED.into(),
            message: format!("{kind:?}: no control handler on this shard"),
        }),
    };
    match r {
        Ok(body) => (kind.response(), body),
        Err(e) => error_frame(e),
    }
}

/// The answer to one request: its kind and payload.
async fn answer(
    registry: &GroupRegistry,
    stats: &TransportStats,
    kind: RaftKind,
    payload: Bytes,
) -> (RaftKind, Vec<u8>) {
    let mut out = Vec::new();
    let r: Result<(), ErrorBody> = async {
        match kind {
            RaftKind::AppendEntries => {
                let (group, rpc) = codec::decode_append(payload).map_err(malformed)?;
                if rpc.entries.is_empty() {
                    TransportStats::bump(&stats.empty_appends_received);
                }
                let raft = registry.get(group)?;
                let resp = raft.append_entries(rpc).await.map_err(|e| stopped(group, e))?;
                heard_if_accepted(registry, group, &resp);
                codec::encode_append_response(&mut out, &resp);
            }
            RaftKind::Vote => {
                let (group, rpc) = codec::decode_vote(payload).map_err(malformed)?;
                let raft = registry.get(group)?;
                let resp = raft.vote(rpc).await.map_err(|e| stopped(group, e))?;
                // Raft's rule: granting a vote restarts the election clock.
                if resp.vote_granted {
                    registry.heard_from_leader(group);
                }
                codec::encode_vote_response(&mut out, &resp);
            }
            RaftKind::Heartbeats => {
                let hbs = codec::decode_heartbeats(payload).map_err(malformed)?;
                let results: Vec<HeartbeatResult> =
                    futures::future::join_all(hbs.into_iter().map(|hb| async move {
                        let raft = registry.get(hb.group)?;
                        let resp = raft
                            .append_entries(hb.request())
                            .await
                            .map_err(|e| stopped(hb.group, e))?;
                        heard_if_accepted(registry, hb.group, &resp);
                        Ok(resp)
                    }))
                    .await;
                codec::encode_heartbeat_results(&mut out, &results);
            }
            RaftKind::SnapshotOffer => {
                let o = snapshot_codec::decode_offer(payload).map_err(malformed)?;
                let group = o.group;
                let r = match registry.receiver(o.group)?.1 {
                    Receiver::Log(rx) => rx.offer(o).await?,
                    Receiver::Image(rx) => rx.offer(o)?,
                };
                // An offer accepted is a leader's at least as new as this
                // replica's vote; its transfer carries no heartbeat.
                if !matches!(r, snapshot_codec::OfferReply::HigherVote(_)) {
                    registry.heard_from_leader(group);
                }
                snapshot_codec::encode_offer_reply(&mut out, &r);
            }
            RaftKind::SnapshotChunk => {
                let c = snapshot_codec::decode_chunk(payload).map_err(malformed)?;
                let group = c.group;
                let seq = match registry.receiver(c.group)?.1 {
                    Receiver::Log(rx) => rx.chunk(c).await?,
                    Receiver::Image(rx) => rx.chunk(c)?,
                };
                registry.heard_from_leader(group);
                snapshot_codec::encode_chunk_reply(&mut out, seq);
            }
            RaftKind::SnapshotDone => {
                let d = snapshot_codec::decode_done(payload).map_err(malformed)?;
                let vote = match registry.receiver(d.group)? {
                    (raft, Receiver::Log(rx)) => rx.done(&raft, d).await?,
                    (raft, Receiver::Image(rx)) => rx.done(&raft, d).await?,
                };
                snapshot_codec::encode_done_reply(&mut out, &vote);
            }
            RaftKind::PreVote => {
                let req = codec::decode_pre_vote(payload).map_err(malformed)?;
                let clock = registry.clock(req.group)?;
                let reply = crate::pre_vote::answer(&clock, &req).await?;
                let stats = registry.elections().stats();
                PreVoteStats::bump(if reply.granted {
                    &stats.granted
                } else {
                    &stats.refused
                });
                codec::encode_pre_vote_reply(&mut out, &reply);
            }
            other => {
                return Err(ErrorBody {
                    code: code::MALFORMED.into(),
                    message: format!("{other:?} is not a request"),
                })
            }
        }
        Ok(())
    }
    .await;
    match r {
        Ok(()) => (kind.response(), out),
        Err(e) => error_frame(e),
    }
}
