//! Real loopback sockets: an echo server plays each broker's raft
//! listener, and test sockets play the peers that connect to it
//! through the proxy.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use super::*;
use crate::preamble::{Preamble, PREAMBLE_BYTES};

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
