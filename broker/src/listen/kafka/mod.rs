//! The Kafka wire protocol listener (docs/kafka.md): every shard accepts
//! Kafka clients on `--kafka-addr`, decodes their requests with the
//! `kafka-protocol` crate (codec.rs), runs each through the same
//! operations as the HTTP and binary listeners (ops/, topics/, groups/,
//! producers/), and answers in request order per connection. One more
//! front door, not a second broker: topics, records, groups, producer ids,
//! keys and quotas are es's own.
//!
//! - `connection.rs`: frames in, answers out in order, requests run
//!   concurrently; `codec.rs`: frames to requests, the advertised versions;
//! - `records.rs`: RecordBatch v2 to es batches and back;
//!   `fetch_response.rs`: the Fetch response, batches converted in place;
//! - `handler.rs` (dispatch, ApiVersions), `metadata.rs` (brokers,
//!   controller, partition leaders; a cluster's as its nodes know them),
//!   `produce.rs`,
//!   `fetch.rs` (with ListOffsets), `topics.rs` (CreateTopics,
//!   DeleteTopics, DescribeConfigs, InitProducerId), `groups.rs` (the
//!   classic consumer group protocol), `sasl.rs` (SASL/PLAIN).

mod codec;
mod connection;
mod fetch;
mod fetch_response;
mod groups;
mod handler;
mod metadata;
mod produce;
mod records;
mod sasl;
mod topics;

pub use connection::serve;

#[cfg(test)]
pub use codec::decode as decode_frame;
