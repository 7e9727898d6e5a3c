//! The partition log: `PartitionLog`, its segments, and what keeps them
//! consistent across appends, crashes and restarts.
//!
//! - `partition`: the handle, its state (`LogState`, `Inner`) and its queries.
//! - `open`: opening a partition directory (recovery of each segment).
//! - `append`: placing batches (offsets and file positions) and closing.
//! - `entries`: a replicated log's Raft entries (version 2 batches) and
//!   their index marks.
//! - `write_loop`: the task that writes placed batches and hands the
//!   partition to the fsync batcher; rolls to a new segment.
//! - `rewind`: a write refused for want of room or descriptors.
//! - `room`: probing for room after a full disk; a replicated log's
//!   unfinished entry cut before its Raft group starts again.
//! - `segment`: one segment's accounting (offsets, bytes, sparse index).
//! - `segment_set`: the partition's segments, changed only through named
//!   mutations that assert the set's invariants.
//! - `truncate`: cutting a replicated log's uncommitted suffix.
//! - `recovery`: scanning a segment at open, trimming a torn tail.
//! - `fsync`: the shard's fsync batcher (group commit): the log's
//!   `durable` stage, so it lives with the log it advances.
//! - `watermark`: the `written` and `durable` marks appends wait on.
//! - `write_failure`: which failed writes poison the log and which rewind
//!   it: the log's decision, so it lives here.
//! - `faults`: fault-injection points armed through `PartitionLog`.
//!
//! Reads (`read/`), cleanup (`cleanup/`) and the cold tier (`tier/`) add
//! methods to `PartitionLog` from their own rooms.

mod append;
mod close;
pub(crate) mod entries;
pub(crate) mod faults;
pub(crate) mod fsync;
mod open;
pub(crate) mod partition;
pub(crate) mod read_hold;
pub(crate) mod recovery;
pub(crate) mod reset;
mod rewind;
mod room;
pub(crate) mod segment;
pub(crate) mod segment_set;
pub(crate) mod truncate;
pub(crate) mod watermark;
pub(crate) mod write_failure;
mod write_loop;
