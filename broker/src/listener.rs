//! Client listeners, HTTP and binary alike: every shard binds the same
//! address, accepts until shutdown starts, enforces the connection limit,
//! sets TCP_NODELAY, and runs each connection in its own task with panics
//! contained.

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use glommio::net::{TcpListener, TcpStream};

use crate::shard::Shard;

/// Pending connections the kernel queues per shard before accept.
pub const LISTEN_BACKLOG: i32 = 1024;

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

/// Accepts connections on this shard until shutdown starts, running
/// `connection` for each. `name` labels the metrics (`http`, `binary`).
pub async fn accept_loop<F, Fut>(shard: Rc<Shard>, listener: TcpListener, name: &'static str, connection: F)
where
    F: Fn(Rc<Shard>, TcpStream) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    // The limit covers HTTP and binary connections together.
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
                tracing::warn!(listener = name, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shard.connections.get() >= per_shard_max {
            metrics::counter!("es_connections_refused_total", "listener" => name).increment(1);
            drop(stream); // over the limit: closed at once
            continue;
        }
        let _ = stream.set_nodelay(true);
        spawn_connection(&shard, name, connection(shard.clone(), stream));
    }
}

/// Runs a connection's task on this shard, counted in its connections
/// (accepted here, or moved here from another shard), with panics
/// contained.
pub fn spawn_connection(shard: &Rc<Shard>, name: &'static str, conn: impl Future<Output = ()> + 'static) {
    shard.connections.set(shard.connections.get() + 1);
    metrics::gauge!("es_connections_open", "listener" => name).increment(1.0);
    let shard = shard.clone();
    glommio::spawn_local(async move {
        if std::panic::AssertUnwindSafe(conn).catch_unwind().await.is_err() {
            tracing::error!(
                listener = name,
                "connection task panicked; connection dropped, shard keeps serving"
            );
        }
        shard.connections.set(shard.connections.get() - 1);
        metrics::gauge!("es_connections_open", "listener" => name).decrement(1.0);
    })
    .detach();
}
