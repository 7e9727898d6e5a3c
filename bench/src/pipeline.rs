//! The lean producer loop: one thread drives several producer connections
//! ("lanes") over nonblocking sockets and ppoll(2), as a client library's
//! network thread does (Kafka's producer has one for all its
//! connections). Requests go out in bursts (one write for every request a
//! lane's window has room for) and acks are read in bursts (every frame a
//! read brought). A thread per connection would make the load generator
//! pay a thread wake-up and a context switch per ack burst; with 50
//! connections on a machine the broker shares, the benchmark would then
//! measure its own scheduling.
//!
//! Latency is per request, from the moment it joins a burst to its fsynced
//! ack, as in producer.rs. Paced (`interval`), request k of a lane is due
//! at start + k x interval and goes out once due and the window has room;
//! its latency runs from when it was due, so a late send counts against
//! the broker (no coordinated omission), exactly as the paced disk writer
//! is timed.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use es_protocol::frame::{self, HEADER_BYTES};
use es_protocol::limits::FRAME_BYTES_MAX_DEFAULT;
use es_protocol::Response;

use crate::batch::Batch;
use crate::latency::Latency;
use crate::producer::{stopped, Shared};
use crate::window::Window;

/// Bytes asked of the socket per read.
const READ_BYTES: usize = 64 << 10;
/// Reads of one lane per wake-up before the other lanes get their turn.
const READS_PER_WAKE_MAX: usize = 4;
/// A request at least this large is written on its own, not gathered into
/// the burst: one more send costs less than copying it.
const DIRECT_WRITE_BYTES_MIN: usize = 64 << 10;
/// The longest a thread waits in ppoll before it looks at the stop flag
/// and the window again (a broker that stops answering still ends the
/// phase).
const POLL_WAIT_MAX: Duration = Duration::from_millis(200);

/// What one producer connection sends.
pub struct LaneSpec {
    pub index: usize,
    /// The broker it connects to (its partition's leader in a cluster).
    pub addr: String,
    pub client_id: String,
    pub batch: Batch,
    pub inflight: usize,
    /// Paced: one request every `interval`.
    pub interval: Option<Duration>,
    /// Records to send before stopping (prefill).
    pub budget: Option<u64>,
}

/// Runs every lane of `specs` on this thread through `window` (or until
/// their budgets are sent); the latencies of the requests sent after the
/// warm-up.
pub fn run(specs: Vec<LaneSpec>, window: Window, shared: &Shared) -> Result<Latency, String> {
    let mut lanes = specs
        .into_iter()
        .map(|spec| {
            let index = spec.index;
            Lane::open(spec).map_err(|e| format!("producer {index}: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut latency = Latency::new();
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(lanes.len());
    loop {
        let now = Instant::now();
        let mut wake = now + POLL_WAIT_MAX;
        fds.clear();
        for lane in &mut lanes {
            if let Some(at) = lane.queue(now, window, shared) {
                wake = wake.min(at);
            }
            lane.flush().map_err(|e| lane.error(e))?;
            let mut events = 0;
            if !lane.pending.is_empty() {
                events |= libc::POLLIN;
            }
            if lane.has_output() {
                events |= libc::POLLOUT;
            }
            if events != 0 || lane.may_queue(window, shared) {
                fds.push(libc::pollfd {
                    fd: lane.sock.as_raw_fd(),
                    events,
                    revents: 0,
                });
            }
        }
        if fds.is_empty() {
            // Nothing in flight, nothing to send, nothing due: done.
            return Ok(latency);
        }
        wait(&mut fds, wake.saturating_duration_since(Instant::now()))?;
        let mut at = 0;
        for lane in &mut lanes {
            let Some(fd) = fds.get(at) else { break };
            if fd.fd != lane.sock.as_raw_fd() {
                continue;
            }
            at += 1;
            if fd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                lane.receive(&mut latency, window, shared)
                    .map_err(|e| lane.error(e))?;
            }
        }
    }
}

/// ppoll(2) on `fds` for at most `timeout`; an interrupted wait is a
/// wait that ended early.
fn wait(fds: &mut [libc::pollfd], timeout: Duration) -> Result<(), String> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd for
    // the call's duration; `ts` outlives it; a null sigmask is allowed.
    let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(format!("poll: {e}"));
        }
    }
    Ok(())
}

/// One producer connection: its requests in flight, what is still to be
/// written, and the bytes read but not yet parsed (`buf[..filled]`).
struct Lane {
    index: usize,
    sock: TcpStream,
    buf: Vec<u8>,
    filled: usize,
    /// One encoded request, sent again and again under new request ids.
    request: Vec<u8>,
    records: u64,
    inflight: usize,
    interval: Option<Duration>,
    budget: Option<u64>,
    start: Instant,
    /// Request id -> when it was sent (or due).
    pending: HashMap<u64, Instant>,
    next_id: u64,
    sent: u64,
    /// Small requests gathered into one write; `out[out_at..]` unwritten.
    out: Vec<u8>,
    out_at: usize,
    /// Large requests queued (their ids), written one after the other from
    /// `request`; `large_at` bytes of the first are written.
    large: VecDeque<u64>,
    large_at: usize,
    /// Value bytes per request.
    bytes: u64,
}

