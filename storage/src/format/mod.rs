//! The on-disk format: what the bytes of a segment's files mean, with no
//! I/O and no runtime.
//!
//! - `index`: the sparse index file (relative offset -> file position,
//!   max timestamp) and its footer.
//!
//! The record-batch format (`batch`, `record`, `offset`) belongs here too;
//! it stays at the crate root (`crate::batch`, `crate::record`,
//! `crate::Offset`) until the shared batch-format crate replaces it, so
//! that both changes merge without touching each other's paths.

pub mod index;
