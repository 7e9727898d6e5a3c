//! The shard: one glommio executor per core that owns its partitions
//! outright. This room holds the router (`router.rs`: `call` and
//! `serve_mesh`), the one placement table, the channel mesh and the
//! messages that cross it, what a shard owns, its request budget and
//! metric handles, and the start and stop of all shards (`runtime.rs`).
//! The Raft glue that replicates a shard's partitions slots in here.

pub mod budget;
pub mod hot_metrics;
pub mod lock;
pub mod mesh;
pub mod message;
pub mod owned;
pub mod placement;
pub mod router;
pub mod runtime;
pub mod state;

pub use router::{serve_mesh, Shard, CONTROLLER_SHARD};
