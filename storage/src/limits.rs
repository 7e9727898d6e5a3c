//! Every bound the partition log keeps, its unit last, with why that value,
//! and the relations between them checked at compile time.
//!
//! The on-disk formats are not here: the batch's layout and its size bounds
//! are es-format's (`layout.rs`, `limits.rs`), the index's layout is
//! `format/index.rs`, and the direct-I/O page (`PAGE_BYTES`) is
//! `io/page_buf.rs`'s. Items the broker sets or checks are `pub`; the rest
//! stay in the crate.

use crate::io::page_buf::PAGE_BYTES;

// --- Segments and the log's settings ------------------------------------------

/// Default segment size: 1 GiB, as in Kafka; big enough that rolls are rare,
/// small enough that retention can free space in useful steps.
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
/// Largest segment: index positions are `u32`.
pub const SEGMENT_BYTES_MAX: u64 = u32::MAX as u64;
/// Default distance between sparse index entries: one per 4 KiB of log keeps
/// a lookup to one small read while the index stays 256x smaller than the log.
pub(crate) const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;
/// Default largest batch a caller may append (8 MiB, `LogConfig::batch_bytes_max`):
/// the broker's request limits sit below it.
pub(crate) const BATCH_BYTES_MAX_DEFAULT: usize = 8 << 20;

// Segments of the default size are valid.
const _: () = assert!(SEGMENT_BYTES_DEFAULT <= SEGMENT_BYTES_MAX);
// The default config validates: its batch limit is one the format accepts.
const _: () = assert!(BATCH_BYTES_MAX_DEFAULT <= es_format::limits::BATCH_BYTES_MAX);

// --- Writes -------------------------------------------------------------------

/// Largest single direct write: bigger writes go in pieces of this size, so
/// the aligned staging buffer of a write stays bounded however many appends
/// a write coalesced. 2 MiB reaches the disk's full speed (one 1 MiB write +
/// fdatasync already does: docs/design/direct-writes.md).
pub(crate) const DIRECT_WRITE_BYTES_MAX: usize = 2 << 20;
/// Whole pages of a batch that must have arrived before the early write
/// issues them. Every write that grows a file costs the filesystem a
/// metadata update (ext4 here), so a few large writes beat many small ones
/// (128 KiB was measured slower than no early writes over loopback, 512 KiB
/// not: docs/design/early-writes.md).
pub(crate) const EARLY_WRITE_CHUNK_BYTES: usize = 512 << 10;
/// Default bytes of recent writes kept per partition
/// (`LogConfig::recent_writes_bytes`): 1 MiB covers a consumer a fetch or
/// two behind the producer. The shard's budget bounds all its partitions
/// together.
pub(crate) const RECENT_WRITES_BYTES_DEFAULT: usize = 1 << 20;
/// Default bytes of recent writes one shard keeps across its partitions
/// (`--recent-writes-shard-bytes`): 256 of them at the default per-partition
/// 1 MiB.
pub const RECENT_WRITES_SHARD_BYTES_DEFAULT: usize = 256 << 20;
/// Dead entries (sealed segments) are swept from the recent-writes queue
/// when it reaches a multiple of this many entries: the sweep's cost is
/// spread over that many pushes.
pub(crate) const QUEUE_SWEEP_ENTRIES: usize = 64;

// Writes go in page-aligned pieces of at most this size (O_DIRECT).
const _: () = assert!(DIRECT_WRITE_BYTES_MAX.is_multiple_of(PAGE_BYTES as usize));
// An early write of one chunk goes out as one direct write.
const _: () = assert!(EARLY_WRITE_CHUNK_BYTES <= DIRECT_WRITE_BYTES_MAX);
// One partition's default recent writes fit its shard's default budget.
const _: () = assert!(RECENT_WRITES_BYTES_DEFAULT <= RECENT_WRITES_SHARD_BYTES_DEFAULT);

