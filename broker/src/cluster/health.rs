//! `Health`: what shard 0 of a cluster node knows of its cluster's health,
//! kept current by two tasks started with the controller group:
//!
//! - the controller's leader and term, followed from its metrics: published
//!   in `BrokerState::controller_leader` (read by `/ready` on every shard),
//!   and each new leader counted as an election won;
//! - each peer's liveness: every `--raft-heartbeat-ms` shard 0 pings every
//!   peer (an empty Heartbeats frame, answered at once without touching a
//!   group: `ShardNetwork::ping`); a peer is `up` while its last answer is
//!   at most `--raft-election-timeout-ms` old, else `unreachable`.
//!
//! Read by `GET /v1/cluster` (cluster/view.rs) and the metrics.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use es_raft::controller::Controller;
use es_raft::NodeId;
use futures::future::{select, Either};

use crate::shard::state::NO_LEADER;
use crate::shard::Shard;

/// Shard 0's knowledge of its peers and of the controller's elections.
#[derive(Debug, Default)]
pub struct Health {
    /// When each peer last answered a ping (absent: never since start).
    answered: RefCell<BTreeMap<NodeId, Instant>>,
    /// How recent an answer keeps a peer `up` (the election timeout).
    up_within: Cell<Duration>,
    /// Leaders of the controller group seen (a new leader, or a new term
    /// with a leader), the first one included.
    elections: Cell<u64>,
}

impl Health {
    /// How long ago `node` last answered, if it did since this node started.
    pub fn last_answer(&self, node: NodeId) -> Option<Duration> {
        self.answered.borrow().get(&node).map(Instant::elapsed)
    }

    /// Whether `node` answered within the election timeout.
    pub fn is_up(&self, node: NodeId) -> bool {
        self.last_answer(node)
            .is_some_and(|ago| ago <= self.up_within.get())
    }

    /// Elections of the controller group this node saw won.
    pub fn elections(&self) -> u64 {
        self.elections.get()
    }
}

/// Starts both tasks on shard 0 (cluster/controller.rs, once the
/// controller is open).
pub fn start(shard: &Rc<Shard>, controller: &Controller) {
    let Some(t) = &shard.raft else { return };
    let c = &shard.config.cluster;
    t.health
        .up_within
        .set(Duration::from_millis(c.raft_election_timeout_ms));
    glommio::spawn_local(follow_leader(shard.clone(), controller.clone())).detach();
    glommio::spawn_local(ping_peers(shard.clone())).detach();
}

/// Publishes the controller's leader until it stops, counting elections.
async fn follow_leader(shard: Rc<Shard>, controller: Controller) {
    let Some(t) = shard.raft.clone() else { return };
    let mut metrics = controller.raft().metrics();
    let mut seen: Option<(u64, NodeId)> = None;
    loop {
        let (term, leader) = {
            let m = metrics.borrow_and_update();
            (m.current_term, m.current_leader)
        };
        shard
            .state
            .controller_leader
            .store(leader.unwrap_or(NO_LEADER), Ordering::Release);
        if let Some(l) = leader {
            if seen != Some((term, l)) {
                seen = Some((term, l));
                t.health.elections.set(t.health.elections.get() + 1);
                tracing::info!(leader = l, term, "the controller group has a leader");
            }
        }
        if metrics.changed().await.is_err() {
            shard.state.controller_leader.store(NO_LEADER, Ordering::Release);
            // Stopped for good, or on a storage error: then a new
            // instance follows once the disk takes writes
            // (es-raft's controller/restart.rs).
            loop {
                if controller.is_shut_down() {
                    return;
                }
                let next = controller.raft().metrics();
                if next.has_changed().is_ok() {
                    metrics = next;
                    break;
                }
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Pings every peer each heartbeat interval until shutdown.
async fn ping_peers(shard: Rc<Shard>) {
    let Some(t) = shard.raft.clone() else { return };
    let c = &shard.config.cluster;
    let every = Duration::from_millis(c.raft_heartbeat_ms);
    let bound = Duration::from_millis(c.raft_election_timeout_ms);
    let me = shard.config.node_id;
    let peers: Vec<NodeId> = c.node_ids().into_iter().filter(|&n| n != me).collect();
    while !shard.is_shutting_down() {
        let pings = peers.iter().map(|&node| {
            let net = t.network.clone();
            async move {
                let ping = Box::pin(net.ping(node));
                let late = Box::pin(glommio::timer::sleep(bound));
                match select(ping, late).await {
                    Either::Left((Ok(()), _)) => Some(node),
                    _ => None,
                }
            }
        });
        let answered = futures::future::join_all(pings).await;
        let now = Instant::now();
        for node in answered.into_iter().flatten() {
            t.health.answered.borrow_mut().insert(node, now);
        }
        glommio::timer::sleep(every).await;
    }
}
