//! es-keys: API keys, once.
//!
//! The broker (`broker/src/auth/`) and the offline tools (`es-tools key`)
//! read and write the same `<data-dir>/api_keys.json`; this crate is the
//! one implementation of what they share (docs/security.md): the key
//! format and its checksum ([`token`]), grants and quotas as stored
//! ([`grants`], [`file::Quota`]), and the key file's schema, checks and
//! durable private write ([`file`]). No async runtime: the one file write
//! is std I/O, which the broker runs off its shards.
//!
//! Parsers never panic on input: `unwrap` and indexing are denied outside
//! tests.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod base32;
pub mod file;
pub mod grants;
pub mod limits;
pub mod token;
