//! The shard: one glommio executor per core that owns its partitions
//! outright. This room holds what a shard owns (`local.rs`: `Shard`; its
//! partitions in `owned.rs`, its request budget and metric handles), the
//! router that owns nothing (`router.rs`: `call` and `serve_mesh`), the
//! one placement table, the channel mesh with its outbox and the messages
//! that cross it, and the start and stop of all shards (`runtime.rs`).
//! The Raft glue that replicates a shard's partitions slots in here.

pub mod budget;
pub mod connections;
pub mod hot_metrics;
pub mod local;
pub mod lock;
pub mod mesh;
pub mod message;
pub mod outbox;
pub mod owned;
pub mod panics;
pub mod placement;
pub mod router;
pub mod runtime;
pub mod state;

pub use local::{Shard, CONTROLLER_SHARD};
pub use router::serve_mesh;
