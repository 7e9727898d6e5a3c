//! The on-disk format: what the bytes of a segment's files mean, with no
//! I/O and no runtime.
//!
//! - `index`: the sparse index file (relative offset -> file position,
//!   max timestamp) and its footer, and the rule for its entries
//!   (`index_rule`); both are es-format's, pure, so the offline tools
//!   build the same files.
//!
//! The record-batch format (`batch`, `record`, `offset`) is the pure
//! es-format crate (storage/format), shared with the wire codec; the crate
//! root re-exports it as `crate::batch`, `crate::record`, `crate::Offset`.

pub use es_format::index;
pub use es_format::index_rule;
