//! The producer loop on a bare connection, all on the producer's own
//! thread: requests go out in bursts (one write for every request the
//! window has room for) and acks are read in bursts (every frame one read
//! brought). The client library hands each request and each ack between
//! two threads (its reader and the caller) through channels; with small
//! requests that costs the load generator more CPU than the broker spends
//! on them, and on a machine the broker shares, the benchmark would then
//! measure itself.
//!
//! Latency is per request, from the moment it joins a burst to its fsynced
//! ack, as in producer.rs. Paced (`interval`), request k is due at
//! start + k x interval and goes out once due and the window has room; its
//! latency runs from when it was due, so a late send counts against the
//! broker (no coordinated omission), exactly as the paced disk writer is
//! timed.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use es_protocol::frame::{self, HEADER_BYTES};
use es_protocol::{Response, FRAME_BYTES_MAX_DEFAULT};

use crate::batch::Batch;
use crate::latency::Latency;
use crate::producer::{stopped, Shared};
use crate::window::Window;

/// Bytes asked of the socket per read.
const READ_BYTES: usize = 64 << 10;
/// A request at least this large is written on its own, not gathered into
/// the burst: one more send costs less than copying it.
const DIRECT_WRITE_BYTES_MIN: usize = 64 << 10;

/// Runs one producer's load on its own connection to `addr`: as fast as
/// acks allow, or one request every `interval`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    addr: &str,
    client_id: &str,
    batch: &mut Batch,
    inflight: usize,
    interval: Option<Duration>,
    budget: Option<u64>,
    window: Window,
    shared: &Shared,
) -> Result<Latency, String> {
    let mut conn = Connection::open(addr, client_id)?;
    // One encoded request, sent again and again under new request ids.
    let mut request = batch.next().to_frame(0, false);
    let mut pending: HashMap<u64, Instant> = HashMap::with_capacity(inflight);
    let mut latency = Latency::new();
    let mut out = Vec::new();
    let (mut next_id, mut sent) = (1u64, 0u64);
    let start = Instant::now();
    // When request `next_id` is due (paced), or None once none is left.
    let due = |k: u64| interval.map(|every| start + every.mul_f64((k - 1) as f64));
    loop {
        let more = |sent: u64, k: u64| {
            !stopped(shared)
                && !window.over()
                && budget.is_none_or(|b| sent < b)
                && due(k).is_none_or(|at| at < window.until)
        };
        while pending.len() < inflight && more(sent, next_id) {
            let now = Instant::now();
            let t0 = match due(next_id) {
                Some(at) if at > now => break,
                Some(at) => at,
                None => now,
            };
            request[8..16].copy_from_slice(&next_id.to_be_bytes());
            if request.len() >= DIRECT_WRITE_BYTES_MIN {
                // Large (so is every request of this loop): written as it
                // is; gathering it would cost a copy per request.
                conn.write(&request)?;
            } else {
                out.extend_from_slice(&request);
            }
            pending.insert(next_id, t0);
            next_id += 1;
            sent += batch.records;
        }
        if !out.is_empty() {
            conn.write(&out)?;
            out.clear();
        }
        // Paced: wake when the next request is due, acks or not.
        let wake = if pending.len() < inflight && more(sent, next_id) {
            due(next_id)
        } else {
            None
        };
        if pending.is_empty() {
            match wake {
                Some(at) => {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    continue;
                }
                None => return Ok(latency),
            }
        }
        for (id, resp) in conn.read_some(wake)? {
            let t0 = pending
                .remove(&id)
                .ok_or_else(|| format!("produce: an answer to request {id}, which was not sent"))?;
            match resp {
                Response::ProduceBatchOk(ok) if ok.record_count as u64 == batch.records => {
                    if window.counts(t0) {
                        latency.record(t0.elapsed());
                        shared.counters.add(batch.records, batch.bytes);
                    }
                    if let Some(mark) = shared.acked.get(ok.partition as usize) {
                        mark.fetch_max(ok.base_offset + batch.records, Ordering::Relaxed);
                    }
                }
                Response::Error(e) => return Err(format!("produce: {}: {}", e.code, e.message)),
                other => return Err(format!("produce: unexpected answer {:?}", other.kind())),
            }
        }
    }
}

/// A handshaken connection and the bytes read but not yet parsed
/// (`buf[..filled]`; the rest of `buf` is room for the next read).
struct Connection {
    sock: TcpStream,
    buf: Vec<u8>,
    filled: usize,
}

impl Connection {
    fn open(addr: &str, client_id: &str) -> Result<Connection, String> {
        let sock = crate::connect::handshaken(addr, client_id)?;
        Ok(Connection {
            sock,
            buf: vec![0; READ_BYTES],
            filled: 0,
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.sock.write_all(bytes).map_err(|e| format!("send: {e}"))
    }

    /// Waits for at least one byte (or until `until`: then nothing), then
    /// returns every whole frame read.
    fn read_some(&mut self, until: Option<Instant>) -> Result<Vec<(u64, Response)>, String> {
        if self.buf.len() - self.filled < READ_BYTES {
            self.buf.resize(self.filled + READ_BYTES, 0);
        }
        let timeout = match until {
            Some(at) => match at.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Ok(Vec::new()),
            },
            None => None,
        };
        self.sock
            .set_read_timeout(timeout)
            .map_err(|e| format!("receive timeout: {e}"))?;
        let n = match self.sock.read(&mut self.buf[self.filled..]) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Vec::new())
            }
            Err(e) => return Err(format!("receive: {e}")),
        };
        if n == 0 {
            return Err("the broker closed the connection".into());
        }
        self.filled += n;
        let mut frames = Vec::new();
        let mut at = 0;
        while self.filled - at >= HEADER_BYTES {
            match frame::parse(&self.buf[at..self.filled], FRAME_BYTES_MAX_DEFAULT) {
                Ok((f, used)) => {
                    at += used;
                    let id = f.request_id;
                    let resp = Response::from_frame_owned(f).map_err(|e| format!("bad answer: {e}"))?;
                    frames.push((id, resp));
                }
                Err(es_protocol::DecodeError::Incomplete { .. }) => break,
                Err(e) => return Err(format!("bad answer: {e}")),
            }
        }
        self.buf.copy_within(at..self.filled, 0);
        self.filled -= at;
        Ok(frames)
    }
}
