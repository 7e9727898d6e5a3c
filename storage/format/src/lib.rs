//! es-format: the record-batch format, once.
//!
//! A batch is the unit es writes, checksums, indexes, stores and serves:
//! the broker sends batches exactly as it stored them. This crate is the
//! one implementation of that format, pure (no I/O, no async runtime), so
//! the wire codec (`es-protocol`) and the partition log (`es-storage`) use
//! the same bytes, one header parser, one checksum walk and one record
//! walk. The byte table is in [`layout`], the bounds in [`limits`]; [`batch`]
//! names everything else a caller uses under one path.
//!
//! Decoders never panic on input: `unwrap` and indexing are denied outside
//! tests, and every read of input goes through one cursor (`cursor.rs`).

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

// The format's nouns.
mod error;
pub mod layout;
pub mod limits;
pub mod offset;
pub mod record;

// Reading a batch.
mod check;
mod checksum;
mod cursor;
mod header;
mod records;
mod validate;

// Writing a batch.
mod builder;
mod encode;
mod rebase;

// Everything above under the path both callers name.
pub mod batch;

// A segment's files: its sparse index, the rule for its entries, and the
// scan that finds a log's valid batches and where recovery would cut it.
pub mod index;
pub mod index_rule;
pub mod names;
pub mod scan;
mod scan_damage;

pub use error::BatchError;
pub use offset::Offset;
pub use record::{ProducerStamp, Record, RecordRef, StoredRecord};
