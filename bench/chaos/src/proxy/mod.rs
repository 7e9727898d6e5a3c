//! The in-harness TCP proxy on every raft peer link: network faults
//! without root. One listener per destination node; every broker's
//! `--peers` names these listeners, so every connection between two
//! brokers passes through here.
//!
//! A connection from node S to the listener of node D first sends the
//! 32-byte raft preamble (preamble.rs), which tells the proxy S. The
//! proxy then connects to D's real raft listener, forwards the preamble
//! and pumps both directions: the bytes from S to D under the rule of the
//! link `S → D`, the bytes from D to S under the rule of `D → S`.
//!
//! **A link is a direction of data, not of connections.** A raft
//! connection carries both ways (the opener's requests, the acceptor's
//! answers), and each node opens its own connections to each peer. The
//! rule of `S → D` governs every byte S sends to D, on the connections S
//! opened and on those D opened alike: a one-way drop `S → D` means D
//! hears nothing from S (no request S sends, no answer S gives to D's
//! requests) while S still hears D. That is what `iptables -A INPUT -s S
//! -j DROP` on D does to the messages, without its side effect of stalling
//! the whole TCP connection.
//!
//! | rule | what the proxy does to the bytes of the link |
//! |---|---|
//! | `ok` | forwards them |
//! | `blackhole` | stops reading and forwarding them; sockets stay open (what a DROP does) |
//! | `reset` | closes every connection between the two nodes, and refuses new ones (after reading their preamble): a TCP reset cuts both directions, so a reset either way cuts the pair |
//! | `delay ms` | forwards each chunk `ms` after it was read (latency, not a bandwidth cap: up to the queue's room is in flight) |
//!
//! Rules change live and apply to open connections at once. **Healing a
//! blackhole delivers what was held**, in order, on the same connection:
//! as TCP's retransmission does when a DROP is lifted before either end
//! gives up. A connection one end closed meanwhile is closed by the proxy
//! once what it held is delivered. To cut connections, use `reset`.
//!
//! Bounded memory: each direction of a connection holds at most
//! [`QUEUE_CHUNKS_MAX`] chunks of at most [`CHUNK_BYTES`] (the reader stops
//! when it is full, as a TCP window does), and a blackholed reader stops
//! reading (at most the one chunk it was already waiting for comes in).
//! Threads: one per listener, and per connection two per direction
//! (reader, writer) once the preamble is in. A peer that sends anything
//! but a preamble, or closes before it, is closed and counted; nothing a
//! peer sends makes the proxy panic.
//!
//! Here the proxy and its rules; `shared.rs` what its listeners and
//! connections share (rules, counters, the live connections), `conn.rs` a
//! connection and its two pipes, `pump.rs` the threads that accept, read
//! and write.

mod conn;
mod pump;
mod shared;

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use pump::accept_loop;
use shared::{lock, Counters, Shared};

/// Most bytes read from a socket at once (one chunk).
pub const CHUNK_BYTES: usize = 16 << 10;
/// Chunks one direction of a connection holds, read and not yet written:
/// 256 KiB with [`CHUNK_BYTES`], above a raft heartbeat round and well
/// below anything that would matter on the machine.
pub const QUEUE_CHUNKS_MAX: usize = 16;
/// How long a new connection may take to send its preamble.
pub(super) const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to the real destination may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait of a pump before it looks again: a guard, since every
/// change wakes the pumps it concerns.
pub(super) const RECHECK: Duration = Duration::from_millis(500);

/// A node id, as the preamble and `--peers` name it.
pub type NodeId = u64;

/// A direction of data between two nodes: bytes from `.0` to `.1`.
pub type Link = (NodeId, NodeId);

/// What the proxy does to the bytes of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Ok,
    Blackhole,
    Reset,
    /// Milliseconds added to each chunk.
    Delay(u64),
}

