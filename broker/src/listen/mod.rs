//! Client listeners. Each depends on the core (shard, ops, topics, groups,
//! producers), never the core on a listener, never one listener on
//! another: `listener.rs` and `watchdog.rs` are what every listener shares
//! (accept, connection limits, contained panics, idle and stall verdicts).
//! Listeners to come (Kafka's wire protocol, the schema registry) slot in
//! beside `http/` and `binary/`.

pub mod binary;
pub mod http;
pub mod listener;
pub mod watchdog;
