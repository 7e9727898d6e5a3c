//! One file per request, each with its response, byte layout and tests.

pub mod admin;
pub mod error;
pub mod fetch;
pub mod hello;
pub mod produce;
pub mod produce_batch;
