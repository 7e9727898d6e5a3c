//! I/O beneath the log, shared by every partition of a shard: what
//! glommio and io_uring do not give as the log needs it.
//!
//! - `page_buf`: page-aligned buffers (`PageBuf`, `ArrivingPages`) and
//!   the page size (`PAGE_BYTES`) that direct I/O aligns to; every `unsafe`
//!   that touches a page buffer's memory is in this one module.
//! - `disk_threads`: a shard's own threads for direct writes and
//!   fdatasyncs (`pool`: the threads; `jobs`: what they run).
//! - `cached`: reads served from the page cache without io_uring.
//! - `segment_files`: the shard's bounded cache of closed segments'
//!   descriptors.
//! - `dirs`: directory operations and file paths.
//! - `files`: the log's file helpers (open, create, write all, read
//!   exactly, write a small file durably, index files).
//! - `device`: the disk's properties, read once per shard.
//! - `thread_slice`: a short scheduler slice for disk threads.
//! - `nudge`: a bound on a lost wake-up of the shard's executor (its
//!   io_uring sleep): I/O plumbing, not log state.

pub(crate) mod cached;
pub(crate) mod device;
pub(crate) mod dirs;
pub(crate) mod disk_threads;
pub(crate) mod files;
pub(crate) mod nudge;
pub(crate) mod page_buf;
pub(crate) mod segment_files;
pub(crate) mod thread_slice;
