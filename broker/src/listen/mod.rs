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

use std::rc::Rc;

use crate::shard::Shard;

/// Binds this shard's client listeners (HTTP, binary) and serves each in a
/// task of its own that ends once shutdown starts. main.rs hands this to
/// `shard::runtime::run`, so the core never names a listener.
pub fn start(shard: &Rc<Shard>) -> Result<Vec<glommio::Task<()>>, String> {
    let addr = shard.config.http_addr;
    let listener = listener::listen(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let server = glommio::spawn_local(http::serve(shard.clone(), listener));
    let binary_addr = shard.config.binary_addr;
    let binary_listener =
        listener::listen(binary_addr).map_err(|e| format!("cannot listen on {binary_addr}: {e}"))?;
    let binary = glommio::spawn_local(binary::serve(shard.clone(), binary_listener));
    Ok(vec![server, binary])
}
