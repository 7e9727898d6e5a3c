//! `PartitionRaft`: one partition replica's Raft group, on the shard that
//! owns the partition: the openraft instance over the partition log (the
//! log is the Raft log), its [`Proposer`], what the broker asks of it
//! (leader, term, high watermark, replicas in sync, lag) and its counters.
//!
//! A leader takes produces; a replica that does not lead refuses them
//! with the leader it knows (`NotLeader`), and a leader that has not heard
//! from a quorum for longer than twice the election timeout refuses them
//! with `LeaderNotAvailable` (it may have been deposed without knowing):
//! docs/design/raft-produce.md.
//!
//! In sync (`in_sync`, on the leader): the leader, and each follower whose
//! matched index reached the leader's last entry within `replica_lag_ms`.
//! It is judged from openraft's replication metrics, which say what a
//! follower matched, not when it last answered: on a partition nobody
//! writes, a follower that stopped stays in sync (it matched everything
//! there is) until the next write leaves it behind.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use es_storage::batch::{self, RaftStamp, MAGIC_V2};
use es_storage::{BatchBuf, PartitionLog};
use openraft::{EmptyNode, Raft, RaftMetrics, ServerState};

use crate::group_instance::{start_instance, Instance};
use crate::group_start::Initialize;
use crate::limits::APPEND_BYTES_MAX_DEFAULT;
use crate::limits::{
    ELECTION_TIMEOUT_MS_DEFAULT, ENTRY_BYTES_MAX_DEFAULT, HEARTBEAT_MS_DEFAULT, PRODUCE_TIMEOUT_MS_DEFAULT,
    PROPOSALS_IN_FLIGHT_DEFAULT, PROPOSER_QUEUE_BYTES_MAX, RECOVERY_BYTES_PER_SEC_DEFAULT,
    REPLICA_LAG_MS_DEFAULT, SNAPSHOT_CHUNK_BYTES_DEFAULT,
};
use crate::producer_window::ProducerFields;
use crate::proposer::{ProduceError, Proposer};
use crate::replica_stats::{bump, ReplicaStats};
use crate::transport::{GroupRegistry, ShardNetwork};
use crate::types::{EsRaft, GroupId, LogId, NodeId};

/// The receiver of a replica's openraft metrics (term, leader, applied,
/// replication).
pub type MetricsWatch = tokio::sync::watch::Receiver<RaftMetrics<NodeId, EmptyNode>>;

/// A partition group's settings (the broker's flags, the spec's §4.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `--raft-heartbeat-ms`.
    pub heartbeat_ms: u64,
    /// `--raft-election-timeout-ms`: elections after this to twice this
    /// without a leader; a leader without quorum contact for twice this
    /// long refuses produces.
    pub election_timeout_ms: u64,
    /// `--raft-append-bytes-max`: the transport's (`TransportConfig`);
    /// carried here so one struct holds a group's flags.
    pub append_bytes_max: usize,
    /// `--raft-entry-bytes-max`: bytes of produced batches in one entry.
    pub entry_bytes_max: usize,
    /// `--raft-proposals-in-flight`: entries the Proposer has in flight.
    pub proposals_in_flight: usize,
    /// `--produce-timeout-ms`: how long a produce waits for its commit.
    pub produce_timeout_ms: u64,
    /// `--replica-lag-ms`: a follower that has not matched the leader's
    /// last entry for this long is out of sync.
    pub replica_lag_ms: u64,
    /// Bytes of produced batches a replica queues for proposal before a
    /// produce waits (`limits::PROPOSER_QUEUE_BYTES_MAX`).
    pub queue_bytes_max: usize,
    /// `--raft-snapshot-chunk-bytes`: bytes of stored batches per chunk of
    /// a snapshot transfer (at most `limits::SNAPSHOT_CHUNK_BYTES_MAX`).
    pub snapshot_chunk_bytes: usize,
    /// `--raft-recovery-bytes-per-sec`: a leader streams a snapshot to a
    /// follower at most this fast (0: unlimited).
    pub recovery_bytes_per_sec: u64,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            heartbeat_ms: HEARTBEAT_MS_DEFAULT,
            election_timeout_ms: ELECTION_TIMEOUT_MS_DEFAULT,
            append_bytes_max: APPEND_BYTES_MAX_DEFAULT,
            entry_bytes_max: ENTRY_BYTES_MAX_DEFAULT,
            proposals_in_flight: PROPOSALS_IN_FLIGHT_DEFAULT,
            produce_timeout_ms: PRODUCE_TIMEOUT_MS_DEFAULT,
            replica_lag_ms: REPLICA_LAG_MS_DEFAULT,
            queue_bytes_max: PROPOSER_QUEUE_BYTES_MAX,
            snapshot_chunk_bytes: SNAPSHOT_CHUNK_BYTES_DEFAULT,
            recovery_bytes_per_sec: RECOVERY_BYTES_PER_SEC_DEFAULT,
        }
    }
}

