//! `Peer`: this shard's way to one peer node: the connection all groups
//! share ([`Conn`]), opened on first use and again after it is lost, with
//! a growing backoff while the peer cannot be reached; and the peer's
//! heartbeat mux.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::io::AsyncWriteExt;
use glommio::net::TcpStream;

use crate::limits::{CONNECT_TIMEOUT, HANDSHAKE_TIMEOUT, RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN};
use crate::transport::budget::InflightBudget;
use crate::transport::conn::{Conn, Reply};
use crate::transport::error::TransportError;
use crate::transport::mux::HeartbeatMux;
use crate::transport::preamble::{cluster_field, ClusterId, Preamble};
use crate::transport::stats::TransportStats;
use crate::transport::stream::PeerStream;
use crate::transport::tls::PeerTls;
use crate::types::NodeId;

pub(crate) struct Peer {
    pub(crate) node: NodeId,
    addr: SocketAddr,
    /// The preamble this shard sends, its cluster field the roster's hash
    /// only: the id's goes in at each connect (`cluster_id`).
    preamble: Preamble,
    cluster_id: ClusterId,
    tls: Option<Arc<PeerTls>>,
    pub(crate) stats: Rc<TransportStats>,
    pub(crate) budget: InflightBudget,
    pub(crate) mux: HeartbeatMux,
    conn: RefCell<Option<Rc<Conn>>>,
    /// Held while a connect runs: requests that arrive meanwhile wait for
    /// it instead of opening their own.
    connecting: futures::lock::Mutex<()>,
    failures: Cell<u32>,
    retry_at: Cell<Option<Instant>>,
    closed: Cell<bool>,
}

impl Peer {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        node: NodeId,
        addr: SocketAddr,
        preamble: Preamble,
        cluster_id: ClusterId,
        tls: Option<Arc<PeerTls>>,
        coalesce: Duration,
        stats: Rc<TransportStats>,
        budget: InflightBudget,
    ) -> Peer {
        Peer {
            node,
            addr,
            preamble,
            cluster_id,
            tls,
            stats,
            budget,
            mux: HeartbeatMux::new(coalesce),
            conn: RefCell::new(None),
            connecting: futures::lock::Mutex::new(()),
            failures: Cell::new(0),
            retry_at: Cell::new(None),
            closed: Cell::new(false),
        }
    }

    fn unreachable(&self, why: impl Into<String>) -> TransportError {
        TransportError::Unreachable {
            node: self.node,
            why: why.into(),
        }
    }

    fn live(&self) -> Option<Rc<Conn>> {
        self.conn.borrow().as_ref().filter(|c| c.is_alive()).cloned()
    }

    /// Whether the shared connection is open.
    pub(crate) fn is_connected(&self) -> bool {
        self.live().is_some()
    }

    /// The open connection, or a new one; `Unreachable` while backing off
    /// after failed connects (openraft then backs off too).
    async fn conn(&self) -> Result<Rc<Conn>, TransportError> {
        if self.closed.get() {
            return Err(TransportError::Closed);
        }
        if let Some(c) = self.live() {
            return Ok(c);
        }
        let _one = self.connecting.lock().await;
        if let Some(c) = self.live() {
            return Ok(c);
        }
        if let Some(at) = self.retry_at.get() {
            if Instant::now() < at {
                return Err(self.unreachable(format!(
                    "backing off after {} failed connects",
                    self.failures.get()
                )));
            }
        }
        match self.open().await {
            Ok(stream) => {
                self.failures.set(0);
                self.retry_at.set(None);
                TransportStats::bump(&self.stats.connects);
                if self.closed.get() {
                    return Err(TransportError::Closed);
                }
                let c = Conn::start(self.node, stream, self.stats.clone());
                *self.conn.borrow_mut() = Some(c.clone());
                tracing::debug!(peer = self.node, addr = %self.addr, "raft connection open");
                Ok(c)
            }
            Err(why) => {
                let n = self.failures.get().saturating_add(1);
                self.failures.set(n);
                let backoff = RECONNECT_BACKOFF_MIN
                    .saturating_mul(1u32 << (n - 1).min(16))
                    .min(RECONNECT_BACKOFF_MAX);
                self.retry_at.set(Some(Instant::now() + backoff));
                TransportStats::bump(&self.stats.connect_failures);
                if n == 1 || n.is_power_of_two() {
                    tracing::warn!(peer = self.node, addr = %self.addr, failures = n, error = %why, "cannot reach raft peer");
                }
                Err(self.unreachable(why))
            }
        }
    }

    /// TCP (no Nagle: frames are small and latency-bound), the preamble,
    /// then TLS when configured.
    async fn open(&self) -> Result<PeerStream, String> {
        let mut tcp = TcpStream::connect_timeout(self.addr, CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("connect {}: {e}", self.addr))?;
        tcp.set_nodelay(true).map_err(|e| format!("TCP_NODELAY: {e}"))?;
        let mut preamble = self.preamble;
        preamble.cluster_hash = cluster_field(preamble.cluster_hash, self.cluster_id.hash());
        tcp.write_all(&preamble.encode())
            .await
            .map_err(|e| format!("preamble: {e}"))?;
        match &self.tls {
            None => Ok(Box::new(tcp)),
            Some(tls) => {
                let s = tls
                    .connect(self.node, tcp, HANDSHAKE_TIMEOUT)
                    .await
                    .map_err(|e| format!("TLS: {e}"))?;
                Ok(Box::new(s))
            }
        }
    }

    /// Sends `frame` and waits for its answer, over the shared connection.
    pub(crate) async fn call(&self, frame: Vec<u8>) -> Result<Reply, TransportError> {
        let permit = self.budget.acquire(frame.len()).await?;
        let conn = self.conn().await?;
        conn.call(frame, permit).await
    }

    /// Drops the connection and refuses new requests (the shard stops).
    pub(crate) fn close(&self) {
        self.closed.set(true);
        self.conn.borrow_mut().take();
    }
}