// --- I/O: page buffers, disk threads, descriptors ----------------------------

/// Capacity of the page buffers a shard keeps for reuse: the largest direct
/// write, so that every piece of a write of `POOLED_MIN_BYTES` or more takes
/// a kept buffer when there is one: a fresh allocation of a megabyte costs
/// more than its copy (page faults and zeroing, and the allocator hands
/// large blocks back to the kernel when freed).
pub(crate) const POOLED_BUF_BYTES: usize = DIRECT_WRITE_BYTES_MAX;
/// Smallest write that takes a kept buffer: below it an allocation is
/// cheap, and a 2 MiB buffer would be mostly idle memory.
pub(crate) const POOLED_MIN_BYTES: usize = 64 << 10;
/// Most page buffers a shard keeps for reuse (16 MiB): eight large writes
/// in flight at once never allocate.
pub(crate) const POOLED_BUFS_MAX: usize = 8;
/// Most buffers one `pwritev` takes (Linux's `UIO_MAXIOV`); a write of
/// more goes on in further calls.
pub(crate) const IOV_MAX: usize = 1024;
/// Default most disk threads per shard (`--disk-threads`): at most this many
/// writes and fsyncs of a shard run at once (more wait their turn, in
/// order). A busy partition has one write and one fsync in flight, so 16
/// serve 8 busy partitions per shard without waiting (the counts measured:
/// docs/design/disk-threads.md). Threads start as jobs need them.
pub const DISK_THREADS_DEFAULT: usize = 16;
/// Most disk threads a shard may start: beyond this the disk, not the
/// threads, is the limit (and each thread holds a stack).
pub const DISK_THREADS_MAX: usize = 64;
/// Default time slice a disk thread asks the scheduler for
/// (`--disk-thread-slice-us`, `thread_slice.rs`): a disk thread runs for
/// microseconds each time it is woken (it makes a blocking write or
/// fdatasync and sleeps in it), and with the kernel's default slice (1.4 ms
/// on two cores) it waited for a spinning shard's slice to end before it
/// could start a job (`es_disk_thread_wait_seconds`; measured in
/// docs/design/disk-threads.md).
pub const DISK_THREAD_SLICE_US_DEFAULT: u64 = 100;
/// The shortest slice Linux grants (it clamps shorter requests up).
pub const THREAD_SLICE_US_MIN: u64 = 100;
/// The longest slice Linux grants.
pub const THREAD_SLICE_US_MAX: u64 = 100_000;
/// Default descriptors for closed segments per shard (`--open-segments-max`
/// is over all shards): enough for the catch-up reads of hundreds of
/// partitions at once, a small share of the usual `ulimit -n` of a server.
pub const OPEN_SEGMENTS_MAX_DEFAULT: usize = 1024;
/// How often every nudged executor is woken: the longest a lost wake-up
/// can hold one back (docs/design/lost-wakeup.md).
pub(crate) const NUDGE_INTERVAL_MS: u64 = 10;
/// Nudges in a row an executor may leave unanswered before its thread is
/// kicked with a signal (docs/design/lost-wakeup.md): long enough that a
/// busy executor is rarely kicked, short against a start or a request.
pub(crate) const KICK_AFTER_NUDGES: u32 = 20;

// A kept buffer is allocated, and written, in whole pages (O_DIRECT).
const _: () = assert!(POOLED_BUF_BYTES.is_multiple_of(PAGE_BYTES as usize));
// Some writes are pooled: the smallest pooled write fits a kept buffer.
const _: () = assert!(POOLED_MIN_BYTES <= POOLED_BUF_BYTES);
// The default disk threads are a count the broker accepts.
const _: () = assert!(DISK_THREADS_DEFAULT <= DISK_THREADS_MAX);
// The default slice is one Linux grants (the broker refuses others).
const _: () = assert!(THREAD_SLICE_US_MIN <= DISK_THREAD_SLICE_US_DEFAULT);
const _: () = assert!(DISK_THREAD_SLICE_US_DEFAULT <= THREAD_SLICE_US_MAX);

