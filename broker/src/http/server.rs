//! Accepting connections on one shard: limits, TCP_NODELAY, graceful
//! shutdown, and panic containment per connection.

use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use glommio::net::TcpListener;
use hyper::server::conn::http1;
use hyper::service::service_fn;

use super::io::{GlommioTimer, HyperIo};
use crate::shard::Shard;

/// A client must send its request headers within this time.
pub const HEADER_READ_TIMEOUT_MS: u64 = 30_000;

/// Serves the HTTP API on this shard until shutdown starts, then stops
/// accepting and lets open connections finish their in-flight requests.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    crate::listener::accept_loop(shard, listener, "http", connection).await
}

async fn connection(shard: Rc<Shard>, stream: glommio::net::TcpStream) {
    let svc_shard = shard.clone();
    let service = service_fn(move |req| super::routes::route(svc_shard.clone(), req));
    let conn = http1::Builder::new()
        .timer(GlommioTimer)
        .header_read_timeout(Duration::from_millis(HEADER_READ_TIMEOUT_MS))
        .serve_connection(HyperIo(stream), service);
    futures::pin_mut!(conn);
    let stop = shard.shutdown.wait_for(1).fuse();
    futures::pin_mut!(stop);
    let result = futures::select! {
        r = conn.as_mut().fuse() => r,
        _ = stop => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
