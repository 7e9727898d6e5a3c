//! Consumer groups: one group's rules (`group.rs`), the sticky assignor,
//! the coordinator that runs group operations on the group's shard, the
//! transport-neutral group operations (`admin.rs`), and their durability
//! (committed offsets, the groups log, its start-up load).

pub mod admin;
pub mod assignor;
pub mod committed;
pub mod coordinator;
pub mod group;
pub mod load;
pub mod log;
pub mod store;
