//! Reading a partition: batches and records by offset across both tiers,
//! seek by time, and the lookups behind them (which segment holds an
//! offset, its file handle, its index loaded on first use).
//!
//! - `fetch`: the `PartitionLog` read methods and the segment lookups.
//! - `scan`: reading whole, checked batches out of a segment's bytes (a
//!   local file, its recent writes, or a cold segment), and the damage a
//!   read met.

pub(crate) mod entries;
pub(crate) mod fetch;
pub(crate) mod scan;
