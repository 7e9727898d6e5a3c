//! es-storage: the partition log.
//!
//! Owns segments and their sparse indexes, the on-disk batch format, the
//! shard's fsync batcher (group commit), crash recovery and seek by time.
//! Knows nothing of networking or of the wire protocol. Everything here runs
//! on a glommio executor (io_uring); nothing blocks a shard. See
//! docs/storage.md for the format byte by byte and the durability contract.

pub mod batch;
mod config;
mod dirs;
mod error;
mod fsync;
pub mod index;
mod offset;
mod partition;
mod record;
mod recovery;
mod segment;
mod watermark;

pub use config::{
    LogConfig, BATCH_BYTES_MAX_DEFAULT, INDEX_INTERVAL_BYTES_DEFAULT, SEGMENT_BYTES_DEFAULT,
    SEGMENT_BYTES_MAX,
};
pub use dirs::{create_dir_all, index_path, log_path, sync_dir};
pub use error::{Result, StorageError};
pub use fsync::{FsyncBatcher, FsyncStats, SyncTarget};
pub use offset::Offset;
pub use partition::{Appended, OpenReport, PartitionLog};
pub use record::{ProducerStamp, Record, StoredRecord};
pub use recovery::Trimmed;
pub use segment::RawBatch;
pub use watermark::{WaitError, Watermark};
