//! Every bound of es-tools, in one place, its unit last.

/// Bytes read from a segment file per step of a scan: the broker's
/// recovery reads the same amount (`SCAN_CHUNK_BYTES`).
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Buffer of a segment copied into or out of an archive (dump's reads,
/// its archive writes, restore's segment writes): a few large syscalls
/// per segment instead of one per 8 KiB (std's copy buffer).
pub const COPY_BUFFER_BYTES: usize = 1 << 20;

/// Bytes of an entry hashed as one piece by the SHA-256 thread (sha.rs):
/// an entry smaller than this is hashed without a thread.
pub const HASH_CHUNK_BYTES: usize = 1 << 20;

/// Chunks waiting for the SHA-256 thread: the memory a stream's hashing
/// may hold, (this + 2) x HASH_CHUNK_BYTES.
pub const HASH_QUEUE_CHUNKS: usize = 4;

/// Buffer in front of an archive being read (and what gzip detection peeks).
pub const ARCHIVE_BUFFER_BYTES: usize = 1 << 20;

/// Largest JSON entry of an archive read into memory (a manifest or a
/// trailer of millions of segments still fits); a larger one is refused.
pub const JSON_BYTES_MAX: u64 = 64 << 20;

/// Largest groups-log record (broker/src/groups/log.rs `RECORD_BYTES_MAX`):
/// a larger length is garbage.
pub const GROUPS_RECORD_BYTES_MAX: usize = 64 << 20;

/// Log bytes between two sparse-index entries of a restored segment: the
/// broker's `index_interval_bytes` (es-storage's
/// `INDEX_INTERVAL_BYTES_DEFAULT`), so a restored index is byte for byte
/// what the broker writes.
pub const INDEX_INTERVAL_BYTES: u32 = 4096;

/// zstd's compression level for `dump --compress zstd`: its default, a
/// few hundred MB/s per core with a ratio near gzip's default.
#[cfg(feature = "zstd")]
pub const ZSTD_LEVEL: i32 = 3;

/// Seconds between two progress lines on stderr of a long dump or restore.
pub const PROGRESS_INTERVAL_SECS: u64 = 1;

const _: () = assert!(JSON_BYTES_MAX <= usize::MAX as u64, "a JSON entry fits in memory");
