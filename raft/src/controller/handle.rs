//! `Controller`: the controller group (raft0) as a node's shard 0 runs it:
//! its Raft instance over the controller log, its state machine, and the
//! two things every node may ask of it, wherever the leader is:
//!
//! - [`propose`](Controller::propose): on the leader, `client_write`; on a
//!   follower, forwarded to the leader (frame 0x48) and its result
//!   returned. With no leader known, it waits for one (bounded).
//! - [`read_barrier`](Controller::read_barrier): the leader's committed
//!   index (0x49; the leader confirms its leadership with a quorum first),
//!   then a wait until this node has applied up to it (bounded): what a
//!   node does before it answers "no such topic".
//!
//! The first leader of a new cluster proposes `ClusterInit` (the uuid of
//! `proposed_uuid`, or a random one); the first committed stays.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::path::Path;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{AbortHandle, Abortable};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{Raft, ServerState};
use serde_json::Value;
use tokio::sync::watch;

use crate::controller::command::{decode_outcome, refusal, ControllerCommand, Refusal};
use crate::controller::config::ControllerConfig;
use crate::controller::error::ControllerError;
use crate::controller::machine::{AppliedState, ControllerSm};
use crate::controller::state::ClusterState;
use crate::controller::store::ControllerStore;
use crate::entry::{Applied, Proposal};
use crate::limits::{
    CONTROLLER_FORWARD_MARGIN_MS, ENTRY_BODY_BYTES_MAX, RECOVERY_BYTES_PER_SEC_DEFAULT,
    SNAPSHOT_CHUNK_BYTES_DEFAULT,
};
use crate::log_store::LogStore;
use crate::replica_stats::ReplicaStats;
use crate::runtime::GlommioRuntime;
use crate::snapshot_image::ImageReceiver;
use crate::snapshot_send::SnapshotSource;
use crate::transport::codec::{self, ProposeReply, ReadIndexReply};
use crate::transport::frame::RaftKind;
use crate::transport::registry::Receiver;
use crate::transport::{GroupRegistry, ShardNetwork, TransportError};
use crate::types::{EsRaft, NodeId, CONTROLLER_GROUP};

/// Longest pause between two looks at the leader while waiting for one:
/// a wake from openraft's metrics usually comes first.
const RECHECK: Duration = Duration::from_millis(100);

pub(super) struct Inner {
    pub(super) node_id: NodeId,
    /// The openraft instance now: another after the group stopped on a
    /// storage error and started again (`restart.rs`).
    pub(super) raft: RefCell<Raft<EsRaft>>,
    pub(super) sm: ControllerSm,
    pub(super) store: ControllerStore,
    /// Snapshot transfer counters (`snapshots_sent`, `snapshots_installed`,
    /// bytes each way).
    pub(super) stats: Rc<ReplicaStats>,
    pub(super) network: ShardNetwork,
    pub(super) registry: GroupRegistry,
    pub(super) config: ControllerConfig,
    pub(super) stopped: Cell<bool>,
    bootstrap: RefCell<Option<AbortHandle>>,
}

/// The controller group on this node; clones share it. Lives on one
/// glommio executor (shard 0).
#[derive(Clone)]
pub struct Controller(pub(super) Rc<Inner>);

/// A forwarded request's end: an answer, or a reason to try again (the
/// request was not proposed).
enum Forwarded<T> {
    Done(T),
    Retry(ControllerError),
}

/// A random (version 4) uuid.
pub fn new_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Starts an openraft instance of the controller group over `store` and
/// `sm` (at open, and again after a storage error: `restart.rs`), with
/// the receiver its snapshot transfers go to.
pub(super) async fn start_raft(
    node_id: NodeId,
    raft_config: openraft::Config,
    network: &ShardNetwork,
    store: &ControllerStore,
    sm: &ControllerSm,
    stats: &Rc<ReplicaStats>,
) -> Result<(Raft<EsRaft>, Rc<ImageReceiver>), String> {
    let log = store.log_store().clone();
    let receiver = Rc::new(ImageReceiver::new(log.clone(), stats.clone()));
    let source = SnapshotSource::for_images(
        log,
        SNAPSHOT_CHUNK_BYTES_DEFAULT,
        RECOVERY_BYTES_PER_SEC_DEFAULT,
        stats.clone(),
    );
    let raft = Raft::new(
        node_id,
        Arc::new(raft_config),
        network.group_with_snapshots(CONTROLLER_GROUP, Rc::new(source)),
        store.clone(),
        sm.clone(),
    )
    .await
    .map_err(|e| format!("controller group: {e}"))?;
    Ok((raft, receiver))
}

