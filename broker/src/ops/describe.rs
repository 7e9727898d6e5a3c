//! What a partition is, on its shard: its offsets (describe), and its
//! config applied (configure).

use crate::error::ApiError;
use crate::shard::message::PartitionState;
use crate::shard::Shard;
use crate::topics::topic::TopicConfig;

use super::log_of;

/// Applies `config` to partitions of `topic` this shard owns.
pub(super) fn configure(
    shard: &Shard,
    topic: &str,
    config: &TopicConfig,
    partitions: &[u32],
) -> Result<(), ApiError> {
    for &p in partitions {
        let log = log_of(shard, topic, p)?;
        log.set_config(config.log_config()).map_err(ApiError::storage)?;
    }
    Ok(())
}

/// The offsets of partitions of `topic` this shard owns.
pub(super) fn describe(
    shard: &Shard,
    topic: &str,
    partitions: &[u32],
) -> Result<Vec<PartitionState>, ApiError> {
    partitions
        .iter()
        .map(|&p| {
            let log = log_of(shard, topic, p)?;
            Ok(PartitionState {
                partition: p,
                log_start_offset: log.log_start_offset().0,
                high_watermark: log.committed_offset().0,
                hot_start_offset: log.hot_start_offset().0,
                cold_start_offset: log.cold_start_offset().map(|o| o.0),
            })
        })
        .collect()
}
