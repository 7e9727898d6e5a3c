//! The raft listener (`--raft-addr`): every shard binds it (SO_REUSEPORT,
//! as the client listeners: listen/listener.rs), reads the preamble of
//! each connection it accepts, and hands the connection to the shard the
//! preamble names (`Op::AdoptRaft`, the way a binary connection moves),
//! whose `RaftServer` serves it: TLS starts on the owning shard, so no
//! TLS session moves between threads. Shards are matched by index, which
//! needs the same `--shards` on every node: a connection for a shard this
//! node does not have is refused, saying so.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::rc::Rc;
use std::time::Duration;

use es_raft::transport::Preamble;
use futures::FutureExt;
use glommio::net::{TcpListener, TcpStream};

use crate::error::ApiError;
use crate::limits::{ACCEPT_BACKOFF_MAX_MS, ACCEPT_BACKOFF_MIN_MS};
use crate::shard::message::{Op, Reply};
use crate::shard::Shard;

/// Binds `--raft-addr` on this shard and accepts until shutdown starts;
/// `None` when the broker is standalone.
pub fn start(shard: &Rc<Shard>) -> Result<Option<glommio::Task<()>>, String> {
    let (Some(_), Some(addr)) = (&shard.raft, shard.config.cluster.raft_addr) else {
        return Ok(None);
    };
    let listener = crate::listen::listener::listen(addr)
        .map_err(|e| format!("cannot listen on {addr} (--raft-addr): {e}"))?;
    Ok(Some(glommio::spawn_local(accept_loop(shard.clone(), listener))))
}

async fn accept_loop(shard: Rc<Shard>, listener: TcpListener) {
    let mut failures = 0u32;
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
        match accepted {
            None => return,
            Some(Ok(stream)) => {
                failures = 0;
                glommio::spawn_local(route(shard.clone(), stream)).detach();
            }
            Some(Err(e)) => {
                failures = failures.saturating_add(1);
                if failures == 1 {
                    tracing::warn!(error = %e, "raft listener: accept failed");
                }
                let ms = ACCEPT_BACKOFF_MIN_MS.saturating_mul(1 << (failures - 1).min(16));
                glommio::timer::sleep(Duration::from_millis(ms.min(ACCEPT_BACKOFF_MAX_MS))).await;
            }
        }
    }
}

/// Reads the preamble of an accepted connection and serves it here, or
/// hands it to the shard it is meant for.
async fn route(shard: Rc<Shard>, stream: TcpStream) {
    let Some(t) = shard.raft.clone() else { return };
    let (stream, preamble) = match t.server.read_preamble(stream).await {
        Ok(read) => read,
        Err(r) => return t.refuse(r.reason, &r.detail),
    };
    let dest = preamble.dest_shard as usize;
    if dest >= shard.shards {
        return t.refuse(
            "wrong_shard",
            &format!(
                "node {} connects for its shard {dest}, but this node has {} shards: --shards must be equal on \
                 every node of a cluster",
                preamble.source_node, shard.shards
            ),
        );
    }
    if dest == shard.id {
        t.server.serve(stream, preamble);
        return;
    }
    // The socket moves as a descriptor of its own; this shard's copy closes.
    // SAFETY: `stream`'s socket, open until `stream` drops below.
    let socket = match unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) }.try_clone_to_owned() {
        Ok(s) => s,
        Err(e) => return t.refuse("handoff", &format!("could not move the connection: {e}")),
    };
    drop(stream);
    match shard.call(dest, Op::AdoptRaft { socket, preamble }).await {
        Reply::Done(Ok(())) => {}
        other => tracing::debug!(?other, dest, "a raft connection could not move: closed"),
    }
}

/// Serves, on this shard, a raft connection another shard accepted
/// (`Op::AdoptRaft`).
pub fn adopt(shard: &Rc<Shard>, socket: OwnedFd, preamble: Preamble) -> Result<(), ApiError> {
    let Some(t) = &shard.raft else {
        return Err(ApiError::internal("a raft connection on a standalone broker"));
    };
    if shard.is_shutting_down() {
        return Err(ApiError::unavailable("broker is shutting down"));
    }
    // SAFETY: a connected TCP socket, owned by nothing else in the process.
    let stream = unsafe { TcpStream::from_raw_fd(socket.into_raw_fd()) };
    t.server.serve(stream, preamble);
    Ok(())
}
