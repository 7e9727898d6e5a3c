//! The schema registry's listener (docs/registry.md): Confluent's REST
//! paths at the root of `--registry-addr`, on every shard (SO_REUSEPORT),
//! served by the HTTP listener's machinery (hyper, timeouts, TLS with
//! `--tls-cert`, HTTP Basic `<id>:<key>` with `--auth required`). Each
//! request is parsed here and run on the shard that owns `_schemas/0`
//! (registry/service.rs); answers and errors are Confluent's shapes.

mod path;
mod routes;

use std::rc::Rc;

use glommio::net::TcpListener;

use crate::listen::tls::Acceptor;
use crate::shard::Shard;

/// Serves the registry on this shard until shutdown starts.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener, tls: Option<Acceptor>) {
    crate::listen::http::serve_routes(shard, listener, tls, "registry", routes::route).await
}
