//! `ControllerConfig`: the controller group's settings, and openraft's
//! configuration built from them.

use std::time::Duration;

use es_storage::{CleanupPolicy, LogConfig};
use openraft::{Config, SnapshotPolicy};

use crate::limits::{
    CONTROLLER_LOG_KEEP_ENTRIES, CONTROLLER_PROPOSE_TIMEOUT_MS_DEFAULT,
    CONTROLLER_READ_BARRIER_TIMEOUT_MS_DEFAULT, CONTROLLER_SEGMENT_BYTES, CONTROLLER_SNAPSHOT_EVERY_DEFAULT,
};

/// The controller's settings (the broker fills them from its flags).
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// `--raft-heartbeat-ms`.
    pub heartbeat_ms: u64,
    /// `--raft-election-timeout-ms`: elections after this to twice this
    /// without a leader.
    pub election_timeout_ms: u64,
    /// How long a proposal waits to be committed and applied before its
    /// outcome is reported unknown.
    pub propose_timeout: Duration,
    /// How long a read barrier waits in all.
    pub read_barrier_timeout: Duration,
    /// Entries between two snapshots of the state.
    pub snapshot_every: u64,
    /// Entries of the log kept behind the last snapshot when the log is
    /// purged, after each snapshot (openraft's
    /// `max_in_snapshot_log_to_keep`).
    pub keep_entries: u64,
    /// The uuid this node proposes when it is the first leader of a new
    /// cluster (`None`: a random one). The first one committed stays.
    pub proposed_uuid: Option<String>,
    /// The controller log's settings.
    pub log: LogConfig,
}

impl Default for ControllerConfig {
    fn default() -> ControllerConfig {
        ControllerConfig {
            heartbeat_ms: 150,
            election_timeout_ms: 1500,
            propose_timeout: Duration::from_millis(CONTROLLER_PROPOSE_TIMEOUT_MS_DEFAULT),
            read_barrier_timeout: Duration::from_millis(CONTROLLER_READ_BARRIER_TIMEOUT_MS_DEFAULT),
            snapshot_every: CONTROLLER_SNAPSHOT_EVERY_DEFAULT,
            keep_entries: CONTROLLER_LOG_KEEP_ENTRIES,
            proposed_uuid: None,
            log: LogConfig {
                segment_bytes: CONTROLLER_SEGMENT_BYTES,
                ..LogConfig::default()
            },
        }
    }
}

impl ControllerConfig {
    /// How long to wait for a leader when none is known: two election
    /// timeouts at their longest.
    pub fn leader_wait(&self) -> Duration {
        Duration::from_millis(self.election_timeout_ms.saturating_mul(4))
    }

    /// openraft's config for the controller group. Snapshots every
    /// `snapshot_every` entries, and after each one purges the log up to
    /// `keep_entries` behind it (a follower behind the purge point gets
    /// the snapshot: `snapshot_image.rs`); what is purged is then deleted
    /// ([`log_config`](Self::log_config)), so the log stays bounded.
    // openraft's ConfigError is what `Config::validate` returns.
    #[allow(clippy::result_large_err)]
    pub fn raft_config(&self) -> Result<Config, openraft::ConfigError> {
        Config {
            cluster_name: "es-controller".to_string(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: crate::config::openraft_timeouts(self.election_timeout_ms).0,
            election_timeout_max: crate::config::openraft_timeouts(self.election_timeout_ms).1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every.max(1)),
            max_in_snapshot_log_to_keep: self.keep_entries,
            ..Config::default()
        }
        .validate()
    }

    /// The controller log's settings: `log`, with a cleanup that deletes
    /// every closed segment wholly below the purge point (the log store's
    /// cleanup limit), and nothing above it.
    pub fn log_config(&self) -> LogConfig {
        LogConfig {
            cleanup: CleanupPolicy {
                delete: true,
                compact: false,
                tiered: false,
                retention_ms: None,
                retention_bytes: Some(1),
                ..CleanupPolicy::default()
            },
            ..self.log.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_snapshots_and_purges_behind_them() {
        let c = ControllerConfig {
            snapshot_every: 7,
            keep_entries: 3,
            ..ControllerConfig::default()
        };
        let r = c.raft_config().unwrap();
        assert_eq!(r.snapshot_policy, SnapshotPolicy::LogsSinceLast(7));
        assert_eq!(r.max_in_snapshot_log_to_keep, 3);
        let l = c.log_config();
        assert!(l.cleanup.delete && l.cleanup.retention_bytes == Some(1));
        assert_eq!(
            crate::config::election_draw(&r),
            (Duration::from_millis(1500), Duration::from_millis(3000))
        );
        assert_eq!(c.leader_wait(), Duration::from_secs(6));
    }
}
