//! Client listeners, HTTP and binary alike: every shard binds the same
//! address, accepts until shutdown starts, enforces each listener's
//! connection limit, sets TCP_NODELAY, and runs each connection in its own
//! task with panics contained. Every task that runs client input is guarded the same way
//! (`guarded`): a panic is logged at error level, counted in
//! `es_request_panics_total{listener}`, and answered `internal`; the shard
//! keeps serving.

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use futures::FutureExt;
use glommio::net::{TcpListener, TcpStream};
use tracing::Instrument;

use crate::limits::{ACCEPT_BACKOFF_MAX_MS, ACCEPT_BACKOFF_MIN_MS, LISTEN_BACKLOG_CONNECTIONS};
use crate::shard::Shard;

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
    sk.listen(LISTEN_BACKLOG_CONNECTIONS)?;
    // SAFETY: a bound, listening socket whose ownership moves to glommio.
    Ok(unsafe { TcpListener::from_raw_fd(sk.into_raw_fd()) })
}

/// The most connections `listener` may have open on one shard: its share
/// of `--connections-max` (`--http-connections-max` for HTTP, and as many
/// again for the registry, counted apart; the rest for binary), split
/// evenly over shards. Each listener has its own, so idle sockets of one
/// cannot lock the other's clients out.
fn per_shard_max(shard: &Shard, listener: &str) -> usize {
    let max = if listener == "http" || listener == "registry" {
        shard.config.http_connections_max()
    } else {
        shard.config.binary_connections_max()
    };
    max.div_ceil(shard.shards).max(1)
}

/// Accepts connections on this shard until shutdown starts, running
/// `connection` for each. `name` labels the metrics (`http`, `binary`).
pub async fn accept_loop<F, Fut>(shard: Rc<Shard>, listener: TcpListener, name: &'static str, connection: F)
where
    F: Fn(Rc<Shard>, TcpStream) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let per_shard_max = per_shard_max(&shard, name);
    let mut backoff = AcceptBackoff::default();
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
            Some(Ok(s)) => {
                backoff.accepted(name);
                s
            }
            Some(Err(e)) => {
                let pause = backoff.failed(name, &es_storage::os_error(e));
                let slept = glommio::timer::sleep(pause).fuse();
                let stop = shard.shutdown.wait_for(1).fuse();
                futures::pin_mut!(slept, stop);
                futures::select! {
                    _ = slept => continue,
                    _ = stop => return,
                }
            }
        };
        if shard.connections.get(name) >= per_shard_max {
            metrics::counter!("es_connections_refused_total", "listener" => name).increment(1);
            drop(stream); // over the limit: closed at once
            continue;
        }
        let _ = stream.set_nodelay(true);
        spawn_connection(&shard, name, connection(shard.clone(), stream));
    }
}

/// The pause after failed accepts: doubling while they fail, so that a
/// process out of descriptors (`EMFILE`) is not spun on; logged once per
/// run of failures, counted every time.
#[derive(Default)]
struct AcceptBackoff {
    failures: u64,
}

impl AcceptBackoff {
    /// Accept failed with `e`: how long to wait before the next.
    fn failed(&mut self, listener: &'static str, e: &std::io::Error) -> Duration {
        self.failures += 1;
        if es_storage::out_of_descriptors(e) {
            metrics::counter!("es_descriptors_exhausted_total", "op" => "accept").increment(1);
        }
        if self.failures == 1 {
            tracing::warn!(
                listener,
                error = %e,
                "accept failed; new connections wait in the kernel's queue until it works again"
            );
        }
        let ms = ACCEPT_BACKOFF_MIN_MS.saturating_mul(1 << (self.failures - 1).min(16));
        Duration::from_millis(ms.min(ACCEPT_BACKOFF_MAX_MS))
    }

    /// Accept worked: a run of failures, if any, is over.
    fn accepted(&mut self, listener: &'static str) {
        if self.failures > 0 {
            tracing::info!(listener, failed = self.failures, "accept works again");
            self.failures = 0;
        }
    }
}

/// Runs a connection's task on this shard, counted in its connections
/// (accepted here, or moved here from another shard), with panics
/// contained.
pub fn spawn_connection(shard: &Rc<Shard>, name: &'static str, conn: impl Future<Output = ()> + 'static) {
    // Lines the connection's task logs carry `conn` (unique on its shard,
    // whose span gives `shard`). A debug span: at the default level it is
    // disabled, and entering it on every poll costs nothing.
    let conn = conn.instrument(tracing::debug_span!(
        "conn",
        listener = name,
        conn = shard.connections.next_id()
    ));
    let open = shard.connections.of(name);
    open.set(open.get() + 1);
    metrics::gauge!("es_connections_open", "listener" => name).increment(1.0);
    let shard = shard.clone();
    glommio::spawn_local(async move {
        if std::panic::AssertUnwindSafe(conn).catch_unwind().await.is_err() {
            tracing::error!(
                listener = name,
                "connection task panicked; connection dropped, shard keeps serving"
            );
        }
        let open = shard.connections.of(name);
        open.set(open.get() - 1);
        metrics::gauge!("es_connections_open", "listener" => name).decrement(1.0);
    })
    .detach();
}

/// Runs `task`, a request's handling on listener `listener` (`http`,
/// `binary`), catching a panic in it: `Err(())` once the panic is logged
/// with `what` (the request, named only then) and counted (`panicked`),
/// for the caller to answer `internal` and close the connection.
pub async fn guarded<T>(
    listener: &'static str,
    what: impl FnOnce() -> String,
    task: impl Future<Output = T>,
) -> Result<T, ()> {
    match std::panic::AssertUnwindSafe(task).catch_unwind().await {
        Ok(out) => Ok(out),
        Err(panic) => {
            crate::shard::panics::panicked(listener, &what(), panic.as_ref());
            Err(())
        }
    }
}

/// Debug builds only, for broker/tests/request_panic.rs: a produce or fetch
/// to the topic named by `ES_TEST_PANIC_TOPIC` panics in the listener's own
/// handling of it (the HTTP handler, the binary request task), as a bug
/// there would.
#[cfg(debug_assertions)]
pub fn test_panic_hook(topic: &str) {
    static TOPIC: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let armed = TOPIC.get_or_init(|| {
        std::env::var("ES_TEST_PANIC_TOPIC")
            .ok()
            .filter(|t| !t.is_empty())
    });
    if armed.as_deref() == Some(topic) {
        panic!("ES_TEST_PANIC_TOPIC: a test's panic in a request for topic {topic:?}");
    }
}

/// Release builds have no test hook.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn test_panic_hook(_topic: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_accepts_back_off_up_to_a_second_and_start_over() {
        let mut b = AcceptBackoff::default();
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<u64> = (0..12)
            .map(|_| b.failed("http", &emfile).as_millis() as u64)
            .collect();
        assert_eq!(&pauses[..4], &[10, 20, 40, 80]);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]), "{pauses:?}");
        assert_eq!(*pauses.last().unwrap(), ACCEPT_BACKOFF_MAX_MS);
        b.accepted("http");
        assert_eq!(
            b.failed("http", &emfile).as_millis() as u64,
            ACCEPT_BACKOFF_MIN_MS
        );
    }
}
