//! es-storage: the partition log.
//!
//! Owns segments and their sparse indexes, the shard's fsync batcher (group
//! commit), crash recovery, seek by time, and cleanup: retention, key
//! compaction and the cold tier. Knows nothing of networking or of the
//! wire protocol. Everything here runs on a glommio executor (io_uring);
//! nothing blocks a shard. See docs/storage.md for the
//! format byte by byte, the durability contract and the cleanup protocols.
//!
//! Rooms, each with a `mod.rs` that says what lives there and why:
//!
//! - `format/`: the on-disk index format. The record-batch format itself
//!   (layout, Offset, records, check, encode) is es-format's
//!   (storage/format), pure and shared with the wire codec; `batch`,
//!   `record` and `offset` below are its modules, so `crate::batch::..`
//!   and `es_storage::batch::..` name it.
//! - `log/`: `PartitionLog`, its segments, append, recovery, group commit.
//! - `write/`: how placed batches reach the file (writer, buffers).
//! - `read/`: reads by offset and by time.
//! - `cleanup/`: retention, compaction and their crash-safe protocols.
//! - `tier/`: the cold tier.
//! - `io/`: page-aligned buffers, disk threads, cached reads, file helpers.
//!
//! At the root: `config` (per-partition settings), `limits` (every bound,
//! with the relations between them checked at compile time), `error` (the
//! crate's error type) and `metric_help` (every metric the crate emits).

pub use es_format::batch;
use es_format::{offset, record};

mod cleanup;
mod config;
mod error;
mod format;
mod io;
pub mod limits;
mod log;
mod metric_help;
mod read;
mod tier;
mod write;

pub use format::index;

pub use cleanup::pass::CleanupReport;
pub use cleanup::policy::CleanupPolicy;
pub use cleanup::reclaim::free_dir;
pub use cleanup::swap::{Leftovers, MANIFEST_NAME};
pub use config::LogConfig;
pub use error::{Result, StorageError};
pub use io::device::read_device_properties;
pub use io::dirs::{
    create_dir_all, create_dir_all_durable, index_path, list_names, log_path, remove_if_exists,
    rename_if_exists, sync_dir,
};
pub use io::disk_threads::start_disk_threads;
pub use io::files::{read_file, write_file_atomic};
pub use io::nudge::{kicks as executor_kicks, Nudge};
pub use io::page_buf::PAGE_BYTES;
pub use io::segment_files::{open_segment_files, set_open_segments_max};
pub use io::thread_slice::ask_thread_slice_us;
pub use log::entries::{EntryBody, PlacedEntry, Stamping};
pub use log::faults::{FaultPoint, NoSpaceAt};
pub use log::fsync::{FsyncBatcher, FsyncStats, SyncFuture, SyncTarget};
pub use log::partition::{Appended, OpenReport, PartitionLog};
pub use log::read_hold::ReadHold;
pub use log::recovery::{accept_data_loss, set_accept_data_loss, Lost, Quarantined, Trimmed};
pub use log::watermark::{WaitError, Watermark};
pub use log::write_failure::{is_no_space, os_error, out_of_descriptors, storage_out_of_descriptors};
pub use metric_help::{MetricHelp, MetricKind, STORAGE_METRICS};
pub use offset::Offset;
pub use read::entries::{EntryCursor, EntryRun, PlacedBatch};
pub use read::fetch::{BatchesRead, LimitedRecords, RecordsRead};
pub use read::scan::RawBatch;
pub use record::{ProducerStamp, Record, StoredRecord};
pub use tier::cold::{ColdFuture, ColdSegmentInfo, ColdStore};
pub use tier::cold_dir::LocalDirColdStore;
pub use tier::state::ColdTier;
pub use write::batch_buf::{BatchBuf, ReceivingBatch};
pub use write::early::{EarlyTicket, EarlyWrite};
pub use write::recent_budget::{recent_writes_shard_held_bytes, set_recent_writes_shard_bytes};
