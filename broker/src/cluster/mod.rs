//! Cluster mode (docs/cluster.md): what makes a broker one node of a Raft
//! cluster, given `--peers`. Without it none of this runs and the broker
//! is standalone, as before.
//!
//! - `identity`: `<data-dir>/cluster.json`, the data dir's mode, node and
//!   cluster id (the one reader and writer of that file).
//! - `transport`: `ShardTransport`, a shard's end of the raft transport
//!   (connections to peers, its groups, the server, counters).
//! - `listener`: the raft listener on `--raft-addr`, and the hand-off of a
//!   connection to the shard its preamble names.
//! - `controller`: the controller group (raft0) on shard 0, and this
//!   node's registration in it.
//! - `health`: peers' liveness (pings) and the controller's leader, kept
//!   on shard 0 for the view, `/ready` and the metrics.
//! - `view`: `GET /v1/cluster` and the binary DescribeCluster.
//! - `leader_report`: `LeaderReport`, a group's state as its leader
//!   tells the other nodes, and the LeaderReport frame's codec.
//! - `reports`: sending this shard's leaders' reports, keeping the peers'
//!   (`Reports`), and the shard's control handler.
//! - `leaders`: what a shard knows of its partitions' leaders (its own
//!   replicas, peers' reports): describe's leader fields and the counts of
//!   partitions without a leader or under-replicated.
//! - `replica_observer`: a replica's commit latency and coalescing, into
//!   the exporter's histograms.
//! - `assignment`: the controller's replicas and node addresses, as every
//!   shard reads them.
//! - `reconciler`: on shard 0, makes the node match the controller's
//!   state (catalog, replicas opened and removed).
//! - `applied`: the wait between two passes of shard 0's followers of the
//!   controller's applied state (the reconciler, the groups' offsets).

pub mod applied;
pub mod assignment;
pub mod controller;
pub mod health;
pub mod identity;
pub mod leader_report;
pub mod leaders;
pub mod listener;
pub mod reconciler;
pub mod replica_observer;
pub mod reports;
pub mod transport;
pub mod view;
