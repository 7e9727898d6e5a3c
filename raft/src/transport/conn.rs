//! `Conn`: one open connection from this shard to a peer, shared by every
//! group that talks to it. Requests are pipelined: each gets a request id
//! and waits for the frame that carries it back; a writer task sends the
//! queued frames in order, a reader task hands each response to its
//! waiter. When either side fails, the connection is dead: every waiter
//! gets `Lost` (its request may have reached the peer), a request after
//! that `Unreachable`, and the next request opens a new one.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

use bytes::Bytes;
use futures::channel::{mpsc, oneshot};
use futures::future::{AbortHandle, Abortable};
use futures::io::{AsyncWriteExt, ReadHalf, WriteHalf};
use futures::{AsyncReadExt, FutureExt, StreamExt};
use glommio::sync::StaticPermit;

use crate::transport::error::TransportError;
use crate::transport::frame::RaftKind;
use crate::transport::stats::TransportStats;
use crate::transport::stream::{read_frame, PeerStream, ReadError};
use crate::types::NodeId;

/// A response: its kind and payload.
pub(crate) type Reply = (RaftKind, Bytes);

type Waiter = oneshot::Sender<Reply>;

pub(crate) struct Conn {
    node: NodeId,
    tx: mpsc::UnboundedSender<Vec<u8>>,
    pending: RefCell<HashMap<u64, Waiter>>,
    next_id: Cell<u64>,
    alive: Cell<bool>,
    tasks: AbortHandle,
    stats: Rc<TransportStats>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.tasks.abort();
    }
}

/// Removes a request's waiter if its caller gives up (openraft's timeout
/// dropped the future): a late answer then finds no one.
struct PendingGuard<'a> {
    conn: &'a Conn,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.conn.pending.borrow_mut().remove(&self.id);
    }
}

impl Conn {
    /// Starts the reader and writer tasks on `stream` (its preamble and
    /// handshake done).
    pub(crate) fn start(node: NodeId, stream: PeerStream, stats: Rc<TransportStats>) -> Rc<Conn> {
        let (tx, rx) = mpsc::unbounded();
        let (abort, registration) = AbortHandle::new_pair();
        let conn = Rc::new(Conn {
            node,
            tx,
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            alive: Cell::new(true),
            tasks: abort,
            stats,
        });
        let (r, w) = stream.split();
        let weak = Rc::downgrade(&conn);
        let run = {
            let weak = weak.clone();
            async move {
                let why = futures::select! {
                    e = read_loop(r, weak.clone()).fuse() => e,
                    e = write_loop(w, rx).fuse() => e,
                };
                if let Some(conn) = weak.upgrade() {
                    conn.die(&why);
                }
            }
        };
        glommio::spawn_local(Abortable::new(run, registration)).detach();
        conn
    }

    /// Whether the connection still works.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.get()
    }

    fn die(&self, why: &str) {
        if self.alive.replace(false) {
            TransportStats::bump(&self.stats.connections_lost);
            tracing::info!(
                peer = self.node,
                why,
                "raft connection lost; the next request reconnects"
            );
        }
        // Dropping the waiters answers them: the connection is gone.
        self.pending.borrow_mut().clear();
    }

    /// Sends `frame` (a whole frame whose request id field is filled in
    /// here) and waits for its answer. `_permit` (the budget's bytes for
    /// the frame) is held until then.
    pub(crate) async fn call(
        &self,
        mut frame: Vec<u8>,
        _permit: StaticPermit,
    ) -> Result<Reply, TransportError> {
        let unreachable = |why: &str| TransportError::Unreachable {
            node: self.node,
            why: why.to_string(),
        };
        if !self.is_alive() {
            return Err(unreachable("connection lost"));
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        frame[8..16].copy_from_slice(&id.to_be_bytes());
        let kind = frame[4];
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        let _guard = PendingGuard { conn: self, id };
        self.tx
            .unbounded_send(frame)
            .map_err(|_| unreachable("connection lost"))?;
        self.stats.sent(kind);
        rx.await.map_err(|_| TransportError::Lost {
            node: self.node,
            why: "the connection ended".into(),
        })
    }

    fn deliver(&self, id: u64, reply: Reply) {
        if let Some(w) = self.pending.borrow_mut().remove(&id) {
            let _ = w.send(reply);
        }
    }
}

async fn read_loop(mut r: ReadHalf<PeerStream>, conn: Weak<Conn>) -> String {
    loop {
        let (h, payload, _) = match read_frame(&mut r, None).await {
            Ok(f) => f,
            Err(ReadError::Io(e)) => return format!("read: {e}"),
            Err(ReadError::Frame(e)) => return e.to_string(),
        };
        let Some(conn) = conn.upgrade() else {
            return "closed".into();
        };
        conn.stats.received(h.kind as u8);
        if h.kind.is_request() {
            return format!("the peer sent a request ({:?}) on a client connection", h.kind);
        }
        conn.deliver(h.request_id, (h.kind, payload));
    }
}

async fn write_loop(mut w: WriteHalf<PeerStream>, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) -> String {
    while let Some(frame) = rx.next().await {
        if let Err(e) = w.write_all(&frame).await {
            return format!("write: {e}");
        }
        // Everything queued meanwhile goes in the same flush.
        while let Ok(frame) = rx.try_recv() {
            if let Err(e) = w.write_all(&frame).await {
                return format!("write: {e}");
            }
        }
        if let Err(e) = w.flush().await {
            return format!("write: {e}");
        }
    }
    "closed".into()
}
