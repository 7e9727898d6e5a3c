//! Client listeners. Each depends on the core (shard, ops, topics, groups,
//! producers), never the core on a listener, never one listener on
//! another: `listener.rs` and `watchdog.rs` are what every listener shares
//! (accept, connection limits, contained panics, idle and stall verdicts).
//! `tls/` is TLS to clients, which every listener speaks with `--tls-cert`.
//! `registry/` is the schema registry's (HTTP too, Confluent's paths);
//! `kafka/` is Kafka's wire protocol (docs/kafka.md), off with
//! `--kafka-addr disabled`.

pub mod binary;
pub mod http;
pub mod kafka;
pub mod listener;
pub mod registry;
pub mod tls;
pub mod watchdog;

use std::rc::Rc;
use std::sync::Arc;

use crate::shard::runtime::Listen;
use crate::shard::Shard;

/// What main.rs hands to `shard::runtime::run`, so the core never names a
/// listener: [`start`] on every shard, with the TLS setup (if any) that
/// all shards share.
pub fn starter(tls: Option<Arc<tls::Tls>>) -> Listen {
    Arc::new(move |shard| start(shard, tls.as_deref()))
}

/// Binds this shard's client listeners (HTTP, binary, the registry's
/// unless `--registry-addr disabled`, Kafka's unless `--kafka-addr
/// disabled`) and serves each in a task of its own
/// that ends once shutdown starts; with `tls`, each speaks TLS only.
fn start(shard: &Rc<Shard>, tls: Option<&tls::Tls>) -> Result<Vec<glommio::Task<()>>, String> {
    let addr = shard.config.http_addr;
    let listener = listener::listen(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let http_tls = tls.map(|t| t.acceptor("http"));
    let server = glommio::spawn_local(http::serve(shard.clone(), listener, http_tls));
    let binary_addr = shard.config.binary_addr;
    let binary_listener =
        listener::listen(binary_addr).map_err(|e| format!("cannot listen on {binary_addr}: {e}"))?;
    let binary_tls = tls.map(|t| t.acceptor("binary"));
    let binary = glommio::spawn_local(binary::serve(shard.clone(), binary_listener, binary_tls));
    let mut tasks = vec![server, binary];
    if let Some(registry_addr) = shard.config.registry.registry_addr.0 {
        let registry_listener =
            listener::listen(registry_addr).map_err(|e| format!("cannot listen on {registry_addr}: {e}"))?;
        let registry_tls = tls.map(|t| t.acceptor("registry"));
        tasks.push(glommio::spawn_local(registry::serve(
            shard.clone(),
            registry_listener,
            registry_tls,
        )));
        if shard.owner(crate::registry::TOPIC, 0) == shard.id {
            crate::registry::service::spawn_load(shard);
        }
    }
    if let Some(kafka_addr) = shard.config.kafka.kafka_addr.0 {
        let kafka_listener =
            listener::listen(kafka_addr).map_err(|e| format!("cannot listen on {kafka_addr}: {e}"))?;
        let kafka_tls = tls.map(|t| t.acceptor("kafka"));
        tasks.push(glommio::spawn_local(kafka::serve(
            shard.clone(),
            kafka_listener,
            kafka_tls,
        )));
    }
    Ok(tasks)
}
