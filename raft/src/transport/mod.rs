//! The raft transport: how a shard's groups talk to their replicas on other
//! nodes (docs/design/raft-transport.md). One connection per (shard, peer),
//! shared by every group and pipelined by request id; heartbeats of all
//! groups to a peer coalesced into one frame; mutual TLS naming node ids.
//!
//! - `preamble`: the 32 plaintext bytes that open a connection.
//! - `frame`: the raft frame kinds on the binary protocol's frame header.
//! - `wire`: the payloads' primitives and `Cur`, a bounded reading cursor.
//! - `codec`: openraft's frames' payloads, decoders bounded and fuzzed.
//! - `control_codec`: the controller's frames' payloads (0x48-0x49).
//! - `snapshot_codec`: the snapshot transfer's frames' payloads (0x43-0x45).
//! - `pre_vote_codec`: the pre-vote frames' payloads (0x46).
//! - `control`: `ControlHandler`, who answers the frames that are not
//!   openraft's (controller propose and read index, leader reports, ...).
//! - `config`: `TransportConfig`, a shard's settings.
//! - `budget`: `InflightBudget`, the shard's bytes of frames in flight.
//! - `stats`: `TransportStats`, the shard's counters.
//! - `error`: `TransportError` and the Error frame's codes.
//! - `stream`: `PeerStream`, a plaintext or TLS connection; reading a frame.
//! - `tls`: `PeerTls`, mutual TLS with `es-node-<id>` names.
//! - `conn`: `Conn`, one open connection to a peer with its waiters.
//! - `peer`: `Peer`, reconnect with backoff, the shared connection.
//! - `mux`: `HeartbeatMux`, heartbeats coalesced per peer.
//! - `network`: `ShardNetwork`, a shard's peers.
//! - `link`: `GroupNetwork` / `GroupLink`, openraft's network for a group.
//! - `registry`: `GroupRegistry`, a shard's groups by id.
//! - `server`: `RaftServer`, accepting peers and answering their frames.

pub mod budget;
pub mod codec;
#[cfg(test)]
mod codec_testing;
pub mod config;
mod conn;
pub mod control;
pub mod control_codec;
pub mod error;
pub mod frame;
pub mod link;
mod mux;
pub mod network;
mod peer;
pub mod pre_vote_codec;
pub mod preamble;
pub mod registry;
pub mod server;
pub mod snapshot_codec;
pub mod stats;
mod stream;
pub mod tls;
mod wire;

pub use budget::InflightBudget;
pub use config::TransportConfig;
pub use control::{ControlHandler, ControlRouter};
pub use error::TransportError;
pub use link::{GroupLink, GroupNetwork};
pub use network::ShardNetwork;
pub use preamble::{cluster_hash, ClusterId, Preamble};
pub use registry::GroupRegistry;
pub use server::RaftServer;
pub use stats::TransportStats;
pub use tls::{node_name, PeerTls};
