//! es-storage: the partition log.
//!
//! Owns segments and their sparse indexes, the shard's fsync batcher (group
//! commit), crash recovery, seek by time, and cleanup: retention, key
//! compaction and the cold tier. Knows nothing of networking or of the wire
//! protocol. Everything here runs on a glommio executor (io_uring); nothing
//! blocks a shard. See docs/storage.md for the format byte by byte, the
//! durability contract and the cleanup protocols.
//!
//! The record-batch format itself (layout, Offset, records, check, encode)
//! is es-format's (storage/format), pure and shared with the wire codec;
//! `batch`, `record` and `offset` below are its modules, so
//! `crate::batch::..` and `es_storage::batch::..` name it.

pub use es_format::batch;
use es_format::{offset, record};

mod batch_buf;
mod cached;
mod cleanup;
mod cold;
mod cold_dir;
mod compaction;
mod config;
mod device;
mod direct_buf;
mod dirs;
mod disk_threads;
mod early;
mod error;
mod faults;
mod fsync;
pub mod index;
mod metric_help;
mod nudge;
mod partition;
mod policy;
mod read;
mod recent;
mod recent_budget;
mod reclaim;
mod recovery;
mod retention;
mod segment;
mod segment_files;
mod swap;
mod thread_slice;
mod tier;
mod watermark;
mod write_failure;
mod writer;

pub use batch_buf::{BatchBuf, ReceivingBatch};
pub use cleanup::CleanupReport;
pub use cold::{ColdFuture, ColdSegmentInfo, ColdStore};
pub use cold_dir::{LocalDirColdStore, COLD_COPY_CHUNK_BYTES};
pub use compaction::{COMPACTION_IO_CHUNK_BYTES, COMPACTION_MAP_BYTES_MAX, MAP_ENTRY_OVERHEAD_BYTES};
pub use config::{
    LogConfig, BATCH_BYTES_MAX_DEFAULT, INDEX_INTERVAL_BYTES_DEFAULT, SEGMENT_BYTES_DEFAULT,
    SEGMENT_BYTES_MAX,
};
pub use device::read_device_properties;
pub use dirs::{
    create_dir_all, create_dir_all_durable, index_path, log_path, remove_if_exists, rename_if_exists,
    sync_dir,
};
pub use disk_threads::{
    start_disk_threads, DISK_THREADS_DEFAULT, DISK_THREADS_MAX, DISK_THREAD_SLICE_US_DEFAULT,
};
pub use early::{EarlyTicket, EarlyWrite, EARLY_WRITE_CHUNK_BYTES};
pub use error::{Result, StorageError};
pub use faults::{FaultPoint, NoSpaceAt};
pub use fsync::{FsyncBatcher, FsyncStats, SyncFuture, SyncTarget};
pub use metric_help::{MetricHelp, MetricKind, STORAGE_METRICS};
pub use nudge::{Nudge, NUDGE_INTERVAL};
pub use offset::Offset;
pub use partition::{Appended, OpenReport, PartitionLog};

pub use policy::{CleanupPolicy, DELETE_RETENTION_MS_DEFAULT, RETENTION_MS_MAX};
pub use read::{BatchesRead, LimitedRecords, RecordsRead};
pub use recent::{PAGE_BYTES, RECENT_WRITES_BYTES_DEFAULT};
pub use recent_budget::{
    recent_writes_shard_held_bytes, set_recent_writes_shard_bytes, RECENT_WRITES_SHARD_BYTES_DEFAULT,
};
pub use reclaim::{free_dir, RECLAIM_READERS_WAIT_MS, RECLAIM_STEP_BYTES, RECLAIM_STEP_PAUSE_US};
pub use record::{ProducerStamp, Record, StoredRecord};
pub use recovery::{accept_data_loss, set_accept_data_loss, Lost, Quarantined, Trimmed};
pub use segment::RawBatch;
pub use segment_files::{open_segment_files, set_open_segments_max, OPEN_SEGMENTS_MAX_DEFAULT};
pub use swap::{Leftovers, MANIFEST_NAME};
pub use thread_slice::{ask_thread_slice_us, THREAD_SLICE_US_MAX, THREAD_SLICE_US_MIN};
pub use tier::ColdTier;
pub use watermark::{WaitError, Watermark};
pub use write_failure::{is_no_space, os_error, out_of_descriptors, storage_out_of_descriptors};
pub use writer::DIRECT_WRITE_BYTES_MAX;