impl Lane {
    fn open(mut spec: LaneSpec) -> Result<Lane, String> {
        let sock = crate::connect::handshaken(&spec.addr, &spec.client_id)?;
        sock.set_nonblocking(true)
            .map_err(|e| format!("nonblocking socket: {e}"))?;
        let request = spec.batch.next().to_frame(0, false);
        Ok(Lane {
            index: spec.index,
            sock,
            buf: vec![0; READ_BYTES],
            filled: 0,
            request,
            records: spec.batch.records,
            inflight: spec.inflight,
            interval: spec.interval,
            budget: spec.budget,
            start: Instant::now(),
            pending: HashMap::with_capacity(spec.inflight),
            next_id: 1,
            sent: 0,
            out: Vec::new(),
            out_at: 0,
            large: VecDeque::with_capacity(spec.inflight),
            large_at: 0,
            bytes: spec.batch.bytes,
        })
    }

    fn error(&self, e: String) -> String {
        format!("producer {}: {e}", self.index)
    }

    /// When request `k` is due (paced), or None (unpaced: now).
    fn due(&self, k: u64) -> Option<Instant> {
        self.interval
            .map(|every| self.start + every.mul_f64((k - 1) as f64))
    }

    /// Whether more requests are to be sent, now or later.
    fn may_queue(&self, window: Window, shared: &Shared) -> bool {
        !stopped(shared)
            && !window.over()
            && self.budget.is_none_or(|b| self.sent < b)
            && self.due(self.next_id).is_none_or(|at| at < window.until)
    }

    /// Queues every request the window has room for and that is due;
    /// returns when the next one is due if it is paced and not yet due.
    fn queue(&mut self, now: Instant, window: Window, shared: &Shared) -> Option<Instant> {
        while self.pending.len() < self.inflight && self.may_queue(window, shared) {
            let t0 = match self.due(self.next_id) {
                Some(at) if at > now => return Some(at),
                Some(at) => at,
                None => now,
            };
            let id = self.next_id;
            if self.request.len() >= DIRECT_WRITE_BYTES_MIN {
                self.large.push_back(id);
            } else {
                self.request[8..16].copy_from_slice(&id.to_be_bytes());
                self.out.extend_from_slice(&self.request);
            }
            self.pending.insert(id, t0);
            self.next_id += 1;
            self.sent += self.records;
        }
        None
    }

    fn has_output(&self) -> bool {
        self.out_at < self.out.len() || !self.large.is_empty()
    }

    /// Writes what the socket takes now.
    fn flush(&mut self) -> Result<(), String> {
        while self.out_at < self.out.len() {
            match self.sock.write(&self.out[self.out_at..]) {
                Ok(n) => self.out_at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("send: {e}")),
            }
        }
        self.out.clear();
        self.out_at = 0;
        // Large (so is every request of this lane): written as it is;
        // gathering it would cost a copy per request. Its id is set when
        // its first byte goes out and left alone until its last has.
        while let Some(&id) = self.large.front() {
            if self.large_at == 0 {
                self.request[8..16].copy_from_slice(&id.to_be_bytes());
            }
            match self.sock.write(&self.request[self.large_at..]) {
                Ok(n) => {
                    self.large_at += n;
                    if self.large_at == self.request.len() {
                        self.large.pop_front();
                        self.large_at = 0;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("send: {e}")),
            }
        }
        Ok(())
    }

    /// Reads what the socket holds and settles every whole answer.
    fn receive(&mut self, latency: &mut Latency, window: Window, shared: &Shared) -> Result<(), String> {
        for _ in 0..READS_PER_WAKE_MAX {
            if self.buf.len() - self.filled < READ_BYTES {
                self.buf.resize(self.filled + READ_BYTES, 0);
            }
            let n = match self.sock.read(&mut self.buf[self.filled..]) {
                Ok(0) => return Err("the broker closed the connection".into()),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("receive: {e}")),
            };
            self.filled += n;
            self.settle(latency, window, shared)?;
        }
        Ok(())
    }

    /// Parses every whole frame read and matches it to its request.
    fn settle(&mut self, latency: &mut Latency, window: Window, shared: &Shared) -> Result<(), String> {
        let mut at = 0;
        while self.filled - at >= HEADER_BYTES {
            let (f, used) = match frame::parse(&self.buf[at..self.filled], FRAME_BYTES_MAX_DEFAULT) {
                Ok(parsed) => parsed,
                Err(es_protocol::DecodeError::Incomplete { .. }) => break,
                Err(e) => return Err(format!("bad answer: {e}")),
            };
            at += used;
            let id = f.request_id;
            let resp = Response::from_frame_owned(f).map_err(|e| format!("bad answer: {e}"))?;
            let t0 = self
                .pending
                .remove(&id)
                .ok_or_else(|| format!("produce: an answer to request {id}, which was not sent"))?;
            match resp {
                Response::ProduceBatchOk(ok) if ok.record_count as u64 == self.records => {
                    if window.counts(t0) {
                        latency.record(t0.elapsed());
                        shared.counters.add(self.records, self.bytes);
                    }
                    if let Some(mark) = shared.acked.get(ok.partition as usize) {
                        mark.fetch_max(ok.base_offset + self.records, Ordering::Relaxed);
                    }
                }
                Response::Error(e) => return Err(format!("produce: {}: {}", e.code, e.message)),
                other => return Err(format!("produce: unexpected answer {:?}", other.kind())),
            }
        }
        self.buf.copy_within(at..self.filled, 0);
        self.filled -= at;
        Ok(())
    }
}
