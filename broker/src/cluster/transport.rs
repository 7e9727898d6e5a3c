//! `ShardTransport`: a shard's end of the raft transport in cluster mode:
//! its connections to the same shard index of every peer
//! (`ShardNetwork`), its Raft groups by id (`GroupRegistry`), the server
//! that answers peers' frames (`RaftServer`), their shared byte budget and
//! counters, and the shard's raft task queue (openraft's tasks run there,
//! so heartbeats and votes are not starved by fetches: the spec's §4.3),
//! and the control handler of its server (peers' leader reports).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use es_raft::transport::{
    GroupRegistry, InflightBudget, RaftServer, ShardNetwork, TransportConfig, TransportStats,
};
use glommio::{Latency, Shares};

use crate::shard::placement::ShardId;

/// Shares of the raft task queue: ten times a default queue's, so timers
/// and votes run promptly whatever else the shard does.
const RAFT_TQ_SHARES: usize = 1000;
/// The raft task queue's latency goal.
const RAFT_TQ_LATENCY: Duration = Duration::from_millis(1);

pub struct ShardTransport {
    pub network: ShardNetwork,
    pub registry: GroupRegistry,
    pub server: RaftServer,
    pub stats: Rc<TransportStats>,
    /// Connections refused on this shard before the server took them (a
    /// bad preamble, another cluster, a shard this node does not have),
    /// by reason; the server counts its own in `stats`.
    pub accept_refused: RefCell<BTreeMap<&'static str, u64>>,
    /// The controller group, on shard 0 once opened (cluster/controller.rs).
    pub controller: RefCell<Option<es_raft::controller::Controller>>,
    /// Peers' liveness and the controller's elections (kept on shard 0:
    /// cluster/health.rs).
    pub health: crate::cluster::health::Health,
    /// The server's control handler: peers' leader reports kept here
    /// (cluster/reports.rs), the controller's frames passed behind it.
    pub control: Rc<crate::cluster::reports::NodeControl>,
    /// Counters of the replicas this shard removed, so that the metrics'
    /// sums over its replicas never go down.
    pub retired: RetiredReplicas,
}

/// What the replicas a shard removed had counted (their `ReplicaStats`).
#[derive(Debug, Default)]
pub struct RetiredReplicas {
    pub elections: Cell<u64>,
    pub snapshot_bytes_sent: Cell<u64>,
    pub snapshot_bytes_received: Cell<u64>,
    pub storage_failures: Cell<u64>,
    pub storage_restarts: Cell<u64>,
}

impl RetiredReplicas {
    /// Adds a replica's counters as it is removed.
    pub fn retire(&self, stats: &es_raft::ReplicaStats) {
        let add = |c: &Cell<u64>, n: &Cell<u64>| c.set(c.get().saturating_add(n.get()));
        add(&self.elections, &stats.elections);
        add(&self.snapshot_bytes_sent, &stats.snapshot_bytes_sent);
        add(&self.snapshot_bytes_received, &stats.snapshot_bytes_received);
        add(&self.storage_failures, &stats.storage_failures);
        add(&self.storage_restarts, &stats.storage_restarts);
    }
}

impl ShardTransport {
    /// The transport of shard `id`, with its raft task queue and RPC
    /// timeout floor installed for openraft's runtime. On the shard's
    /// executor.
    pub fn new(config: &TransportConfig, id: ShardId) -> Rc<ShardTransport> {
        let tq = glommio::executor().create_task_queue(
            Shares::Static(RAFT_TQ_SHARES),
            Latency::Matters(RAFT_TQ_LATENCY),
            "raft",
        );
        es_raft::set_raft_task_queue(Some(tq));
        es_raft::set_rpc_timeout_floor(config.rpc_timeout);
        let stats = Rc::new(TransportStats::default());
        let budget = InflightBudget::new(config.inflight_shard_bytes);
        let shard = id as u16;
        let network = ShardNetwork::new(config, shard, stats.clone(), budget.clone());
        let registry = GroupRegistry::default();
        let server = RaftServer::new(config.clone(), shard, registry.clone(), stats.clone(), budget);
        let control = Rc::new(crate::cluster::reports::NodeControl::default());
        server.set_control_handler(control.clone());
        Rc::new(ShardTransport {
            network,
            registry,
            server,
            stats,
            accept_refused: RefCell::new(BTreeMap::new()),
            controller: RefCell::new(None),
            health: Default::default(),
            control,
            retired: RetiredReplicas::default(),
        })
    }

    /// Counts and logs a connection refused before the server took it.
    pub fn refuse(&self, reason: &'static str, detail: &str) {
        *self.accept_refused.borrow_mut().entry(reason).or_default() += 1;
        tracing::warn!(reason, detail, "raft connection refused");
    }

    /// Refusals by reason, the server's and this shard's accept path's.
    pub fn refused(&self) -> BTreeMap<&'static str, u64> {
        let mut all = self.stats.refused.borrow().clone();
        for (reason, n) in self.accept_refused.borrow().iter() {
            *all.entry(reason).or_default() += n;
        }
        all
    }

    /// Closes every connection, both ways (the shard stops).
    pub fn close(&self) {
        self.server.close();
        self.network.close();
    }
}
