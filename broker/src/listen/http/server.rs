//! The HTTP listener of one shard: hyper http1 per connection (over TLS
//! with `--tls-cert`: listen/tls/), its header-read (and keep-alive idle)
//! timeout, and the watch that closes a connection whose client stopped
//! reading its responses (listen/watchdog.rs).

use std::convert::Infallible;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use futures_lite::{AsyncRead, AsyncWrite};
use glommio::net::TcpListener;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};

use super::io::{GlommioTimer, HyperIo, Written};
use super::response::Body;
use crate::limits::HEADER_READ_TIMEOUT_MS;
use crate::listen::tls::Acceptor;
use crate::listen::watchdog::{Activity, Verdict};
use crate::shard::Shard;

/// Serves the HTTP API on this shard until shutdown starts, then stops
/// accepting and lets open connections finish their in-flight requests.
/// With `tls`, each connection is served once its TLS handshake is done.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener, tls: Option<Acceptor>) {
    serve_routes(shard, listener, tls, "http", super::routes::route).await
}

/// Serves HTTP on `listener` as [`serve`] does, each request answered by
/// `route`; `name` labels the listener's metrics and connection count
/// (the schema registry's listener is one: listen/registry/).
pub async fn serve_routes<R, F>(
    shard: Rc<Shard>,
    listener: TcpListener,
    tls: Option<Acceptor>,
    name: &'static str,
    route: R,
) where
    R: Fn(Rc<Shard>, Rc<Conn>, Request<Incoming>) -> F + Copy + 'static,
    F: Future<Output = Result<Response<Body>, Infallible>> + 'static,
{
    crate::listen::listener::accept_loop(shard, listener, name, move |shard, stream| {
        let tls = tls.clone();
        async move {
            match tls {
                None => connection(shard, stream, name, route).await,
                Some(tls) => {
                    if let Some(stream) = tls.accept(&shard, stream).await {
                        connection(shard, stream, name, route).await
                    }
                }
            }
        }
    })
    .await
}

/// What a request's handling needs of its connection.
pub struct Conn {
    /// Where a response body's charge waits until the body is written.
    pub written: Rc<Written>,
}

async fn connection<S, R, F>(shard: Rc<Shard>, stream: S, name: &'static str, route: R)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
    R: Fn(Rc<Shard>, Rc<Conn>, Request<Incoming>) -> F + Copy + 'static,
    F: Future<Output = Result<Response<Body>, Infallible>> + 'static,
{
    let activity = Activity::new();
    let written = Written::new(activity.clone());
    let conn_state = Rc::new(Conn {
        written: written.clone(),
    });
    let svc_shard = shard.clone();
    let service = service_fn(move |req| route(svc_shard.clone(), conn_state.clone(), req));
    // hyper starts this timer whenever it waits for a request's head: on a
    // new connection, and on a keep-alive one after each response.
    let head_wait = HEADER_READ_TIMEOUT_MS.min(shard.config.connection_idle_ms);
    let conn = http1::Builder::new()
        .timer(GlommioTimer)
        .header_read_timeout(Duration::from_millis(head_wait))
        .serve_connection(HyperIo { stream, written }, service);
    futures::pin_mut!(conn);
    let stall = Duration::from_millis(shard.config.frame_stall_ms);
    // Keep-alive idleness is hyper's header-read timeout: the watch looks
    // only at writes.
    let watch = crate::listen::watchdog::watch(&activity, None, stall).fuse();
    let stop = shard.shutdown.wait_for(1).fuse();
    futures::pin_mut!(watch, stop);
    let result = futures::select! {
        r = conn.as_mut().fuse() => r,
        _ = stop => {
            conn.as_mut().graceful_shutdown();
            futures::select! {
                r = conn.as_mut().fuse() => r,
                v = watch => return stalled(v, name),
            }
        }
        v = watch => return stalled(v, name),
    };
    if let Err(e) = result {
        if e.is_timeout() {
            metrics::counter!("es_connections_idle_closed_total", "listener" => name).increment(1);
        }
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// The watch's verdict on a connection, which is dropped on return: its
/// socket closes, and the response it could not write is given back.
fn stalled(verdict: Verdict, name: &'static str) {
    debug_assert_eq!(verdict, Verdict::WriteStalled, "HTTP idleness is hyper's");
    metrics::counter!("es_connections_write_stalled_total", "listener" => name).increment(1);
    tracing::debug!("closing an HTTP connection whose client stopped reading its response");
}
