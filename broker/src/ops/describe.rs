//! What a partition is, on its shard: its offsets and, in cluster mode,
//! its replica's Raft state (describe; the leader's account of the group
//! is cluster/leaders.rs'), and its config applied (configure).

use crate::error::ApiError;
use crate::shard::message::{PartitionState, ReplicaState};
use crate::shard::Shard;
use crate::topics::topic::TopicConfig;

use super::log_of;

/// Applies `config` to partitions of `topic` this shard owns (in cluster
/// mode, those it holds a replica of: the batch rules of its produce too).
pub(super) fn configure(
    shard: &Shard,
    topic: &str,
    config: &TopicConfig,
    partitions: &[u32],
) -> Result<(), ApiError> {
    for &p in partitions {
        if shard.config.cluster.enabled() && !shard.partitions.borrow().contains(topic, p) {
            continue;
        }
        let log = log_of(shard, topic, p)?;
        log.set_config(config.log_config()).map_err(ApiError::storage)?;
        if let Some(raft) = shard.partitions.borrow().replica(topic, p) {
            raft.set_batch_rules(super::open::batch_rules(config));
        }
    }
    Ok(())
}

/// The offsets of partitions of `topic` this shard owns. In cluster mode,
/// of those this node holds a replica of (the others are left out: the
/// caller describes them from the controller's assignment).
pub(super) fn describe(
    shard: &Shard,
    topic: &str,
    partitions: &[u32],
) -> Result<Vec<PartitionState>, ApiError> {
    let cluster = shard.config.cluster.enabled();
    partitions
        .iter()
        .filter(|&&p| !cluster || shard.partitions.borrow().contains(topic, p))
        .map(|&p| {
            let log = log_of(shard, topic, p)?;
            let replica = shard.partitions.borrow().replica(topic, p).map(|r| ReplicaState {
                log_end_offset: log.next_offset().0,
                leader: r.leader(),
                term: r.term(),
                replicas: r.replicas(),
                storage_failure: r.storage_failure(),
            });
            Ok(PartitionState {
                partition: p,
                log_start_offset: log.log_start_offset().0,
                high_watermark: log.committed_offset().0,
                hot_start_offset: log.hot_start_offset().0,
                cold_start_offset: log.cold_start_offset().map(|o| o.0),
                replica,
            })
        })
        .collect()
}