impl Rule {
    pub fn name(self) -> String {
        match self {
            Rule::Ok => "ok".into(),
            Rule::Blackhole => "blackhole".into(),
            Rule::Reset => "reset".into(),
            Rule::Delay(ms) => format!("delay {ms}ms"),
        }
    }
}

/// What the proxy has done so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Connections accepted (before their preamble was read).
    pub accepted: u64,
    /// Connections closed for a bad or missing preamble.
    pub bad_preamble: u64,
    /// Connections refused by a `reset` rule.
    pub refused: u64,
    /// Connections whose real destination could not be reached.
    pub connect_failed: u64,
    /// Bytes forwarded per link (`"1->2"`).
    pub bytes: BTreeMap<String, u64>,
}

/// The proxy: one listener per destination node, and the rules.
pub struct Proxy {
    shared: Arc<Shared>,
    listeners: Vec<(NodeId, SocketAddr)>,
    threads: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// A listener on a free loopback port for each `(node, real raft
    /// address)`; every link starts `ok`.
    pub fn start(dests: &[(NodeId, SocketAddr)]) -> Result<Proxy, String> {
        let shared = Arc::new(Shared {
            rules: Mutex::new(HashMap::new()),
            conns: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
        });
        let mut proxy = Proxy {
            shared,
            listeners: Vec::new(),
            threads: Vec::new(),
        };
        for &(node, real) in dests {
            let listener =
                TcpListener::bind("127.0.0.1:0").map_err(|e| format!("proxy for node {node}: {e}"))?;
            let addr = listener
                .local_addr()
                .map_err(|e| format!("proxy for node {node}: {e}"))?;
            let shared = proxy.shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("proxy-{node}"))
                .spawn(move || accept_loop(&shared, &listener, node, real))
                .map_err(|e| format!("proxy thread: {e}"))?;
            proxy.listeners.push((node, addr));
            proxy.threads.push(t);
        }
        Ok(proxy)
    }

    /// The address peers use to reach `node`.
    pub fn addr_of(&self, node: NodeId) -> Option<SocketAddr> {
        self.listeners.iter().find(|(n, _)| *n == node).map(|(_, a)| *a)
    }

    /// Sets the rule of `link`; it applies to open connections at once.
    pub fn set(&self, link: Link, rule: Rule) {
        {
            let mut rules = lock(&self.shared.rules);
            if rule == Rule::Ok {
                rules.remove(&link);
            } else {
                rules.insert(link, rule);
            }
        }
        for conn in self.shared.live() {
            if conn.between(link.0, link.1) {
                if rule == Rule::Reset {
                    conn.kill();
                } else {
                    conn.wake();
                }
            }
        }
    }

    /// Every link `ok` again: held bytes are delivered.
    pub fn heal(&self) {
        lock(&self.shared.rules).clear();
        for conn in self.shared.live() {
            conn.wake();
        }
    }

    /// Bytes of `link` read and not yet delivered, over its open
    /// connections.
    pub fn held(&self, link: Link) -> usize {
        self.shared
            .live()
            .iter()
            .map(|c| {
                if (c.src, c.dst) == link {
                    lock(&c.up.q).bytes
                } else if (c.dst, c.src) == link {
                    lock(&c.down.q).bytes
                } else {
                    0
                }
            })
            .sum()
    }

    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        Stats {
            accepted: c.accepted.load(Ordering::Relaxed),
            bad_preamble: c.bad_preamble.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            connect_failed: c.connect_failed.load(Ordering::Relaxed),
            bytes: lock(&c.bytes)
                .iter()
                .map(|((a, b), n)| (format!("{a}->{b}"), *n))
                .collect(),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for (_, addr) in &self.listeners {
            // Wakes the blocked accept, which then sees the stop.
            let _ = TcpStream::connect_timeout(addr, CONNECT_TIMEOUT);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for conn in self.shared.live() {
            conn.kill();
        }
    }
}

#[cfg(test)]
mod tests;
