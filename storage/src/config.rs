//! Per-partition log settings and their bounds.

use std::time::Duration;

use es_format::limits::BATCH_BYTES_MAX;

use crate::limits::{
    BATCH_BYTES_MAX_DEFAULT, COMPACTION_MAP_BYTES_MAX, INDEX_INTERVAL_BYTES_DEFAULT,
    RECENT_WRITES_BYTES_DEFAULT, SEGMENT_BYTES_DEFAULT, SEGMENT_BYTES_MAX,
};
use crate::{CleanupPolicy, StorageError};

/// How a partition log rolls segments and indexes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment when the active one would pass this size.
    pub segment_bytes: u64,
    /// Roll when the active segment has been open this long (measured from
    /// when this process opened or created it). `None`: never by age.
    pub segment_age: Option<Duration>,
    /// Add an index entry after this many bytes of log.
    pub index_interval_bytes: u32,
    /// Refuse an append whose encoded batch is larger than this.
    pub batch_bytes_max: usize,
    /// Retention, compaction and tiering (see [`CleanupPolicy`]).
    pub cleanup: CleanupPolicy,
    /// Most memory one compaction pass's key map may use; more distinct
    /// keys take several passes. Default `COMPACTION_MAP_BYTES_MAX`.
    pub compaction_map_bytes_max: usize,
    /// Write the active segment with direct I/O (`O_DIRECT`), past the page
    /// cache (see `SegmentWriter`). Off, or refused by the filesystem:
    /// buffered writes.
    pub direct_writes: bool,
    /// Bytes of the newest writes kept in memory for readers that tail the
    /// log (direct writes only; buffered ones are in the page cache).
    /// Default `RECENT_WRITES_BYTES_DEFAULT`.
    pub recent_writes_bytes: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            segment_age: None,
            index_interval_bytes: INDEX_INTERVAL_BYTES_DEFAULT,
            batch_bytes_max: BATCH_BYTES_MAX_DEFAULT,
            cleanup: CleanupPolicy::default(),
            compaction_map_bytes_max: COMPACTION_MAP_BYTES_MAX,
            direct_writes: true,
            recent_writes_bytes: RECENT_WRITES_BYTES_DEFAULT,
        }
    }
}

impl LogConfig {
    /// Checks every bound; the log refuses to open with a bad config.
    pub fn validate(&self) -> Result<(), StorageError> {
        if self.segment_bytes == 0 || self.segment_bytes > SEGMENT_BYTES_MAX {
            return Err(StorageError::Invalid(format!(
                "segment_bytes must be in 1..={SEGMENT_BYTES_MAX}, got {}",
                self.segment_bytes
            )));
        }
        if self.index_interval_bytes == 0 {
            return Err(StorageError::Invalid(
                "index_interval_bytes must be at least 1".into(),
            ));
        }
        if self.batch_bytes_max == 0 || self.batch_bytes_max > BATCH_BYTES_MAX {
            return Err(StorageError::Invalid(format!(
                "batch_bytes_max must be in 1..={BATCH_BYTES_MAX}, got {}",
                self.batch_bytes_max
            )));
        }
        if self.compaction_map_bytes_max == 0 {
            return Err(StorageError::Invalid(
                "compaction_map_bytes_max must be at least 1".into(),
            ));
        }
        if self.segment_age.is_some_and(|d| d.is_zero()) {
            return Err(StorageError::Invalid("segment_age must be positive".into()));
        }
        self.cleanup.validate()
    }
}
