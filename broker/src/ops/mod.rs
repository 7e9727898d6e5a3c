//! Operations a shard runs for the partitions it owns (whoever received the
//! client's request), and the dispatch of forwarded operations: one file
//! per operation. `produce` and `fetch` also hold their transport-neutral
//! front ends, which the listeners call on the shard that received the
//! request.

pub mod describe;
pub mod fetch;
pub mod open;
pub mod produce;

use std::rc::Rc;

use es_storage::PartitionLog;
use futures::FutureExt;

use crate::error::ApiError;
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::controller;

/// Runs one operation on this shard (whichever shard's listener received
/// its request). Panics inside are caught and turned into an internal
/// error, logged and counted (`es_request_panics_total{listener="operation"}`),
/// so a bug hit by one request never takes the shard down.
pub async fn handle(shard: Rc<Shard>, op: Op) -> Reply {
    let kind = op_kind(&op);
    match std::panic::AssertUnwindSafe(run(shard, op)).catch_unwind().await {
        Ok(reply) => reply,
        Err(panic) => {
            crate::shard::panics::panicked("operation", kind, panic.as_ref());
            Reply::Done(Err(ApiError::internal(format!(
                "{kind} failed unexpectedly (a bug; the broker log says more)"
            ))))
        }
    }
}

fn op_kind(op: &Op) -> &'static str {
    match op {
        Op::Produce { .. } => "produce",
        Op::Fetch(_) => "fetch",
        Op::Open { .. } => "open",
        Op::OpenReplica { .. } => "open_replica",
        Op::ReadBarrier => "read_barrier",
        Op::Leader { .. } => "leader",
        Op::Remove { .. } => "remove",
        Op::Configure { .. } => "configure",
        Op::Describe { .. } => "describe",
        Op::CreateTopic(_) => "create_topic",
        Op::DeleteTopic(_) => "delete_topic",
        Op::PatchTopic { .. } => "patch_topic",
        Op::InitProducer(..) => "init_producer",
        Op::CheckProducer { .. } => "check_producer",
        Op::Producers(_) => "producers",
        Op::Group { .. } => "group",
        Op::Classic { .. } => "classic_group",
        Op::ListGroups => "list_groups",
        Op::GroupOffsets(_) => "group_offsets",
        Op::AdoptOffsets { .. } => "adopt_offsets",
        Op::OffsetForTime { .. } => "offset_for_time",
        Op::MaxTimestamp { .. } => "max_timestamp",
        Op::AdoptConnection { .. } => "adopt_connection",
        Op::AdoptRaft { .. } => "adopt_raft",
        Op::Cluster => "cluster",
        Op::LeaderViews { .. } => "leader_views",
        Op::PartitionCounts => "partition_counts",
        Op::Keys(_) => "keys",
        Op::Series => "series",
        Op::Registry { .. } => "registry",
    }
}

/// Every arm with an await runs boxed: the future of `handle` stays small
/// (it is spawned, and embedded in `Shard::call`, per request), and each
/// request allocates only the state of its own operation.
async fn run(shard: Rc<Shard>, op: Op) -> Reply {
    match op {
        Op::Produce {
            topic,
            partition,
            payload,
            producer,
        } => Reply::Produced(Box::pin(produce::append(&shard, &topic, partition, payload, producer)).await),
        Op::Fetch(args) => Reply::Fetched(Box::pin(fetch::read(&shard, args)).await),
        Op::Open { meta, partitions } => Reply::Done(Box::pin(open::open(&shard, &meta, &partitions)).await),
        Op::OpenReplica {
            meta,
            partition,
            group,
            replicas,
            initialize,
        } => Reply::Done(
            Box::pin(open::open_replica(
                &shard, &meta, partition, group, &replicas, initialize,
            ))
            .await,
        ),
        Op::ReadBarrier => Reply::Done(Box::pin(crate::cluster::reconciler::read_barrier(&shard)).await),
        Op::Leader { topic, partition } => Reply::Json(Ok(produce::leader_here(&shard, &topic, partition))),
        Op::Remove { topic, partitions } => {
            Reply::Done(Box::pin(open::remove(&shard, &topic, &partitions)).await)
        }
        Op::Configure {
            topic,
            config,
            partitions,
        } => Reply::Done(describe::configure(&shard, &topic, &config, &partitions)),
        Op::Describe { topic, partitions } => {
            Reply::Described(describe::describe(&shard, &topic, &partitions))
        }
        Op::CreateTopic(meta) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Topic(Box::pin(controller::create_topic(&shard, meta)).await)
        }
        Op::DeleteTopic(name) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Done(Box::pin(controller::delete_topic(&shard, &name)).await)
        }
        Op::Group { group, op, caller } => {
            debug_assert_eq!(shard.group_owner(&group), shard.id, "routed to its coordinator");
            Reply::Json(Box::pin(crate::groups::coordinator::run(&shard, &group, op, &caller)).await)
        }
        Op::GroupOffsets(op) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Offsets(Box::pin(crate::groups::offset_store::run_on_controller(&shard, op)).await)
        }
        Op::AdoptOffsets { index, groups } => {
            crate::groups::cluster::adopt(&shard, index, groups);
            Reply::Done(Ok(()))
        }
        Op::Classic { group, op, caller } => {
            Reply::Classic(Box::pin(crate::groups::classic::run(&shard, &group, op, &caller)).await)
        }
        Op::Series => Reply::Series(Box::new(crate::operate::metrics_live::snapshot(&shard))),
        Op::ListGroups => Reply::Json(
            crate::groups::coordinator::list(&shard).map(|groups| serde_json::json!({ "groups": groups })),
        ),
        Op::OffsetForTime {
            topic,
            partition,
            timestamp_ms,
        } => Reply::Json(Box::pin(fetch::offset_for_time(&shard, &topic, partition, timestamp_ms)).await),
        Op::MaxTimestamp { topic, partition } => {
            Reply::Json(Box::pin(fetch::max_timestamp(&shard, &topic, partition)).await)
        }
        Op::AdoptConnection {
            socket,
            unhandled,
            principal,
            adopt,
        } => Reply::Done(adopt(&shard, socket, unhandled, principal)),
        Op::Cluster => Reply::Json(crate::cluster::view::view(&shard)),
        Op::LeaderViews { topic, partitions } => Reply::LeaderViews(
            partitions
                .into_iter()
                .map(|p| (p, crate::cluster::leaders::view(&shard, &topic, p)))
                .collect(),
        ),
        Op::PartitionCounts => Reply::PartitionCounts(crate::cluster::leaders::counts(&shard)),
        Op::AdoptRaft { socket, preamble } => {
            Reply::Done(crate::cluster::listener::adopt(&shard, socket, preamble))
        }
        Op::Keys(op) => Reply::Json(Box::pin(crate::auth::admin::run(&shard, op)).await),
        Op::Producers(op) => crate::producers::expiry::on_shard(&shard, op),
        Op::InitProducer(existing, caller) => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Producer(Box::pin(controller::init_producer(&shard, existing, &caller)).await)
        }
        Op::CheckProducer { producer_id, epoch } => Reply::Done(
            Box::pin(crate::producers::cluster::check_on_controller(
                &shard,
                producer_id,
                epoch,
            ))
            .await,
        ),
        Op::Registry { op, caller } => {
            Reply::Json(Box::pin(crate::registry::service::run(&shard, op, &caller)).await)
        }
        Op::PatchTopic { topic, changes } => {
            assert_eq!(shard.id, CONTROLLER_SHARD, "controller operations run on shard 0");
            Reply::Topic(Box::pin(controller::patch_topic(&shard, &topic, &changes)).await)
        }
    }
}

