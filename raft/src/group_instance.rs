//! A partition replica's openraft instance and what is built over it (its
//! log store, state machine, Proposer and snapshot receiver): started when
//! the replica opens, and again when its group stopped on a storage error
//! (`restart.rs`). `PartitionRaft` holds the current one (`group.rs`).

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use es_storage::PartitionLog;
use openraft::Raft;

use crate::config::partition_config;
use crate::group::{err, idempotent_ready, may_propose, track, GroupConfig, Tracking};
use crate::limits::SNAPSHOT_CHUNK_BYTES_MAX;
use crate::log_store::LogStore;
use crate::partition_sm::PartitionSm;
use crate::proposer::{Gate, Proposer, ProposerConfig};
use crate::replica_stats::ReplicaStats;
use crate::snapshot_recv::SnapshotReceiver;
use crate::snapshot_send::SnapshotSource;
use crate::transport::ShardNetwork;
use crate::types::{EsRaft, GroupId, NodeId};

/// One openraft instance of the replica and what is built over it: the
/// replica's current one is replaced when its group stops on a storage
/// error and starts again (`restart.rs`).
pub(crate) struct Instance {
    pub(crate) raft: Raft<EsRaft>,
    pub(crate) store: LogStore,
    pub(crate) sm: PartitionSm,
    pub(crate) proposer: Proposer,
    /// Where snapshot transfers to this replica are received.
    pub(crate) receiver: Rc<SnapshotReceiver>,
}

/// Starts an openraft instance of the replica over `log`, its vote and
/// metadata read from `raft_dir`: the store finds the entries the log
/// holds, the state machine and the Proposer are built over it, and a task
/// follows its metrics into `tracking` and `stats` until it stops. At open,
/// and again after the group stopped on a storage error (`restart.rs`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start_instance(
    node_id: NodeId,
    group: GroupId,
    log: &PartitionLog,
    raft_dir: &Path,
    network: &ShardNetwork,
    config: &GroupConfig,
    stats: &Rc<ReplicaStats>,
    tracking: &Rc<Tracking>,
) -> Result<Instance, String> {
    let what = format!("group {group}");
    let store = LogStore::from_log(log.clone(), raft_dir)
        .await
        .map_err(|e| err(&what, e))?;
    let sm = PartitionSm::new(&store).map_err(|e| err(&what, e))?;
    let raft_config = partition_config(
        &format!("partition-group-{group}"),
        config.heartbeat_ms,
        config.election_timeout_ms,
    )
    .map_err(|e| err(&what, e))?;
    let source = SnapshotSource::new(
        store.clone(),
        config.snapshot_chunk_bytes.min(SNAPSHOT_CHUNK_BYTES_MAX),
        config.recovery_bytes_per_sec,
        stats.clone(),
    );
    let raft = match Raft::new(
        node_id,
        Arc::new(raft_config),
        network.group_with_snapshots(group, Rc::new(source)),
        store.clone(),
        sm.clone(),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            store.close_meta().await;
            return Err(err(&what, e));
        }
    };
    let receiver = Rc::new(SnapshotReceiver::new(store.clone(), sm.clone(), stats.clone()));
    // A new instance starts as a follower: nothing learnt of the last one
    // holds.
    tracking.leader_since.set(None);
    tracking.caught_up.borrow_mut().clear();
    let gate: Gate = {
        let raft = raft.clone();
        let tracking = tracking.clone();
        let timeout = Duration::from_millis(config.election_timeout_ms);
        Rc::new(move || may_propose(node_id, &raft.metrics().borrow(), &tracking, timeout))
    };
    let idempotent_gate: Gate = {
        let raft = raft.clone();
        Rc::new(move || idempotent_ready(&raft.metrics().borrow()))
    };
    let proposer = Proposer::new(
        raft.clone(),
        sm.clone(),
        ProposerConfig {
            in_flight_max: config.proposals_in_flight.max(1),
            entry_bytes_max: config.entry_bytes_max,
            queue_bytes_max: config.queue_bytes_max,
            timeout: Duration::from_millis(config.produce_timeout_ms),
        },
        gate,
        idempotent_gate,
        stats.clone(),
    );
    glommio::spawn_local(track(node_id, raft.metrics(), tracking.clone(), stats.clone())).detach();
    Ok(Instance {
        raft,
        store,
        sm,
        proposer,
        receiver,
    })
}
