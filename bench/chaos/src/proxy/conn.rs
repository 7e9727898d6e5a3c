//! A peer connection through the proxy and its two pipes, one per
//! direction of data.

use std::collections::VecDeque;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use super::shared::lock;
use super::{Link, NodeId};

/// One direction of one connection: chunks read and not yet written.
#[derive(Default)]
pub(super) struct Pipe {
    pub(super) q: Mutex<Queue>,
    pub(super) cv: Condvar,
}

#[derive(Default)]
pub(super) struct Queue {
    /// Each chunk with the time it was read.
    pub(super) chunks: VecDeque<(Instant, Vec<u8>)>,
    pub(super) bytes: usize,
    /// The sender closed its side: once the chunks are written, the
    /// proxy closes its side toward the receiver.
    pub(super) eof: bool,
}

impl Pipe {
    /// Wakes the pipe's pumps (under its lock, so no waiter misses it).
    pub(super) fn wake(&self) {
        let _q = lock(&self.q);
        self.cv.notify_all();
    }
}

#[derive(Clone, Copy)]
pub(super) enum Dir {
    /// From the opener (the source of the preamble) to the destination.
    Up,
    /// From the destination back to the opener.
    Down,
}

/// A peer connection through the proxy: `src` opened it to `dst`.
pub(super) struct Conn {
    pub(super) src: NodeId,
    pub(super) dst: NodeId,
    pub(super) client: TcpStream,
    pub(super) upstream: Mutex<Option<TcpStream>>,
    pub(super) up: Pipe,
    pub(super) down: Pipe,
    pub(super) dead: AtomicBool,
}

impl Conn {
    pub(super) fn pipe(&self, dir: Dir) -> &Pipe {
        match dir {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    pub(super) fn link(&self, dir: Dir) -> Link {
        match dir {
            Dir::Up => (self.src, self.dst),
            Dir::Down => (self.dst, self.src),
        }
    }

    pub(super) fn between(&self, a: NodeId, b: NodeId) -> bool {
        (self.src, self.dst) == (a, b) || (self.src, self.dst) == (b, a)
    }

    pub(super) fn dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// Closes both sockets (which ends blocked reads and writes) and
    /// wakes every pump, which then exits.
    pub(super) fn kill(&self) {
        self.dead.store(true, Ordering::Relaxed);
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(s) = lock(&self.upstream).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.wake();
    }

    pub(super) fn wake(&self) {
        self.up.wake();
        self.down.wake();
    }
}
