//! openraft's configuration for a partition group.
//!
//! Purge is retention (the spec's §5.2, docs/design/raft-snapshots.md):
//! openraft builds no snapshot and purges nothing on its own; the broker's
//! cleanup pass does both through `PartitionRaft::retain_below`.

use openraft::{Config, SnapshotPolicy};

/// The config of a partition group: `heartbeat_ms`, and elections after
/// `election_ms` to twice that without a leader.
// openraft's ConfigError is what `Config::validate` returns.
#[allow(clippy::result_large_err)]
pub fn partition_config(
    name: &str,
    heartbeat_ms: u64,
    election_ms: u64,
) -> Result<Config, openraft::ConfigError> {
    Config {
        cluster_name: name.to_string(),
        heartbeat_interval: heartbeat_ms,
        election_timeout_min: election_ms,
        election_timeout_max: election_ms * 2,
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: u64::MAX,
        ..Config::default()
    }
    .validate()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_group_never_purges_on_its_own() {
        let c = partition_config("t", 50, 400).unwrap();
        assert_eq!(c.snapshot_policy, SnapshotPolicy::Never);
        assert_eq!(c.max_in_snapshot_log_to_keep, u64::MAX);
        assert_eq!((c.election_timeout_min, c.election_timeout_max), (400, 800));
        assert!(
            partition_config("t", 500, 400).is_err(),
            "heartbeats within the election timeout"
        );
    }
}