impl Controller {
    /// Opens the controller group of node `node_id`: its log (a version 2
    /// partition log in `dir/log`) and metadata (`dir`: vote, committed,
    /// snapshot), its Raft instance on `network`, registered in `registry`
    /// as group 0. A node whose controller was never initialized
    /// initializes it with `voters` (every node does so with the same set:
    /// safe, openraft's cluster formation). The caller routes the control
    /// frames to it: `server.set_control_handler(controller.control_handler())`
    /// (or through a `ControlRouter` with its own kinds).
    pub async fn open(
        node_id: NodeId,
        dir: &Path,
        voters: BTreeSet<NodeId>,
        network: &ShardNetwork,
        registry: &GroupRegistry,
        config: ControllerConfig,
    ) -> Result<Controller, String> {
        registry.opening(CONTROLLER_GROUP);
        let opened = Self::open_group(node_id, dir, voters, network, registry, config).await;
        if opened.is_err() {
            registry.remove(CONTROLLER_GROUP);
        }
        opened
    }

    async fn open_group(
        node_id: NodeId,
        dir: &Path,
        voters: BTreeSet<NodeId>,
        network: &ShardNetwork,
        registry: &GroupRegistry,
        config: ControllerConfig,
    ) -> Result<Controller, String> {
        let log_dir = dir.join("log");
        es_storage::create_dir_all(&log_dir)
            .await
            .map_err(|e| format!("{}: {e}", log_dir.display()))?;
        let raft_config = config
            .raft_config()
            .map_err(|e| format!("controller config: {e}"))?;
        let log = LogStore::open(
            &log_dir,
            dir,
            config.log_config(),
            es_storage::FsyncBatcher::new(),
        )
        .await
        .map_err(|e| format!("controller log {}: {e}", dir.display()))?;
        let sm = ControllerSm::new(log.meta()).map_err(|e| format!("controller state: {e}"))?;
        let stats = Rc::new(ReplicaStats::default());
        let store = ControllerStore::new(log);
        let (raft, receiver) = start_raft(node_id, raft_config, network, &store, &sm, &stats).await?;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| format!("controller group: {e}"))?;
        if !initialized {
            match raft.initialize(voters.clone()).await {
                Ok(()) => tracing::info!(?voters, "controller group initialized"),
                // Another node's initialization reached this one first.
                Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(format!("initializing the controller group: {e}")),
            }
        }
        registry.insert_with_receiver(CONTROLLER_GROUP, raft.clone(), Receiver::Image(receiver));
        registry.elect_by_pre_vote(
            CONTROLLER_GROUP,
            raft.clone(),
            crate::election_timer::last_log_of(store.clone()),
            network.clone(),
        );
        let c = Controller(Rc::new(Inner {
            node_id,
            raft: RefCell::new(raft),
            sm,
            store,
            stats,
            network: network.clone(),
            registry: registry.clone(),
            config,
            stopped: Cell::new(false),
            bootstrap: RefCell::new(None),
        }));
        c.start_bootstrap();
        super::restart::supervise(&c);
        Ok(c)
    }

    /// The group's snapshot transfer counters.
    pub fn snapshot_stats(&self) -> Rc<ReplicaStats> {
        self.0.stats.clone()
    }

    /// The group's openraft metrics (snapshot, purged, applied), as a watch.
    pub fn metrics(&self) -> crate::group::MetricsWatch {
        self.raft().metrics()
    }

    /// The state as of the last applied entry.
    pub fn state(&self) -> Rc<ClusterState> {
        self.0.sm.state()
    }

    /// `(applied index, state)`, updated after every applied run of
    /// entries: `changed().await` wakes on each (the broker's reconciler
    /// waits on it).
    pub fn applied(&self) -> watch::Receiver<AppliedState> {
        self.0.sm.subscribe()
    }

    /// The index of the last applied entry (0 before any).
    pub fn applied_index(&self) -> u64 {
        self.0.sm.last_applied().map_or(0, |l| l.index)
    }

    /// The leader this node knows of: itself, or one it heard from within
    /// the longest election timeout.
    pub fn leader(&self) -> Option<NodeId> {
        let leader = self.raft().metrics().borrow().current_leader;
        if leader != Some(self.0.node_id) && self.0.registry.elections().leader_lost(CONTROLLER_GROUP) {
            return None;
        }
        leader
    }

    /// This node's current term of the controller group.
    pub fn term(&self) -> u64 {
        self.raft().metrics().borrow().current_term
    }

    /// Whether this node leads the controller group now.
    pub fn is_leader(&self) -> bool {
        let m = self.raft().metrics().borrow().clone();
        m.state == ServerState::Leader && m.current_leader == Some(self.0.node_id)
    }

    /// The group's Raft handle now (another after the group started
    /// again on a storage error: `restart.rs`).
    pub fn raft(&self) -> Raft<EsRaft> {
        self.0.raft.borrow().clone()
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.0.stopped.get()
    }

    /// The node's id.
    pub fn node_id(&self) -> NodeId {
        self.0.node_id
    }

    /// Stops the group: no more requests, the Raft instance shut down, its
    /// log and metadata closed. The transport is the caller's.
    pub async fn shutdown(&self) {
        if self.0.stopped.replace(true) {
            return;
        }
        if let Some(a) = self.0.bootstrap.borrow_mut().take() {
            a.abort();
        }
        self.0.registry.remove(CONTROLLER_GROUP);
        if let Err(e) = self.raft().shutdown().await {
            tracing::warn!(error = %e, "controller group: shutdown");
        }
        if let Err(e) = self.0.store.log_store().close().await {
            tracing::warn!(error = %e, "controller log: close");
        }
    }

    pub(super) fn check_running(&self) -> Result<(), ControllerError> {
        if self.0.stopped.get() {
            return Err(ControllerError::Fatal("the controller is shut down".into()));
        }
        Ok(())
    }

    /// Waits until `until`, or until openraft's metrics change (a leader
    /// elected, an entry committed), whichever is first (at most
    /// [`RECHECK`]).
    async fn wait_change(&self, until: Instant) {
        let mut rx = self.raft().metrics();
        // A clone of openraft's receiver has not seen the latest value:
        // without this, `changed` would be ready at once, every time.
        rx.borrow_and_update();
        let wait = until.saturating_duration_since(Instant::now()).min(RECHECK);
        let _ = GlommioRuntime::within(wait, rx.changed()).await;
    }

    /// Proposes `cmd` and returns its outcome once applied: the result, or
    /// the refusal every node gave. Sent to the leader wherever it is;
    /// waits (bounded) for a leader when none is known.
    pub async fn propose(&self, cmd: ControllerCommand) -> Result<Result<Value, Refusal>, ControllerError> {
        let bytes = cmd.encode();
        if bytes.len() > ENTRY_BODY_BYTES_MAX {
            return Ok(Err(Refusal::new(
                refusal::INVALID_REQUEST,
                format!(
                    "a controller command of {} bytes (at most {ENTRY_BODY_BYTES_MAX})",
                    bytes.len()
                ),
            )));
        }
        let deadline = Instant::now() + self.0.config.leader_wait();
        loop {
            self.check_running()?;
            let why = match self.leader() {
                Some(l) if l == self.0.node_id && self.is_leader() => return self.propose_local(bytes).await,
                Some(l) if l != self.0.node_id => match self.forward_propose(l, &bytes).await {
                    Forwarded::Done(r) => return r,
                    Forwarded::Retry(why) => why,
                },
                _ => ControllerError::Unavailable("no controller leader".into()),
            };
            if Instant::now() >= deadline {
                return Err(why);
            }
            self.wait_change(deadline).await;
        }
    }

    /// Proposes on this node, the leader: `client_write`, bounded.
    pub(super) async fn propose_local(
        &self,
        bytes: Vec<u8>,
    ) -> Result<Result<Value, Refusal>, ControllerError> {
        let bound = self.0.config.propose_timeout;
        let raft = self.raft();
        let write = raft.client_write(Proposal::Command(bytes.into()));
        match GlommioRuntime::within(bound, write).await {
            Err(_) => Err(ControllerError::OutcomeUnknown(format!(
                "not committed within {bound:?}"
            ))),
            Ok(Ok(resp)) => match resp.data {
                Applied::Command(b) => decode_outcome(&b)
                    .ok_or_else(|| ControllerError::Fatal("the state machine gave no outcome".into())),
                other => Err(ControllerError::Fatal(format!(
                    "the state machine answered a command with {other:?}"
                ))),
            },
            // Not definite: openraft answers so both before proposing and
            // for an entry a new leader's log cut (which may still be
            // committed by another leader that holds it).
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => Err(
                ControllerError::OutcomeUnknown(format!("leadership lost (leader now {:?})", f.leader_id)),
            ),
            Ok(Err(RaftError::APIError(e))) => Err(ControllerError::Fatal(e.to_string())),
            Ok(Err(RaftError::Fatal(f))) => Err(ControllerError::OutcomeUnknown(format!(
                "the controller stopped: {f}"
            ))),
        }
    }

    async fn forward_propose(
        &self,
        leader: NodeId,
        bytes: &[u8],
    ) -> Forwarded<Result<Result<Value, Refusal>, ControllerError>> {
        let mut payload = Vec::with_capacity(4 + bytes.len());
        codec::encode_propose(&mut payload, bytes);
        let bound = self.0.config.propose_timeout + Duration::from_millis(CONTROLLER_FORWARD_MARGIN_MS);
        let call = self
            .0
            .network
            .control_call(leader, RaftKind::ControllerPropose, &payload);
        let unknown = |why: String| Forwarded::Done(Err(ControllerError::OutcomeUnknown(why)));
        match GlommioRuntime::within(bound, call).await {
            Err(_) => unknown(format!("no answer from node {leader} within {bound:?}")),
            Ok(Err(e)) => match not_sent(e) {
                Ok(why) => Forwarded::Retry(why),
                Err(e) => Forwarded::Done(Err(e)),
            },
            Ok(Ok(body)) => match codec::decode_propose_reply(body) {
                Err(e) => unknown(format!("node {leader}: {e}")),
                Ok(ProposeReply::Applied(b)) => match decode_outcome(&b) {
                    Some(o) => Forwarded::Done(Ok(o)),
                    None => unknown(format!("node {leader} answered no outcome")),
                },
                Ok(ProposeReply::NotLeader(l)) => Forwarded::Retry(ControllerError::NotLeader { leader: l }),
                Ok(ProposeReply::Unavailable(why)) => Forwarded::Retry(ControllerError::Unavailable(why)),
                Ok(ProposeReply::OutcomeUnknown(why)) => unknown(why),
            },
        }
    }

    /// Returns once this node has applied every entry the controller had
    /// committed when it was called: a read of [`state`](Self::state) after
    /// it sees everything committed before. Bounded by the config's
    /// `read_barrier_timeout`.
    pub async fn read_barrier(&self) -> Result<(), ControllerError> {
        let bound = self.0.config.read_barrier_timeout;
        let deadline = Instant::now() + bound;
        loop {
            self.check_running()?;
            let left = deadline.saturating_duration_since(Instant::now());
            let why = match self.leader() {
                Some(l) if l == self.0.node_id && self.is_leader() => {
                    match GlommioRuntime::within(left, self.raft().ensure_linearizable()).await {
                        Ok(Ok(_)) => return Ok(()),
                        Ok(Err(RaftError::Fatal(f))) => return Err(ControllerError::Fatal(f.to_string())),
                        Ok(Err(RaftError::APIError(e))) => ControllerError::Unavailable(e.to_string()),
                        Err(_) => {
                            ControllerError::Unavailable(format!("no quorum confirmed within {bound:?}"))
                        }
                    }
                }
                Some(l) if l != self.0.node_id => match self.forward_read_index(l, left).await {
                    Forwarded::Done(Ok(index)) => return self.wait_applied(index, deadline).await,
                    Forwarded::Done(Err(e)) => return Err(e),
                    Forwarded::Retry(why) => why,
                },
                _ => ControllerError::Unavailable("no controller leader".into()),
            };
            if Instant::now() >= deadline {
                return Err(why);
            }
            self.wait_change(deadline).await;
        }
    }

    async fn forward_read_index(
        &self,
        leader: NodeId,
        left: Duration,
    ) -> Forwarded<Result<u64, ControllerError>> {
        let call = self
            .0
            .network
            .control_call(leader, RaftKind::ControllerReadIndex, &[]);
        match GlommioRuntime::within(left, call).await {
            Err(_) => Forwarded::Retry(ControllerError::Unavailable(format!(
                "no committed index from node {leader} in time"
            ))),
            Ok(Err(TransportError::Closed)) => {
                Forwarded::Done(Err(ControllerError::Fatal("the raft transport is closed".into())))
            }
            Ok(Err(e)) => Forwarded::Retry(ControllerError::Unavailable(e.to_string())),
            Ok(Ok(body)) => match codec::decode_read_index_reply(body) {
                Err(e) => Forwarded::Retry(ControllerError::Unavailable(format!("node {leader}: {e}"))),
                Ok(ReadIndexReply::Index(i)) => Forwarded::Done(Ok(i)),
                Ok(ReadIndexReply::NotLeader(l)) => {
                    Forwarded::Retry(ControllerError::NotLeader { leader: l })
                }
                Ok(ReadIndexReply::Unavailable(why)) => Forwarded::Retry(ControllerError::Unavailable(why)),
            },
        }
    }

    /// Waits until this node applied `index`, or `deadline`.
    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<(), ControllerError> {
        let mut rx = self.applied();
        loop {
            if rx.borrow_and_update().index >= index {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match GlommioRuntime::within(left, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(ControllerError::Fatal("the controller stopped".into())),
                Err(_) => {
                    return Err(ControllerError::Unavailable(format!(
                        "applied up to {} of the leader's committed {index} in time",
                        self.applied_index()
                    )))
                }
            }
        }
    }

    /// Starts the task that gives a new cluster its uuid: while none is
    /// set, whenever this node leads (its state up to date), it proposes
    /// `ClusterInit`. Ends once a uuid is applied.
    fn start_bootstrap(&self) {
        let weak: Weak<Inner> = Rc::downgrade(&self.0);
        let (abort, reg) = AbortHandle::new_pair();
        *self.0.bootstrap.borrow_mut() = Some(abort);
        let task = async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let c = Controller(inner);
                if c.0.stopped.get() || c.state().cluster_uuid.is_some() {
                    return;
                }
                if c.is_leader() {
                    let bound = c.0.config.read_barrier_timeout;
                    let current = matches!(
                        GlommioRuntime::within(bound, c.raft().ensure_linearizable()).await,
                        Ok(Ok(_))
                    );
                    if current && c.state().cluster_uuid.is_none() {
                        let uuid = c.0.config.proposed_uuid.clone().unwrap_or_else(new_uuid);
                        match c.propose(ControllerCommand::ClusterInit { uuid }).await {
                            Ok(Ok(v)) => tracing::info!(uuid = %v, "cluster uuid set"),
                            Ok(Err(r)) => tracing::warn!(%r, "cluster uuid refused"),
                            Err(e) => tracing::info!(error = %e, "cluster uuid not set yet; trying again"),
                        }
                    }
                }
                let until = Instant::now() + RECHECK * 5;
                c.wait_change(until).await;
            }
        };
        glommio::spawn_local(Abortable::new(task, reg)).detach();
    }
}

/// What a failed control call means for a request: `Ok` with the reason
/// to try again when it was certainly not acted on; `Err` with the
/// request's error when it may have been.
fn not_sent(e: TransportError) -> Result<ControllerError, ControllerError> {
    match e {
        TransportError::Unreachable { .. }
        | TransportError::UnknownPeer(_)
        | TransportError::Remote { .. } => Ok(ControllerError::Unavailable(e.to_string())),
        TransportError::TooLarge { .. } => Err(ControllerError::Unavailable(e.to_string())),
        TransportError::Closed => Err(ControllerError::Fatal(e.to_string())),
        TransportError::Lost { .. } | TransportError::Malformed(_) => {
            Err(ControllerError::OutcomeUnknown(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let u = new_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
        assert!(matches!(u.as_bytes()[19], b'8' | b'9' | b'a' | b'b'));
        assert_ne!(u, new_uuid());
    }
}
