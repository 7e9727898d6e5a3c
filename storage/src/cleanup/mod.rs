//! Background cleanup of a partition: what leaves the log, and how each
//! change survives a crash.
//!
//! - `pass`: one cleanup pass (`PartitionLog::cleanup`) and its report.
//! - `policy`: what a partition's cleanup may do.
//! - `retention`: oldest closed segments leave the hot tier (deleted or
//!   moved to the cold tier), cold retention.
//! - `compaction`: the latest record per key survives.
//! - `swap`: compaction's atomic replacement of a run of segments, and
//!   the leftovers a crash leaves.
//! - `reclaim`: a deleted segment's disk space given back a step at a time.

pub(crate) mod compaction;
pub(crate) mod pass;
pub(crate) mod policy;
pub(crate) mod reclaim;
pub(crate) mod retention;
pub(crate) mod swap;
