//! `TransportStats`: a shard's transport counters (phase 2a exports them
//! as metrics), shared by its client and server sides.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// Counters of one shard's raft transport.
#[derive(Debug, Default)]
pub struct TransportStats {
    /// Connections opened to peers.
    pub connects: Cell<u64>,
    /// Connects (TCP, preamble or TLS) that failed.
    pub connect_failures: Cell<u64>,
    /// Open connections to peers that broke.
    pub connections_lost: Cell<u64>,
    /// Connections accepted from peers and served.
    pub accepted: Cell<u64>,
    /// Accepted connections refused, by reason (`preamble`, `cluster`,
    /// `wrong_shard`, `tls`, `peer_name`, `timeout`).
    pub refused: RefCell<BTreeMap<&'static str, u64>>,
    /// Frames sent, by kind byte.
    pub frames_sent: RefCell<BTreeMap<u8, u64>>,
    /// Frames received, by kind byte.
    pub frames_received: RefCell<BTreeMap<u8, u64>>,
    /// AppendEntries without entries sent inside Heartbeats frames.
    pub heartbeats_sent: Cell<u64>,
    /// AppendEntries frames (0x40) received without entries: heartbeats
    /// that did not go through a peer's mux (0 between es nodes).
    pub empty_appends_received: Cell<u64>,
}

impl TransportStats {
    pub(crate) fn bump(c: &Cell<u64>) {
        c.set(c.get() + 1);
    }

    pub(crate) fn refuse(&self, reason: &'static str) {
        *self.refused.borrow_mut().entry(reason).or_default() += 1;
    }

    pub(crate) fn sent(&self, kind: u8) {
        *self.frames_sent.borrow_mut().entry(kind).or_default() += 1;
    }

    pub(crate) fn received(&self, kind: u8) {
        *self.frames_received.borrow_mut().entry(kind).or_default() += 1;
    }

    /// Refusals for `reason` so far.
    pub fn refused(&self, reason: &str) -> u64 {
        self.refused.borrow().get(reason).copied().unwrap_or(0)
    }

    /// Frames of kind `kind` sent so far.
    pub fn sent_of(&self, kind: u8) -> u64 {
        self.frames_sent.borrow().get(&kind).copied().unwrap_or(0)
    }

    /// Frames of kind `kind` received so far.
    pub fn received_of(&self, kind: u8) -> u64 {
        self.frames_received.borrow().get(&kind).copied().unwrap_or(0)
    }
}
