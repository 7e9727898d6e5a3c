//! What a partition's background cleanup may do: retention by age and size,
//! key compaction with tombstones, and tiering to a cold store. Part of
//! [`LogConfig`](crate::LogConfig); changed at run time with `set_config`.

use crate::limits::{DELETE_RETENTION_MS_DEFAULT, RETENTION_MS_MAX};
use crate::StorageError;

/// Per-partition cleanup settings. `Default` keeps everything forever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Retention applies: closed segments past `retention_ms` or
    /// `retention_bytes` leave the hot tier (deleted, or moved when `tiered`).
    pub delete: bool,
    /// Key compaction applies: closed segments keep only the latest record
    /// per key; records without a key are refused.
    pub compact: bool,
    /// Remove a closed segment once its newest record is older than this.
    pub retention_ms: Option<u64>,
    /// Remove the oldest closed segments while the partition (hot tier,
    /// active segment included) holds more than this.
    pub retention_bytes: Option<u64>,
    /// A tombstone that is the latest record of its key is dropped by
    /// compaction once its timestamp is this far in the past.
    pub delete_retention_ms: u64,
    /// Segments that retention removes go to the cold store instead of
    /// being deleted.
    pub tiered: bool,
    /// Delete a cold segment once its newest record is older than this.
    pub cold_retention_ms: Option<u64>,
    /// Delete the oldest cold segments while the cold tier of the partition
    /// holds more than this.
    pub cold_retention_bytes: Option<u64>,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy {
            delete: true,
            compact: false,
            retention_ms: None,
            retention_bytes: None,
            delete_retention_ms: DELETE_RETENTION_MS_DEFAULT,
            tiered: false,
            cold_retention_ms: None,
            cold_retention_bytes: None,
        }
    }
}

impl CleanupPolicy {
    /// Checks every bound and combination.
    pub fn validate(&self) -> Result<(), StorageError> {
        let invalid = |m: &str| Err(StorageError::Invalid(m.to_string()));
        if !self.delete && !self.compact {
            return invalid("a cleanup policy needs delete, compact or both");
        }
        for (name, v) in [
            ("retention_ms", self.retention_ms),
            ("retention_bytes", self.retention_bytes),
            ("cold_retention_ms", self.cold_retention_ms),
            ("cold_retention_bytes", self.cold_retention_bytes),
        ] {
            if v == Some(0) {
                return Err(StorageError::Invalid(format!(
                    "{name} must be positive (or unset for no limit)"
                )));
            }
        }
        for (name, v) in [
            ("retention_ms", self.retention_ms),
            ("cold_retention_ms", self.cold_retention_ms),
            ("delete_retention_ms", Some(self.delete_retention_ms)),
        ] {
            if v.is_some_and(|ms| ms > RETENTION_MS_MAX) {
                return Err(StorageError::Invalid(format!(
                    "{name} must be at most {RETENTION_MS_MAX}"
                )));
            }
        }
        if self.tiered && self.compact {
            // A tombstone dropped from the hot tier would let an older value
            // of its key, already in the cold tier, come back to readers.
            return invalid("tiered storage is not supported on compacted topics");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert!(CleanupPolicy::default().validate().is_ok());
        let ok = CleanupPolicy {
            compact: true,
            retention_ms: Some(5),
            ..CleanupPolicy::default()
        };
        assert!(ok.validate().is_ok());
        for bad in [
            CleanupPolicy {
                delete: false,
                ..CleanupPolicy::default()
            },
            CleanupPolicy {
                retention_bytes: Some(0),
                ..CleanupPolicy::default()
            },
            CleanupPolicy {
                cold_retention_ms: Some(u64::MAX),
                ..CleanupPolicy::default()
            },
            CleanupPolicy {
                tiered: true,
                compact: true,
                ..CleanupPolicy::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
