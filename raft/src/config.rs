//! openraft's configuration for a partition group.
//!
//! Purge is retention (the spec's §5.2, docs/design/raft-snapshots.md):
//! openraft builds no snapshot and purges nothing on its own; the broker's
//! cleanup pass does both through `PartitionRaft::retain_below`.

use std::time::Duration;

use openraft::{Config, SnapshotPolicy};

/// openraft's `(election_timeout_min, election_timeout_max)` for es's
/// `election_ms`. openraft runs no election timer of ours
/// (`election_timer` does, drawing in [`election_draw`]); of these it
/// uses the min as a vote request's deadline and the max as its leader
/// lease: a voter refuses every vote until the lease has passed since it
/// last heard from its leader. A lease of `election_ms` (and a
/// millisecond: openraft wants max > min) is pre-vote's own bound, so a
/// pre-vote won is a vote that can be won, and the first replica whose
/// clock expires is elected in one round.
pub fn openraft_timeouts(election_ms: u64) -> (u64, u64) {
    (election_ms, election_ms.saturating_add(1))
}

/// The `[min, max]` a replica of a group with openraft config `config`
/// draws its election timeout from: the election timeout to twice that
/// (Raft's spread, so one replica usually campaigns alone).
pub fn election_draw(config: &Config) -> (Duration, Duration) {
    election_bounds(config.election_timeout_min)
}

/// The bounds of the draw for an election timeout of `election_ms`.
pub fn election_bounds(election_ms: u64) -> (Duration, Duration) {
    let min = Duration::from_millis(election_ms);
    (min, min * 2)
}

/// openraft's leader lease of a group with openraft config `config`: a
/// replica grants a pre-vote only past it.
pub fn leader_lease(config: &Config) -> Duration {
    Duration::from_millis(config.election_timeout_max)
}

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
        election_timeout_min: openraft_timeouts(election_ms).0,
        election_timeout_max: openraft_timeouts(election_ms).1,
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
        assert_eq!(
            election_draw(&c),
            (Duration::from_millis(400), Duration::from_millis(800))
        );
        assert_eq!(leader_lease(&c), Duration::from_millis(401));
        assert!(
            partition_config("t", 500, 400).is_err(),
            "heartbeats within the election timeout"
        );
    }
}
