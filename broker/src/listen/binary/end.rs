//! Why a binary connection's read loop ends (`End`), and what ends it
//! from outside the loop (`Interrupt`: a request that panicked, or the
//! connection's watch). Lives on the connection's shard.

use std::cell::Cell;

use es_protocol::{ErrorCode, Response};
use glommio::sync::Semaphore;

use crate::listen::watchdog::Verdict;
use crate::shard::placement::ShardId;
use crate::shard::Shard;

/// Why the read loop stopped.
pub enum End {
    Eof,
    Shutdown,
    /// Nothing in flight and nothing received for `--connection-idle-ms`:
    /// closed without an error frame.
    Idle,
    /// Responses waited for `--frame-stall-ms` for the client to read any
    /// of their bytes: the socket is already shut down.
    WriteStalled,
    /// A large frame stopped arriving for `--frame-stall-ms`.
    Stalled,
    /// A protocol error: answered with this error frame, then closed.
    Refused(u64, Response),
    /// Moving to this shard, with the bytes read but not handled yet.
    Move(ShardId, Vec<u8>),
    /// The handling of request `id` panicked: answered with an `internal`
    /// error frame, then closed.
    Panicked(u64),
}

impl End {
    /// A stalled frame (request `id`) is answered with `frame_stalled`.
    pub fn stalled(self, shard: &Shard, id: u64) -> End {
        match self {
            End::Stalled => End::Refused(
                id,
                Response::error(
                    ErrorCode::FRAME_STALLED,
                    format!(
                        "a frame of 64 KiB or more stopped arriving for {} ms (--frame-stall-ms)",
                        shard.config.frame_stall_ms
                    ),
                ),
            ),
            other => other,
        }
    }
}

/// The request id in a frame's header, if it has arrived.
pub fn frame_id(prefix: &[u8]) -> u64 {
    prefix
        .get(8..16)
        .map_or(0, |b| u64::from_be_bytes(b.try_into().expect("8")))
}

/// Why the read loop must stop, set from outside it. A request task whose
/// handling panicked: the connection reads and dispatches nothing more,
/// answers that request with an `internal` error frame once the requests
/// in flight have answered, and closes (its state may be half updated; a
/// client reconnects to a clean one). The connection's watch: idle, or a
/// client that stopped reading.
pub struct Interrupt {
    /// The first request that panicked.
    panicked: Cell<Option<u64>>,
    verdict: Cell<Option<Verdict>>,
    /// Closed when either is set: wakes a read loop that waits.
    event: Semaphore,
}

impl Interrupt {
    pub fn new() -> Interrupt {
        Interrupt {
            panicked: Cell::new(None),
            verdict: Cell::new(None),
            event: Semaphore::new(0),
        }
    }

    pub fn panicked(&self, id: u64) {
        if self.panicked.get().is_none() {
            self.panicked.set(Some(id));
        }
        self.event.close();
    }

    pub fn watched(&self, verdict: Verdict) {
        self.verdict.set(Some(verdict));
        self.event.close();
    }

    /// The end it makes, if it is set.
    pub fn get(&self) -> Option<End> {
        if let Some(id) = self.panicked.get() {
            return Some(End::Panicked(id));
        }
        self.verdict.get().map(|v| match v {
            Verdict::Idle => End::Idle,
            Verdict::WriteStalled => End::WriteStalled,
        })
    }

    /// Waits until it is set; the end it makes.
    pub async fn wait(&self) -> End {
        // No permit is ever given: this returns once the semaphore closes.
        let _ = self.event.acquire(1).await;
        self.get().unwrap_or(End::Eof)
    }
}
