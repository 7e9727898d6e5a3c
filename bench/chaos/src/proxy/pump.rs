//! The proxy's threads: a listener's accept loop, a connection's preamble,
//! and the reader and writer of each direction, which apply the link's
//! rule to every chunk.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::conn::{Conn, Dir, Pipe};
use super::shared::{lock, Shared};
use super::{NodeId, Rule, CHUNK_BYTES, CONNECT_TIMEOUT, PREAMBLE_TIMEOUT, QUEUE_CHUNKS_MAX, RECHECK};
use crate::preamble::{Preamble, PREAMBLE_BYTES};

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> bool {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .is_ok()
}

pub(super) fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener, dst: NodeId, real: SocketAddr) {
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
