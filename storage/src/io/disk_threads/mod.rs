//! `DiskThreads`: a shard's own threads for the segment writer's direct
//! writes and fdatasyncs.
//!
//! Through io_uring, a direct write that grows the file and every
//! fdatasync are handed to the kernel's io-wq workers, which run them on
//! the shard's core and wake the shard at the end: slower and far less
//! steady than the same calls made blocking from a thread of their own
//! (`storage/examples/write_probe.rs`; docs/storage.md "Disk threads", the
//! measurements in docs/design/disk-threads.md). So a shard may start a
//! few threads that make exactly those calls: the shard queues a job (a page-aligned
//! buffer and a position, or a sync) without blocking, a thread makes the
//! blocking call, and the job's answer wakes the shard's waiting task.
//! A write may ask for a sync right after it ([`DiskThreads::write_then_sync`]):
//! the thread that wrote syncs at once, with no round trip through the
//! shard, and the shard hands that sync to the fsync batcher as the
//! partition's sync in flight. Nothing else changes: the write loop still
//! writes one run at a time, the fsync batcher still has one sync in
//! flight per partition, and an error still poisons the partition.
//!
//! Per shard, so the handle lives in a thread local set when the shard
//! starts ([`start_disk_threads`]); without it (0 threads, tools, most
//! tests) the writer uses glommio's `DmaFile` through io_uring. A shard
//! starts one thread at once and another whenever a job finds none idle,
//! up to its count: an idle shard holds one thread, a busy one as many as
//! its partitions keep busy. The threads end when the shard's thread does
//! (the queue's last sender drops).

mod jobs;
mod pool;

pub(crate) use jobs::{SyncAfter, WriteBuf};
pub use pool::start_disk_threads;
pub(crate) use pool::ThreadedFile;
// `PageBuf` lives in `io/page_buf.rs` with all its `unsafe`.
pub(crate) use crate::io::page_buf::PageBuf;