/// What produce checks a batch against beyond its format: the topic's
/// `batch_bytes_max` and whether it is compacted (every record keyed).
/// The partition log refuses such a batch too, but there a refusal stops
/// the whole group, so produce refuses it first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchRules {
    pub batch_bytes_max: usize,
    pub compacted: bool,
}

/// What the metrics task learns, for the handle's accessors.
#[derive(Default)]
pub(crate) struct Tracking {
    /// When this replica last became leader (its term's start here).
    pub(crate) leader_since: Cell<Option<Instant>>,
    /// On the leader: when each follower last matched the leader's last
    /// entry.
    pub(crate) caught_up: RefCell<BTreeMap<NodeId, Instant>>,
}

pub(crate) struct Inner {
    pub(crate) node_id: NodeId,
    pub(crate) group: GroupId,
    /// The replica's vote and metadata (`data/raft/<topic>/<partition>/`).
    pub(crate) raft_dir: PathBuf,
    pub(crate) network: ShardNetwork,
    pub(crate) log: PartitionLog,
    pub(crate) registry: GroupRegistry,
    pub(crate) config: GroupConfig,
    rules: Cell<Option<BatchRules>>,
    pub(crate) stats: Rc<ReplicaStats>,
    pub(crate) tracking: Rc<Tracking>,
    /// The openraft instance every call goes to (one per start).
    pub(crate) current: RefCell<Rc<Instance>>,
    pub(crate) stopped: Cell<bool>,
    /// Why the group stopped, while it waits to start again
    /// (`restart.rs`); `None` while it runs.
    pub(crate) storage_failure: RefCell<Option<String>>,
}

/// A partition replica's Raft group; clones share it.
#[derive(Clone)]
pub struct PartitionRaft(pub(crate) Rc<Inner>);

pub(crate) fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

