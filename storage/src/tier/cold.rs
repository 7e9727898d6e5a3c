//! `ColdStore`: where segments go when they leave the hot tier of a tiered
//! partition, instead of being deleted.
//!
//! The partition log (`PartitionLog`) drives it; a backend only stores and
//! returns bytes. The one shipped backend is a local directory
//! ([`LocalDirColdStore`](crate::LocalDirColdStore)); an object store (S3,
//! GCS, ...) can be added by implementing this trait, without touching the
//! broker or the log. What a backend must guarantee:
//!
//! - **Whole or absent.** `list` shows a segment only once `put` stored all
//!   of it (log and index) durably. A crash during `put` or `delete` leaves
//!   the segment either listed and whole, or not listed. Objects stores get
//!   this by uploading the log and index first and writing a small
//!   "complete" object (or the listed key) last; the local directory by
//!   writing temporary files and renaming.
//! - **Durable before Ok.** `put` resolves `Ok` only once a crash (of this
//!   machine, or of the store) can no longer lose the segment: the hot copy
//!   is deleted right after.
//! - **Idempotent.** `put` of a base that is already stored replaces it (a
//!   crash between `put` and the hot delete makes the log put it again), and
//!   `delete` of a missing segment is `Ok`.
//! - **Immutable segments.** A stored segment is never changed in place, so
//!   readers may cache what they read.
//!
//! `partition` names a partition as `<topic>/<partition>`; backends map it
//! to a directory or key prefix. Bases are segment base offsets; the index
//! bytes are the segment's `.index` file (docs/storage.md), which the log
//! reads back to find positions.
//!
//! Futures are `!Send`: a store lives on the shard that owns the partitions
//! it serves, like everything else there. Backends must not block the shard
//! (io_uring for files; an async HTTP client for an object store).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use crate::{Offset, Result};

/// What `ColdStore` methods return: a future local to the shard.
pub type ColdFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + 'a>>;

/// What the cold store keeps about one segment (its index footer says the
/// same; a backend may store it as object metadata).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdSegmentInfo {
    /// Offset of the segment's first possible record.
    pub base: Offset,
    /// Offset after its last record.
    pub next_offset: Offset,
    /// Exact length of its log.
    pub log_bytes: u64,
    /// Largest record timestamp in it (`i64::MIN` if it holds none).
    pub max_timestamp_ms: i64,
}

/// Storage for the cold tier. See the module documentation for the contract.
pub trait ColdStore {
    /// Stores a segment: its log, read from `log_path` (a sealed local file
    /// of exactly `info.log_bytes` bytes that nobody writes any more), and
    /// its index bytes. `Ok` only once both are durable.
    fn put<'a>(
        &'a self,
        partition: &'a str,
        info: ColdSegmentInfo,
        log_path: &'a Path,
        index: Vec<u8>,
    ) -> ColdFuture<'a, ()>;

    /// Every complete segment of `partition`, ascending by base. A partition
    /// with nothing stored is an empty list, not an error.
    fn list<'a>(&'a self, partition: &'a str) -> ColdFuture<'a, Vec<ColdSegmentInfo>>;

    /// Up to `len` bytes of segment `base`'s log from byte `position`; fewer
    /// only where the log ends.
    fn read<'a>(
        &'a self,
        partition: &'a str,
        base: Offset,
        position: u64,
        len: usize,
    ) -> ColdFuture<'a, Vec<u8>>;

    /// The index bytes stored with segment `base`.
    fn read_index<'a>(&'a self, partition: &'a str, base: Offset) -> ColdFuture<'a, Vec<u8>>;

    /// Deletes segment `base` durably. A missing segment is `Ok`.
    fn delete<'a>(&'a self, partition: &'a str, base: Offset) -> ColdFuture<'a, ()>;

    /// Deletes everything stored for `partition` (its topic was deleted).
    fn delete_partition<'a>(&'a self, partition: &'a str) -> ColdFuture<'a, ()>;
}
