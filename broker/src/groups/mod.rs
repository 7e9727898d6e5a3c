//! Consumer groups: one group's rules (`group.rs`), Kafka's classic
//! protocol beside them (`classic.rs`), the sticky assignor,
//! the coordinator that runs group operations on the group's shard, the
//! transport-neutral group operations (`admin.rs`), their durability
//! (committed offsets, the groups log, its start-up load) and the
//! broker-wide count of groups.

pub mod admin;
pub mod assignor;
pub mod classic;
pub mod committed;
pub mod coordinator;
pub mod count;
pub mod group;
pub mod load;
pub mod log;
pub mod store;
