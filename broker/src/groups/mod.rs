//! Consumer groups: one group's rules (`group.rs`), Kafka's classic
//! protocol beside them (`classic.rs`), the sticky assignor,
//! the coordinator that runs group operations on the group's shard, the
//! transport-neutral group operations (`admin.rs`), their durability
//! (committed offsets, the groups log, its start-up load) and the
//! broker-wide count of groups; where offsets are made durable
//! (`offset_store.rs`: the groups log standalone, the controller group in
//! a cluster) and the coordinator of a cluster (`cluster.rs`).

pub mod admin;
pub mod assignor;
pub mod classic;
pub mod cluster;
pub mod committed;
pub mod coordinator;
pub mod count;
pub mod group;
pub mod load;
pub mod log;
pub mod offset_store;
pub mod store;
