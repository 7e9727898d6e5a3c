//! A TLS handshake on an accepted connection, on its shard: bounded by
//! `--tls-handshake-timeout-ms` (a client that connects and says nothing,
//! or stalls mid-handshake, is closed then) and by shutdown. A failed
//! handshake (garbage, plaintext HTTP, a certificate the other side
//! refuses) closes the connection after rustls's alert, counted; nothing
//! a client sends can do more.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use glommio::net::TcpStream;
use rustls::ServerConfig;

use crate::shard::Shard;

/// One listener's handshakes on one shard.
#[derive(Clone)]
pub struct Acceptor {
    acceptor: TlsAcceptor,
    timeout: Duration,
    listener: &'static str,
}

impl Acceptor {
    pub fn new(config: Arc<ServerConfig>, timeout: Duration, listener: &'static str) -> Acceptor {
        Acceptor {
            acceptor: TlsAcceptor::from(config),
            timeout,
            listener,
        }
    }

    /// Runs the server side of the handshake on `stream`: the TLS stream,
    /// or `None` once it failed, timed out, or shutdown began (the socket
    /// is closed as it is dropped).
    pub async fn accept(&self, shard: &Shard, stream: TcpStream) -> Option<TlsStream<TcpStream>> {
        let listener = self.listener;
        let handshake = self.acceptor.accept(stream).fuse();
        let expired = glommio::timer::sleep(self.timeout).fuse();
        let stop = shard.shutdown.wait_for(1).fuse();
        futures::pin_mut!(handshake, expired, stop);
        futures::select! {
            done = handshake => match done {
                Ok(tls) => Some(tls),
                Err(e) => {
                    metrics::counter!("es_tls_handshake_failures_total", "listener" => listener).increment(1);
                    tracing::debug!(listener, error = %e, "TLS handshake failed; connection closed");
                    None
                }
            },
            _ = expired => {
                metrics::counter!("es_tls_handshake_timeouts_total", "listener" => listener).increment(1);
                tracing::debug!(
                    listener,
                    timeout_ms = self.timeout.as_millis() as u64,
                    "TLS handshake not done within --tls-handshake-timeout-ms; connection closed"
                );
                None
            }
            _ = stop => None,
        }
    }
}
