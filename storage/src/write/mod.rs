//! How a placed batch reaches its segment file: the segment writer and
//! the memory it writes from.
//!
//! - `writer`: `SegmentWriter`, direct (O_DIRECT) or buffered writes.
//! - `plan`: where each page of a direct write comes from (a batch's own
//!   pages, or copies).
//! - `direct_buf`: the page-aligned memory of one direct write.
//! - `batch_buf`: a produced batch's bytes, and the page-aligned memory a
//!   large batch is received into.
//! - `early`: writing a large batch's pages while it still arrives.
//! - `recent`, `recent_budget`: the newest written bytes kept in memory
//!   (direct writes skip the page cache), and the shard's budget for them.

pub(crate) mod batch_buf;
pub(crate) mod direct_buf;
pub(crate) mod early;
mod plan;
pub(crate) mod recent;
pub(crate) mod recent_budget;
pub(crate) mod writer;
