//! The binary protocol listener (docs/protocol.md): every shard accepts
//! connections on `--binary-addr`; each connection reads frames, runs up to
//! `--inflight-requests-max` requests at once (pipelining), and writes
//! responses as they complete, matched by request id.

mod affinity;
mod connection;
mod early;
mod end;
mod handler;
mod handshake;
mod large_batch;
mod outgoing;
mod read_buf;
mod recv;
mod throttle; // a connection over its key's quota: not read until when
mod transport;

pub use connection::serve;
