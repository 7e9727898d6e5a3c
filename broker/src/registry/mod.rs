//! The schema registry (docs/registry.md): Confluent's REST API, served by
//! its own listener (listen/registry/), kept in the compacted topic
//! `_schemas`. The shard that owns `_schemas/0` holds the registry in
//! memory and runs every request (other shards forward theirs over the
//! mesh), so changes are serialized there; each is durable before it is
//! answered.

pub mod level; // compatibility levels and modes
pub mod record; // the records of `_schemas`: encode, decode (fuzzed)
pub mod request; // what a request asks, as it crosses the mesh
pub mod schema; // schema types, parsing, fingerprints, compatibility
pub mod service; // the registry on its shard: load, checks, reads
pub mod store; // the registry in memory, changed by applying records
pub mod write; // changes: register, deletes, config, mode

pub use service::Registry;

/// The topic that holds the registry. Reserved: topic-API writes to it and
/// its deletion need an admin key (auth/principal.rs).
pub const TOPIC: &str = "_schemas";
