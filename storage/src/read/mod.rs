//! Reading a partition: batches and records by offset across both tiers,
//! seek by time, and the lookups behind them (which segment holds an
//! offset, its file handle, its index loaded on first use).
//!
//! - `fetch`: the `PartitionLog` read methods and the segment lookups.

pub(crate) mod fetch;
