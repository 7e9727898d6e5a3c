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

/// Listens on `addr` from this shard. Every shard binds the same address
/// (SO_REUSEPORT: the kernel spreads connections over shards), and
/// SO_REUSEADDR lets a restarted broker bind while connections of the one
/// before linger in TIME_WAIT (glommio's own bind sets only SO_REUSEPORT).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::unix::io::{FromRawFd, IntoRawFd};
    let sk = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sk.set_reuse_address(true)?;
    sk.set_reuse_port(true)?;
    sk.bind(&addr.into())?;
    sk.listen(LISTEN_BACKLOG)?;
    // SAFETY: a bound, listening socket whose ownership moves to glommio.
    Ok(unsafe { TcpListener::from_raw_fd(sk.into_raw_fd()) })
}

/// Pending connections the kernel queues per shard before accept.
pub const LISTEN_BACKLOG: i32 = 1024;

/// Serves the HTTP API on this shard until shutdown starts, then stops
/// accepting and lets open connections finish their in-flight requests.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    let per_shard_max = shard.config.connections_max.div_ceil(shard.shards).max(1);
    loop {
        let accepted = {
            let accept = listener.accept().fuse();
            let stop = shard.shutdown.wait_for(1).fuse();
            futures::pin_mut!(accept, stop);
            futures::select! {
                a = accept => Some(a),
                _ = stop => None,
            }
        };
        let stream = match accepted {
            None => return,
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shard.connections.get() >= per_shard_max {
            metrics::counter!("es_http_connections_refused_total").increment(1);
            drop(stream); // over the limit: closed at once
            continue;
        }
        let _ = stream.set_nodelay(true);
        shard.connections.set(shard.connections.get() + 1);
        metrics::gauge!("es_http_connections_open").increment(1.0);
        let shard = shard.clone();
        glommio::spawn_local(async move {
            let conn = connection(shard.clone(), stream);
            if std::panic::AssertUnwindSafe(conn).catch_unwind().await.is_err() {
                tracing::error!("connection task panicked; connection dropped, shard keeps serving");
            }
            shard.connections.set(shard.connections.get() - 1);
            metrics::gauge!("es_http_connections_open").decrement(1.0);
        })
        .detach();
    }
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