impl PartitionRaft {
    /// Opens the replica over `log`, a partition log its owner just opened
    /// (and closes after [`shutdown`](Self::shutdown)), with its vote and
    /// metadata under `raft_dir` (`data/raft/<topic>/<partition>/`);
    /// routes `group`'s frames on this shard to it; and, given `initialize`
    /// and a group never initialized (empty log, no vote), starts the
    /// group with those voters: at once on the preferred replica, later
    /// on the others should it not reach them (`group_start.rs`).
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        node_id: NodeId,
        group: GroupId,
        log: PartitionLog,
        raft_dir: &Path,
        initialize: Option<Initialize>,
        network: &ShardNetwork,
        registry: &GroupRegistry,
        config: &GroupConfig,
    ) -> Result<PartitionRaft, String> {
        registry.opening(group);
        let opened = Self::open_inner(node_id, group, log, raft_dir, network, registry, config).await;
        let this = match opened {
            Ok(this) => this,
            Err(e) => {
                registry.remove(group);
                return Err(e);
            }
        };
        let now = this.now();
        registry.insert_with_receiver(
            group,
            now.raft.clone(),
            crate::transport::registry::Receiver::Log(now.receiver.clone()),
        );
        registry.elect_by_pre_vote(
            group,
            now.raft.clone(),
            crate::election_timer::last_log_of(now.store.clone()),
            network.clone(),
        );
        crate::restart::supervise(&this);
        if let Some(init) = initialize {
            if let Err(e) = crate::group_start::start(&this, init).await {
                this.shutdown().await;
                return Err(e);
            }
        }
        Ok(this)
    }

    async fn open_inner(
        node_id: NodeId,
        group: GroupId,
        log: PartitionLog,
        raft_dir: &Path,
        network: &ShardNetwork,
        registry: &GroupRegistry,
        config: &GroupConfig,
    ) -> Result<PartitionRaft, String> {
        let stats = Rc::new(ReplicaStats::default());
        let tracking = Rc::new(Tracking::default());
        let instance =
            start_instance(node_id, group, &log, raft_dir, network, config, &stats, &tracking).await?;
        Ok(PartitionRaft(Rc::new(Inner {
            node_id,
            group,
            raft_dir: raft_dir.to_path_buf(),
            network: network.clone(),
            log,
            registry: registry.clone(),
            config: config.clone(),
            rules: Cell::new(None),
            stats,
            tracking,
            current: RefCell::new(Rc::new(instance)),
            stopped: Cell::new(false),
            storage_failure: RefCell::new(None),
        })))
    }

    /// The openraft instance (and what is built over it) now.
    pub(crate) fn now(&self) -> Rc<Instance> {
        self.0.current.borrow().clone()
    }

    /// Sets what produce checks batches against (the topic's config; again
    /// when it changes). Until set, a batch is checked against the format
    /// only.
    pub fn set_batch_rules(&self, rules: BatchRules) {
        self.0.rules.set(Some(rules));
    }

    /// Produces one batch (as a client sent it: version 1, or version 2
    /// with no Raft stamp; a version 1 batch is copied into version 2) and
    /// answers its base offset once its entry is committed on a majority
    /// and applied here.
    ///
    /// A batch whose header carries a producer stamp (id, epoch, base
    /// sequence) is idempotent: checked against the partition's window
    /// (docs/design/raft-produce.md "Idempotent producers"). A retry of a
    /// batch written is answered with the first write's base offset and
    /// writes nothing; a refusal is `ProduceError::Refused` with the
    /// broker's code. Whether the id and epoch were issued (and not
    /// fenced) is the caller's to check first, against the controller's
    /// `ProducerRegistry::check`. A leader takes idempotent batches once it
    /// has applied an entry of its own term; until then they wait (at most
    /// twice the election timeout, then `LeaderNotAvailable`).
    pub async fn produce(&self, batch: BatchBuf) -> Result<u64, ProduceError> {
        let (batch, producer) = match self.checked(batch) {
            Ok(b) => b,
            Err(e) => {
                self.0.stats.note_refused(&e);
                return Err(e);
            }
        };
        if producer.is_some() {
            if let Err(e) = self.idempotent_ready().await {
                self.0.stats.note_refused(&e);
                return Err(e);
            }
        }
        self.now().proposer.submit(batch, producer).await
    }

    /// Waits until this replica may take idempotent batches (it leads and
    /// applied an entry of its term), at most twice the election timeout.
    async fn idempotent_ready(&self) -> Result<(), ProduceError> {
        let mut rx = self.metrics();
        let bound = Duration::from_millis(self.0.config.election_timeout_ms.saturating_mul(2));
        let deadline = Instant::now() + bound;
        loop {
            let now = {
                let m = rx.borrow_and_update();
                may_propose(
                    self.0.node_id,
                    &m,
                    &self.0.tracking,
                    Duration::from_millis(self.0.config.election_timeout_ms),
                )
                .and_then(|()| idempotent_ready(&m))
            };
            match now {
                Ok(()) => return Ok(()),
                Err(e @ ProduceError::NotLeader { .. }) => return Err(e),
                Err(e) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(e);
                    }
                    if let Err(_) | Ok(Err(_)) =
                        crate::runtime::GlommioRuntime::within(left, rx.changed()).await
                    {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The batch as the log takes it, with its producer stamp and record
    /// count when it has one; or why not.
    fn checked(&self, batch: BatchBuf) -> Result<(BatchBuf, Option<(ProducerFields, u32)>), ProduceError> {
        let invalid = |why: String| Err(ProduceError::Invalid(why));
        let (h, keyless) = match batch::check_produced(&batch) {
            Ok(checked) => checked,
            Err(e) => return invalid(e.to_string()),
        };
        if h.raft.is_some_and(|r| r.control) {
            return invalid("a control batch is not produced".into());
        }
        let producer = ProducerFields::of(h.producer).map(|f| (f, h.record_count));
        if let Some(rules) = self.0.rules.get() {
            if batch.len() > rules.batch_bytes_max {
                return invalid(format!(
                    "the batch is {} bytes, over the topic's batch_bytes_max {}",
                    batch.len(),
                    rules.batch_bytes_max
                ));
            }
            if rules.compacted && keyless {
                return invalid("a compacted topic needs a key on every record".into());
            }
        }
        if batch.get(16) == Some(&MAGIC_V2) {
            return Ok((batch, producer));
        }
        Ok((
            BatchBuf::from(batch::upgrade(&batch, RaftStamp::default())),
            producer,
        ))
    }

    /// This node.
    pub fn node_id(&self) -> NodeId {
        self.0.node_id
    }

    /// The group's id.
    pub fn group(&self) -> GroupId {
        self.0.group
    }

    /// Whether this replica leads the group now.
    pub fn is_leader(&self) -> bool {
        let m = self.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.0.node_id)
    }

    /// The leader this replica knows of: itself, or one it heard from
    /// within the longest election timeout.
    pub fn leader(&self) -> Option<NodeId> {
        let leader = self.metrics().borrow().current_leader;
        if leader != Some(self.0.node_id) && self.0.registry.elections().leader_lost(self.0.group) {
            return None;
        }
        leader
    }

    /// The term this replica is in.
    pub fn term(&self) -> u64 {
        self.metrics().borrow().current_term
    }

    /// The high watermark: every record below it is committed (and
    /// written here); what clients may read from this replica.
    pub fn high_watermark(&self) -> u64 {
        self.0.log.committed_offset().0
    }

    /// The offset after the last applied entry (the state machine's mark;
    /// the high watermark is it, bounded by what is written here).
    pub fn applied_offset(&self) -> u64 {
        self.now().sm.committed_offset()
    }

    /// The partition log.
    pub fn log(&self) -> &PartitionLog {
        &self.0.log
    }

    /// The raft handle now (for what this type does not wrap); another
    /// after the group started again (`restart.rs`).
    pub fn raft(&self) -> Raft<EsRaft> {
        self.now().raft.clone()
    }

    /// Why this replica's group is stopped, waiting for the disk to take
    /// writes again before it starts again (`restart.rs`); `None` while it
    /// runs.
    pub fn storage_failure(&self) -> Option<String> {
        self.0.storage_failure.borrow().clone()
    }

    /// The voters of the current membership.
    pub fn replicas(&self) -> Vec<NodeId> {
        let m = self.metrics();
        let m = m.borrow();
        m.membership_config.membership().voter_ids().collect()
    }

    /// On the leader: itself and the followers whose matched index reached
    /// its last entry within `replica_lag_ms` (see the module's notes).
    /// Elsewhere: empty (the leader's view travels with LeaderReports).
    pub fn in_sync(&self) -> Vec<NodeId> {
        if !self.is_leader() {
            return Vec::new();
        }
        let lag = Duration::from_millis(self.0.config.replica_lag_ms);
        let caught_up = self.0.tracking.caught_up.borrow();
        self.replicas()
            .into_iter()
            .filter(|id| *id == self.0.node_id || caught_up.get(id).is_some_and(|t| t.elapsed() <= lag))
            .collect()
    }

    /// On the leader: how many entries each follower is behind its last
    /// one (a follower it has not matched yet: all of them). Elsewhere:
    /// empty.
    pub fn lag(&self) -> BTreeMap<NodeId, u64> {
        let m = self.metrics();
        let m = m.borrow();
        let (Some(replication), true) = (&m.replication, m.state == ServerState::Leader) else {
            return BTreeMap::new();
        };
        let last = m.last_log_index.unwrap_or(0);
        replication
            .iter()
            .filter(|(id, _)| **id != self.0.node_id)
            .map(|(&id, matched)| {
                let behind = match matched {
                    Some(l) => last.saturating_sub(l.index),
                    None => last + 1,
                };
                (id, behind)
            })
            .collect()
    }

    /// On the leader: the offset below which every replica holds the log
    /// (the end of the entry the least advanced voter matched, the leader
    /// counted at its last entry). `None` elsewhere, or while a voter has
    /// matched nothing.
    pub fn matched_offset_min(&self) -> Option<u64> {
        let least = {
            let m = self.metrics();
            let m = m.borrow();
            if m.state != ServerState::Leader || m.current_leader != Some(self.0.node_id) {
                return None;
            }
            let replication = m.replication.as_ref()?;
            let mut least = m.last_log_index?;
            for id in m.membership_config.membership().voter_ids() {
                if id != self.0.node_id {
                    least = least.min(replication.get(&id)?.as_ref()?.index);
                }
            }
            least
        };
        self.now().store.offset_after(least)
    }

    /// openraft's metrics of this replica (term, state, leader, applied,
    /// replication), as a watch.
    pub fn metrics(&self) -> MetricsWatch {
        self.now().raft.metrics()
    }

    /// Purge is retention (the spec's §5.2; docs/design/raft-snapshots.md):
    /// the broker's cleanup pass calls this with its retention cut (an
    /// offset: records below it may go) before it deletes, tiers or
    /// compacts. It finds the last entry applied here that ends at or
    /// below the cut; if this replica's snapshot does not cover it yet,
    /// triggers one and waits for it (a snapshot is a descriptor of the
    /// applied prefix: O(1) to build); then asks openraft to purge the log
    /// up to that entry. openraft runs the purge at once, or once no
    /// replication reads the entries; the log store then saves the purged
    /// id durably and raises the log's cleanup limit, below which alone
    /// cleanup touches segments. So purge ≤ snapshot ≤ applied ≤
    /// committed, always.
    ///
    /// Returns the purge asked for (`None`: nothing new below the cut).
    /// An error only when the group stopped.
    pub async fn retain_below(&self, cut: u64) -> Result<Option<LogId>, String> {
        let what = format!("group {}: retain below offset {cut}", self.0.group);
        let inst = self.now();
        let Some(applied) = inst.sm.last_applied() else {
            return Ok(None);
        };
        let Some(target) = inst.store.last_entry_ending_by(cut, applied.index) else {
            return Ok(None);
        };
        let mut rx = inst.raft.metrics();
        let (mut snapshot, purged) = {
            let m = rx.borrow_and_update();
            (m.snapshot, m.purged)
        };
        if purged.is_some_and(|p| p.index >= target.index) {
            return Ok(None);
        }
        if snapshot.is_none_or(|s| s.index < target.index) {
            bump(&self.0.stats.snapshots_triggered);
            inst.raft.trigger().snapshot().await.map_err(|e| err(&what, e))?;
            // A trigger while a build runs is dropped: trigger again each
            // time a snapshot lands that does not cover the target.
            loop {
                rx.changed().await.map_err(|e| err(&what, e))?;
                let now = rx.borrow_and_update().snapshot;
                if now.is_some_and(|s| s.index >= target.index) {
                    break;
                }
                if now != snapshot {
                    snapshot = now;
                    bump(&self.0.stats.snapshots_triggered);
                    inst.raft.trigger().snapshot().await.map_err(|e| err(&what, e))?;
                }
            }
        }
        inst.raft
            .trigger()
            .purge_log(target.index)
            .await
            .map_err(|e| err(&what, e))?;
        bump(&self.0.stats.purges_asked);
        Ok(Some(target))
    }

    /// The replica's counters.
    pub fn stats(&self) -> &Rc<ReplicaStats> {
        &self.0.stats
    }

    /// The Proposer (its queue and in-flight counts) of the instance now.
    pub fn proposer(&self) -> Proposer {
        self.now().proposer.clone()
    }

    /// Stops the replica: produces queued are refused, openraft shuts down
    /// (answering entries in flight), the group leaves the shard's
    /// registry, the metadata's committed file is closed. The log stays
    /// open: its owner closes it. Idempotent.
    pub async fn shutdown(&self) {
        if self.0.stopped.replace(true) {
            return;
        }
        let now = self.now();
        now.proposer.close();
        self.0.registry.remove(self.0.group);
        if let Err(e) = now.raft.shutdown().await {
            tracing::warn!(group = self.0.group, error = %e, "raft group shut down with an error");
        }
        now.store.close_meta().await;
    }
}

/// Whether a replica may propose now: it leads, and a quorum acknowledged
/// it within twice the election timeout (the longest a follower waits
/// before it stands for election; from the start of its term while no
/// quorum has acknowledged it yet). Not within one: openraft dates an
/// acknowledgement by when its request was sent, and a follower answers an
/// append after its fdatasync, so a slow disk alone can look like a
/// silence of one timeout. Refusing is only ever a faster answer: the
/// commit rule keeps a deposed leader from acknowledging anything.
pub(crate) fn may_propose(
    me: NodeId,
    m: &RaftMetrics<NodeId, EmptyNode>,
    tracking: &Tracking,
    election_timeout: Duration,
) -> Result<(), ProduceError> {
    if m.state != ServerState::Leader || m.current_leader != Some(me) {
        let leader = m.current_leader.filter(|&l| l != me);
        return Err(ProduceError::NotLeader { leader });
    }
    let limit = 2 * election_timeout;
    let silent = match m.millis_since_quorum_ack {
        Some(ms) => Duration::from_millis(ms) > limit,
        // No quorum has acknowledged this term yet: a leader elected a
        // moment ago, or one cut off since it was elected.
        None => tracking.leader_since.get().is_some_and(|t| t.elapsed() > limit),
    };
    if silent {
        return Err(ProduceError::LeaderNotAvailable(format!(
            "the leader has not heard from a quorum for over twice the election timeout ({} ms); it may have been deposed",
            limit.as_millis()
        )));
    }
    Ok(())
}

/// Whether a leader may check idempotent batches: it has applied an entry
/// of its own term (the blank entry it appended when elected), so every
/// entry committed before its term is applied and in the window (the
/// spec's §3.4: a retry of a batch committed but not yet applied here
/// would otherwise pass the check and be written again).
pub(crate) fn idempotent_ready(m: &RaftMetrics<NodeId, EmptyNode>) -> Result<(), ProduceError> {
    if m.last_applied.is_some_and(|l| l.leader_id.term == m.current_term) {
        return Ok(());
    }
    Err(ProduceError::LeaderNotAvailable(
        "the new leader has not applied its first entry yet; idempotent produces wait for it".into(),
    ))
}

/// Follows the replica's metrics until the group shuts down: elections,
/// leadership, when each follower matched the leader's last entry.
pub(crate) async fn track(me: NodeId, mut rx: MetricsWatch, tracking: Rc<Tracking>, stats: Rc<ReplicaStats>) {
    let mut term = rx.borrow().current_term;
    let mut leading = false;
    loop {
        {
            let m = rx.borrow_and_update();
            if m.current_term > term {
                term = m.current_term;
                bump(&stats.elections);
            }
            let leads = m.state == ServerState::Leader && m.current_leader == Some(me);
            if leads && !leading {
                bump(&stats.became_leader);
                tracking.leader_since.set(Some(Instant::now()));
                tracking.caught_up.borrow_mut().clear();
            }
            if !leads {
                tracking.leader_since.set(None);
            }
            leading = leads;
            if let (true, Some(replication), Some(last)) = (leads, &m.replication, m.last_log_index) {
                let now = Instant::now();
                let mut caught_up = tracking.caught_up.borrow_mut();
                for (&id, matched) in replication {
                    if matched.is_some_and(|l| l.index >= last) {
                        caught_up.insert(id, now);
                    }
                }
            }
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
