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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::preamble::{Preamble, PREAMBLE_BYTES};

/// Most bytes read from a socket at once (one chunk).
pub const CHUNK_BYTES: usize = 16 << 10;
/// Chunks one direction of a connection holds, read and not yet written:
/// 256 KiB with [`CHUNK_BYTES`], above a raft heartbeat round and well
/// below anything that would matter on the machine.
pub const QUEUE_CHUNKS_MAX: usize = 16;
/// How long a new connection may take to send its preamble.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to the real destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait of a pump before it looks again: a guard, since every
/// change wakes the pumps it concerns.
const RECHECK: Duration = Duration::from_millis(500);

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

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    bad_preamble: AtomicU64,
    refused: AtomicU64,
    connect_failed: AtomicU64,
    bytes: Mutex<HashMap<Link, u64>>,
}

/// What the listeners and every connection share.
struct Shared {
    rules: Mutex<HashMap<Link, Rule>>,
    conns: Mutex<Vec<Weak<Conn>>>,
    stop: AtomicBool,
    counters: Counters,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A pump that panicked cannot leave a rule or a queue half-changed.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn rule(&self, link: Link) -> Rule {
        lock(&self.rules).get(&link).copied().unwrap_or(Rule::Ok)
    }

    fn reset_between(&self, a: NodeId, b: NodeId) -> bool {
        let rules = lock(&self.rules);
        [(a, b), (b, a)]
            .iter()
            .any(|l| rules.get(l) == Some(&Rule::Reset))
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn live(&self) -> Vec<Arc<Conn>> {
        let mut conns = lock(&self.conns);
        conns.retain(|w| w.strong_count() > 0);
        conns.iter().filter_map(Weak::upgrade).collect()
    }
}

/// One direction of one connection: chunks read and not yet written.
#[derive(Default)]
struct Pipe {
    q: Mutex<Queue>,
    cv: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Each chunk with the time it was read.
    chunks: VecDeque<(Instant, Vec<u8>)>,
    bytes: usize,
    /// The sender closed its side: once the chunks are written, the
    /// proxy closes its side toward the receiver.
    eof: bool,
}

impl Pipe {
    /// Wakes the pipe's pumps (under its lock, so no waiter misses it).
    fn wake(&self) {
        let _q = lock(&self.q);
        self.cv.notify_all();
    }
}

#[derive(Clone, Copy)]
enum Dir {
    /// From the opener (the source of the preamble) to the destination.
    Up,
    /// From the destination back to the opener.
    Down,
}

/// A peer connection through the proxy: `src` opened it to `dst`.
struct Conn {
    src: NodeId,
    dst: NodeId,
    client: TcpStream,
    upstream: Mutex<Option<TcpStream>>,
    up: Pipe,
    down: Pipe,
    dead: AtomicBool,
}

impl Conn {
    fn pipe(&self, dir: Dir) -> &Pipe {
        match dir {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    fn link(&self, dir: Dir) -> Link {
        match dir {
            Dir::Up => (self.src, self.dst),
            Dir::Down => (self.dst, self.src),
        }
    }

    fn between(&self, a: NodeId, b: NodeId) -> bool {
        (self.src, self.dst) == (a, b) || (self.src, self.dst) == (b, a)
    }

    fn dead(&self) -> bool {
        self.dead.load(Ordering::Relaxed)
    }

    /// Closes both sockets (which ends blocked reads and writes) and
    /// wakes every pump, which then exits.
    fn kill(&self) {
        self.dead.store(true, Ordering::Relaxed);
        let _ = self.client.shutdown(Shutdown::Both);
        if let Some(s) = lock(&self.upstream).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.wake();
    }

    fn wake(&self) {
        self.up.wake();
        self.down.wake();
    }
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .is_ok()
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, dst: NodeId, real: SocketAddr) {
    loop {
        let accepted = listener.accept();
        if shared.stopped() {
            return;
        }
        match accepted {
            Ok((client, _)) => {
                shared.counters.accepted.fetch_add(1, Ordering::Relaxed);
                let s = shared.clone();
                // A thread that cannot start drops the client: closed.
                spawn("proxy-conn", move || serve(&s, client, dst, real));
            }
            // Out of descriptors, say: try again shortly.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// One accepted connection: its preamble, then the pumps. This thread
/// becomes the writer toward the destination.
fn serve(shared: &Arc<Shared>, client: TcpStream, dst: NodeId, real: SocketAddr) {
    let mut pre = [0u8; PREAMBLE_BYTES];
    let read = client
        .set_read_timeout(Some(PREAMBLE_TIMEOUT))
        .and_then(|_| (&client).read_exact(&mut pre))
        .and_then(|_| client.set_read_timeout(None));
    let preamble = match read {
        Ok(()) => Preamble::decode(&pre).ok(),
        Err(_) => None,
    };
    let Some(preamble) = preamble else {
        shared.counters.bad_preamble.fetch_add(1, Ordering::Relaxed);
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let src = preamble.source_node;
    if shared.reset_between(src, dst) {
        shared.counters.refused.fetch_add(1, Ordering::Relaxed);
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let _ = client.set_nodelay(true);
    let Ok(from) = client.try_clone() else {
        return;
    };
    let conn = Arc::new(Conn {
        src,
        dst,
        client,
        upstream: Mutex::new(None),
        up: Pipe::default(),
        down: Pipe::default(),
        dead: AtomicBool::new(false),
    });
    {
        // The preamble is the first bytes of the link: it is held, delayed
        // or refused like the rest.
        let mut q = lock(&conn.up.q);
        q.chunks.push_back((Instant::now(), pre.to_vec()));
        q.bytes = PREAMBLE_BYTES;
    }
    lock(&shared.conns).push(Arc::downgrade(&conn));
    // A rule set between the check above and the registration.
    if shared.reset_between(src, dst) {
        conn.kill();
    }
    let (s, c) = (shared.clone(), conn.clone());
    if !spawn("proxy-read", move || read_loop(&s, &c, from, Dir::Up)) {
        conn.kill();
        return;
    }
    write_loop(shared, &conn, Dir::Up, None, Some(real));
}

/// What a writer does next.
enum Next {
    Write(Vec<u8>),
    Close,
    Exit,
}

/// Reads `from` into the pipe of `dir` while the link's rule lets it.
fn read_loop(shared: &Shared, conn: &Conn, mut from: TcpStream, dir: Dir) {
    let pipe = conn.pipe(dir);
    let link = conn.link(dir);
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        {
            let mut q = lock(&pipe.q);
            loop {
                if conn.dead() || shared.stopped() {
                    return;
                }
                match shared.rule(link) {
                    Rule::Reset => {
                        drop(q);
                        conn.kill();
                        return;
                    }
                    Rule::Blackhole => {}
                    Rule::Ok | Rule::Delay(_) if q.chunks.len() < QUEUE_CHUNKS_MAX => break,
                    Rule::Ok | Rule::Delay(_) => {}
                }
                q = pipe
                    .cv
                    .wait_timeout(q, RECHECK)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
        }
        let n = match from.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                conn.kill();
                return;
            }
        };
        let mut q = lock(&pipe.q);
        if n == 0 {
            q.eof = true;
            pipe.cv.notify_all();
            return;
        }
        q.chunks.push_back((Instant::now(), buf[..n].to_vec()));
        q.bytes += n;
        pipe.cv.notify_all();
    }
}

/// Writes the pipe of `dir` to `to` as the link's rule allows. The writer
/// toward the destination starts without a socket (`to` is `None`) and
/// connects to `connect` when its first bytes (the preamble) may go: a
/// blackholed link opens no connection to the destination.
fn write_loop(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    dir: Dir,
    mut to: Option<TcpStream>,
    connect: Option<SocketAddr>,
) {
    let pipe = conn.pipe(dir);
    let link = conn.link(dir);
    loop {
        let next = {
            let mut q = lock(&pipe.q);
            loop {
                if conn.dead() || shared.stopped() {
                    break Next::Exit;
                }
                let rule = shared.rule(link);
                if rule == Rule::Reset {
                    break Next::Exit;
                }
                let wait = match (q.chunks.front(), rule) {
                    (None, _) if q.eof => break Next::Close,
                    (None, _) | (Some(_), Rule::Blackhole) => RECHECK,
                    (Some(&(read_at, _)), Rule::Delay(ms)) => {
                        let due = read_at + Duration::from_millis(ms);
                        match due.checked_duration_since(Instant::now()) {
                            Some(left) if !left.is_zero() => left.min(RECHECK),
                            _ => Duration::ZERO,
                        }
                    }
                    (Some(_), _) => Duration::ZERO,
                };
                if wait.is_zero() {
                    let Some((_, chunk)) = q.chunks.pop_front() else {
                        continue;
                    };
                    q.bytes -= chunk.len();
                    pipe.cv.notify_all();
                    break Next::Write(chunk);
                }
                q = pipe
                    .cv
                    .wait_timeout(q, wait)
                    .map_or_else(|e| e.into_inner().0, |r| r.0);
            }
        };
        let chunk = match next {
            Next::Write(chunk) => chunk,
            Next::Close => {
                if let Some(s) = &to {
                    let _ = s.shutdown(Shutdown::Write);
                }
                return;
            }
            Next::Exit => {
                conn.kill();
                return;
            }
        };
        if to.is_none() {
            to = connect.and_then(|addr| connect_upstream(shared, conn, addr));
            if to.is_none() {
                conn.kill();
                return;
            }
        }
        let Some(s) = to.as_mut() else { return };
        if s.write_all(&chunk).is_err() {
            conn.kill();
            return;
        }
        *lock(&shared.counters.bytes).entry(link).or_default() += chunk.len() as u64;
    }
}

/// Connects to the destination's real listener and starts the pumps of
/// the way back. The socket to write to, or `None`.
fn connect_upstream(shared: &Arc<Shared>, conn: &Arc<Conn>, addr: SocketAddr) -> Option<TcpStream> {
    let Ok(up) = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) else {
        shared.counters.connect_failed.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    let _ = up.set_nodelay(true);
    let (Ok(reader), Ok(writer), Ok(kept)) = (up.try_clone(), conn.client.try_clone(), up.try_clone()) else {
        return None;
    };
    *lock(&conn.upstream) = Some(kept);
    if conn.dead() {
        // Killed while connecting: kill() did not see this socket.
        let _ = up.shutdown(Shutdown::Both);
        return None;
    }
    let (s, c) = (shared.clone(), conn.clone());
    if !spawn("proxy-read", move || read_loop(&s, &c, reader, Dir::Down)) {
        return None;
    }
    let (s, c) = (shared.clone(), conn.clone());
    if !spawn("proxy-write", move || {
        write_loop(&s, &c, Dir::Down, Some(writer), None)
    }) {
        return None;
    }
    Some(up)
}

#[cfg(test)]
mod tests {
    //! Real loopback sockets: an echo server plays each broker's raft
    //! listener, and test sockets play the peers that connect to it
    //! through the proxy.
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A hang guard, never a verdict.
    const GUARD: Duration = Duration::from_secs(30);

    /// An echo server that records what each accepted connection received.
    struct Server {
        addr: SocketAddr,
        accepted: Arc<AtomicUsize>,
        got: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Server {
        fn start() -> Server {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let accepted = Arc::new(AtomicUsize::new(0));
            let got: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
            let (a, g) = (accepted.clone(), got.clone());
            std::thread::spawn(move || {
                for s in l.incoming() {
                    let Ok(mut s) = s else { return };
                    let i = {
                        let mut g = g.lock().unwrap();
                        g.push(Vec::new());
                        g.len() - 1
                    };
                    a.fetch_add(1, Ordering::SeqCst);
                    let g = g.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 4096];
                        let mut total = 0usize;
                        loop {
                            match s.read(&mut buf) {
                                Ok(0) | Err(_) => {
                                    let _ = s.shutdown(Shutdown::Write);
                                    return;
                                }
                                Ok(n) => {
                                    g.lock().unwrap()[i].extend_from_slice(&buf[..n]);
                                    // Echo what follows the preamble.
                                    let from = PREAMBLE_BYTES.saturating_sub(total).min(n);
                                    total += n;
                                    if s.write_all(&buf[from..n]).is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    });
                }
            });
            Server { addr, accepted, got }
        }

        fn accepted(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }

        fn got(&self, i: usize) -> Vec<u8> {
            self.got.lock().unwrap().get(i).cloned().unwrap_or_default()
        }
    }

    fn preamble(src: NodeId) -> [u8; PREAMBLE_BYTES] {
        Preamble {
            source_node: src,
            source_shard: 0,
            dest_shard: 0,
        }
        .encode()
    }

    /// A peer `src` connected through the proxy to `dst`, its preamble sent.
    fn peer(proxy: &Proxy, src: NodeId, dst: NodeId) -> TcpStream {
        let mut s = TcpStream::connect(proxy.addr_of(dst).unwrap()).unwrap();
        s.set_read_timeout(Some(GUARD)).unwrap();
        s.write_all(&preamble(src)).unwrap();
        s
    }

    fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        s.read_exact(&mut b).unwrap();
        b
    }

    fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < GUARD, "hang guard: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Nothing arrives on `s` for a while (a blackholed direction).
    fn silent(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut b = [0u8; 1];
        let quiet = matches!(s.read(&mut b), Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
        s.set_read_timeout(Some(GUARD)).unwrap();
        quiet
    }

    /// The connection was closed by the proxy: end of stream or a reset,
    /// not the hang guard's timeout.
    fn closed(s: &mut TcpStream) -> bool {
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    #[test]
    fn ok_forwards_bytes_unchanged_both_ways() {
        let server = Server::start();
        let proxy = Proxy::start(&[(2, server.addr)]).unwrap();
        let mut c = peer(&proxy, 1, 2);
        // Larger than a direction's queue, so the pumps wait for room.
        let mut rng = crate::rng::Rng::fork(9, 0);
        let payload: Vec<u8> = (0..(QUEUE_CHUNKS_MAX * CHUNK_BYTES * 3))
            .map(|_| rng.next_u64() as u8)
            .collect();
        let mut w = c.try_clone().unwrap();
        let sent = payload.clone();
        let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
        assert!(read_n(&mut c, payload.len()) == payload, "echo differs");
        writer.join().unwrap();
        let mut want = preamble(1).to_vec();
        want.extend_from_slice(&payload);
        wait_until("the server has it all", || server.got(0).len() == want.len());
        assert!(server.got(0) == want, "the destination got other bytes");
        // Counted just after each write: wait for the last count.
        wait_until("the counts", || {
            proxy.stats().bytes.get("2->1") == Some(&(payload.len() as u64))
        });
        let stats = proxy.stats();
        assert_eq!(stats.bytes["1->2"], want.len() as u64);
        assert_eq!((stats.accepted, stats.bad_preamble), (1, 0));
    }

    #[test]
    fn a_blackhole_holds_bytes_and_its_heal_delivers_them_in_order() {
        let server = Server::start();
        let proxy = Proxy::start(&[(2, server.addr)]).unwrap();
        let mut c = peer(&proxy, 1, 2);
        c.write_all(b"before").unwrap();
        assert_eq!(read_n(&mut c, 6), b"before");

        proxy.set((1, 2), Rule::Blackhole);
        c.write_all(b"held").unwrap();
        wait_until("the proxy holds the bytes", || proxy.held((1, 2)) == 4);
        // A new connection of the link is held too: its preamble opens
        // nothing at the destination, and what follows is not read.
        let mut c2 = peer(&proxy, 1, 2);
        c2.write_all(b"second").unwrap();
        wait_until("the proxy holds the new one", || proxy.held((1, 2)) == 4 + 32);
        assert!(silent(&mut c));
        assert_eq!(
            server.got(0).len(),
            32 + 6,
            "a blackholed byte reached the destination"
        );
        assert_eq!(server.accepted(), 1);

        proxy.heal();
        assert_eq!(read_n(&mut c, 4), b"held");
        assert_eq!(read_n(&mut c2, 6), b"second");
        assert_eq!(&server.got(0)[32..], b"beforeheld");
        assert_eq!(proxy.held((1, 2)), 0);
    }

    #[test]
    fn a_reset_closes_the_pairs_connections_and_refuses_new_ones() {
        let server = Server::start();
        let proxy = Proxy::start(&[(2, server.addr)]).unwrap();
        let mut c = peer(&proxy, 1, 2);
        c.write_all(b"x").unwrap();
        assert_eq!(read_n(&mut c, 1), b"x");
        // A reset of the way back cuts the pair.
        proxy.set((2, 1), Rule::Reset);
        assert!(closed(&mut c), "the open connection survived a reset");
        let mut refused = peer(&proxy, 1, 2);
        assert!(closed(&mut refused), "a new connection was let through");
        assert_eq!(proxy.stats().refused, 1);
        assert_eq!(server.accepted(), 1);

        proxy.set((2, 1), Rule::Ok);
        let mut again = peer(&proxy, 1, 2);
        again.write_all(b"y").unwrap();
        assert_eq!(read_n(&mut again, 1), b"y");
    }

    #[test]
    fn a_rule_affects_only_its_link_learned_from_the_preamble() {
        let server = Server::start();
        let proxy = Proxy::start(&[(2, server.addr)]).unwrap();
        let mut from1 = peer(&proxy, 1, 2);
        from1.write_all(b"1").unwrap();
        assert_eq!(read_n(&mut from1, 1), b"1");
        let mut from3 = peer(&proxy, 3, 2);
        from3.write_all(b"3").unwrap();
        assert_eq!(read_n(&mut from3, 1), b"3");

        proxy.set((1, 2), Rule::Blackhole);
        from1.write_all(b"cut").unwrap();
        from3.write_all(b"flows").unwrap();
        assert_eq!(read_n(&mut from3, 5), b"flows");
        wait_until("node 1's bytes are held", || proxy.held((1, 2)) == 3);
        assert!(silent(&mut from1));
        assert_eq!(proxy.held((3, 2)), 0);

        proxy.set((1, 2), Rule::Ok);
        assert_eq!(read_n(&mut from1, 3), b"cut");
    }

    #[test]
    fn a_one_way_drop_cuts_one_direction_of_data_on_every_connection() {
        let s1 = Server::start();
        let s2 = Server::start();
        let proxy = Proxy::start(&[(1, s1.addr), (2, s2.addr)]).unwrap();
        // Node 1 hears nothing from node 2; node 2 still hears node 1.
        proxy.set((2, 1), Rule::Blackhole);

        // On a connection node 1 opened, its request reaches 2, the
        // answer is held.
        let mut opened_by_1 = peer(&proxy, 1, 2);
        opened_by_1.write_all(b"req").unwrap();
        wait_until("node 2 hears node 1", || s2.got(0).len() == 32 + 3);
        // The answer stays in the socket: a blackholed link is not read.
        assert!(silent(&mut opened_by_1));

        // On a connection node 2 opens, nothing reaches node 1, not even
        // the preamble.
        let mut opened_by_2 = peer(&proxy, 2, 1);
        opened_by_2.write_all(b"x").unwrap();
        wait_until("node 2's preamble is held", || proxy.held((2, 1)) == 32);
        assert_eq!(s1.accepted(), 0);

        proxy.heal();
        assert_eq!(read_n(&mut opened_by_1, 3), b"req");
        assert_eq!(read_n(&mut opened_by_2, 1), b"x");
        assert_eq!(&s1.got(0)[32..], b"x");
    }

    #[test]
    fn a_bad_preamble_is_closed_and_counted_and_harms_nothing() {
        let server = Server::start();
        let proxy = Proxy::start(&[(2, server.addr)]).unwrap();
        let addr = proxy.addr_of(2).unwrap();
        let mut garbage = TcpStream::connect(addr).unwrap();
        garbage.set_read_timeout(Some(GUARD)).unwrap();
        garbage
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n......")
            .unwrap();
        assert!(closed(&mut garbage));
        let mut version = preamble(1);
        version[9] = 9;
        let mut wrong = TcpStream::connect(addr).unwrap();
        wrong.set_read_timeout(Some(GUARD)).unwrap();
        wrong.write_all(&version).unwrap();
        assert!(closed(&mut wrong));
        let mut short = TcpStream::connect(addr).unwrap();
        short.write_all(b"ESRA").unwrap();
        drop(short);
        wait_until("three bad preambles", || proxy.stats().bad_preamble == 3);
        assert_eq!(server.accepted(), 0);

        let mut good = peer(&proxy, 1, 2);
        good.write_all(b"ok").unwrap();
        assert_eq!(read_n(&mut good, 2), b"ok");
    }

    #[test]
    fn a_destination_that_closes_or_is_down_closes_the_peers_connection() {
        // A destination that hangs up at once (a broker killed meanwhile).
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let hangs_up = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                drop(s);
            }
        });
        // A destination nobody listens on (a broker that is down).
        let down = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let proxy = Proxy::start(&[(2, hangs_up), (3, down)]).unwrap();
        let mut c = peer(&proxy, 1, 2);
        assert!(closed(&mut c), "the destination's close did not reach the peer");
        let mut c = peer(&proxy, 1, 3);
        assert!(closed(&mut c));
        assert_eq!(proxy.stats().connect_failed, 1);
    }

    #[test]
    fn a_delay_holds_each_chunk_at_least_its_time() {
        let server = Server::start();
        let proxy = Proxy::start(&[(2, server.addr)]).unwrap();
        let mut c = peer(&proxy, 1, 2);
        c.write_all(b"a").unwrap();
        assert_eq!(read_n(&mut c, 1), b"a");
        proxy.set((1, 2), Rule::Delay(300));
        let start = Instant::now();
        c.write_all(b"b").unwrap();
        assert_eq!(read_n(&mut c, 1), b"b");
        // A lower bound only: a slow machine cannot make it fail.
        assert!(start.elapsed() >= Duration::from_millis(300));
    }
}