/// The log of a partition this shard owns.
fn log_of(shard: &Shard, topic: &str, partition: u32) -> Result<PartitionLog, ApiError> {
    debug_assert_eq!(shard.owner(topic, partition), shard.id, "routed to its owner");
    if let Some(owned) = shard.partitions.borrow().get(topic, partition) {
        return Ok(owned.log.clone());
    }
    match shard.catalog.get(topic) {
        None => Err(ApiError::topic_not_found(topic)),
        Some(meta) if partition >= meta.partitions => Err(ApiError::partition_not_found(
            topic,
            partition as u64,
            meta.partitions,
        )),
        Some(_) => Err(ApiError::unavailable(format!(
            "partition {topic}/{partition} is not open yet"
        ))),
    }
}

/// Cluster mode: this node's replica of a partition its shard owns, or why
/// it has none to serve: a partition assigned here but not open yet is
/// `leader_not_available` (it opens in a moment), one not assigned here is
/// `not_leader` naming its preferred leader ([`not_hosted`]).
fn replica_of(
    shard: &Shard,
    topic: &str,
    partition: u32,
) -> Result<(PartitionLog, es_raft::PartitionRaft), ApiError> {
    if let Some(owned) = shard.partitions.borrow().get(topic, partition) {
        if let Some(raft) = &owned.raft {
            return Ok((owned.log.clone(), raft.clone()));
        }
    }
    let meta = shard
        .catalog
        .get(topic)
        .ok_or_else(|| ApiError::topic_not_found(topic))?;
    if partition >= meta.partitions {
        return Err(ApiError::partition_not_found(
            topic,
            partition as u64,
            meta.partitions,
        ));
    }
    let assignment = shard.catalog.assignment();
    let assigned = assignment
        .replicas(topic, partition)
        .is_some_and(|r| r.replicas.contains(&shard.config.node_id));
    if assigned {
        return Err(ApiError::leader_not_available(format!(
            "this node's replica of {topic}/{partition} is not open yet; retry"
        )));
    }
    Err(not_hosted(shard, topic, partition))
}

/// `not_leader` from a node that holds no replica of the partition: it
/// cannot know who leads, so it names the partition's preferred leader
/// (its first replica), which redirects again if another replica leads.
pub fn not_hosted(shard: &Shard, topic: &str, partition: u32) -> ApiError {
    let assignment = shard.catalog.assignment();
    let hint = assignment
        .replicas(topic, partition)
        .and_then(|r| r.replicas.first().copied())
        .and_then(|id| assignment.node(id));
    ApiError::not_leader(hint)
}

/// `not_leader` naming `leader` with its registered addresses (null when
/// unknown or not registered).
pub fn not_leader(shard: &Shard, leader: Option<u64>) -> ApiError {
    let assignment = shard.catalog.assignment();
    ApiError::not_leader(leader.and_then(|id| assignment.node(id)))
}