// --- Reads --------------------------------------------------------------------

/// Smallest read of a fetch (its read-ahead when its budget is small): one
/// read usually holds several batches. The broker charges a fetch at least
/// this much before it reads.
pub const READ_CHUNK_BYTES_MIN: usize = 64 << 10;
/// Places in a partition's files whose damage a read has reported, kept so
/// that each is logged once: past it every meeting is logged again, and the
/// set stays bounded however much is damaged.
pub(crate) const DAMAGE_REPORTS_MAX: usize = 1024;

// --- Recovery -----------------------------------------------------------------

/// Bytes read per step while recovery scans a segment: few reads per
/// segment, little memory per partition opening at once.
pub(crate) const SCAN_CHUNK_BYTES: usize = 1 << 20;

// --- Cleanup: retention, compaction, reclaiming space ------------------------

/// Default time a tombstone (a keyed record with an empty value) outlives
/// the values it deleted on a compacted log: one day, as in Kafka, so a
/// consumer that reads at least daily sees every delete.
pub const DELETE_RETENTION_MS_DEFAULT: u64 = 24 * 60 * 60 * 1000;
/// Largest time setting: timestamps are `i64` milliseconds, so a duration
/// beyond this cannot be compared with one.
pub(crate) const RETENTION_MS_MAX: u64 = i64::MAX as u64;
/// Default most memory the key map of one compaction pass may hold (keys
/// plus [`MAP_ENTRY_OVERHEAD_BYTES`] each; `LogConfig::compaction_map_bytes_max`):
/// 64 MiB maps about 60 000 1 KiB keys per pass, far more short keys. A log
/// with more distinct keys is compacted over several passes. The map may
/// exceed it by one batch.
pub(crate) const COMPACTION_MAP_BYTES_MAX: usize = 64 << 20;
/// Bytes a compaction map entry costs besides its key (hash table slot,
/// `Vec` header, offset), counted against the bound above.
pub(crate) const MAP_ENTRY_OVERHEAD_BYTES: usize = 64;
/// Bytes compaction reads or writes per step before it offers the shard to
/// other tasks: one step takes a millisecond or so of CPU.
pub(crate) const COMPACTION_IO_CHUNK_BYTES: usize = 1 << 20;
/// Bytes a removed segment is shrunk by per step: small enough that one
/// step's journal commit does not hold fsyncs up noticeably; 1 MiB steps
/// reclaim a 1 GiB segment in about two seconds.
pub(crate) const RECLAIM_STEP_BYTES: u64 = 1 << 20;
/// Pause between reclaim steps, so that the shard's own fsyncs get between
/// them.
pub(crate) const RECLAIM_STEP_PAUSE_US: u64 = 500;
/// Longest wait for reads still holding a segment's file handle before the
/// file is shrunk under them; past it the file is unlinked whole (the
/// kernel frees it when the last reader closes it).
pub(crate) const RECLAIM_READERS_WAIT_MS: u64 = 10_000;
/// How often the wait for readers looks again: short next to a read.
pub(crate) const READERS_POLL_MS: u64 = 5;

// The default tombstone retention is a setting the policy accepts.
const _: () = assert!(DELETE_RETENTION_MS_DEFAULT <= RETENTION_MS_MAX);
// The wait for readers looks at least once before it gives up.
const _: () = assert!(READERS_POLL_MS <= RECLAIM_READERS_WAIT_MS);

// --- Cold tier ----------------------------------------------------------------

/// Bytes copied per read/write step when a segment moves to the cold tier:
/// large enough for few io_uring round trips, small enough to bound memory
/// and let other tasks on the shard run between steps.
pub(crate) const COLD_COPY_CHUNK_BYTES: usize = 1 << 20;
