//! The cold tier: where a tiered partition's segments go instead of being
//! deleted.
//!
//! - `cold`: the `ColdStore` trait a backend implements.
//! - `cold_dir`: the one shipped backend, a local directory.
//! - `state`: what one partition knows of its cold segments, and reading
//!   batches from them.

pub(crate) mod cold;
pub(crate) mod cold_dir;
pub(crate) mod state;
