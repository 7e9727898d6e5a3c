//! A blocking client with pipelining (feature `client`).
//!
//! One TCP connection; `send` writes a request frame and returns at once
//! with a handle, so many requests are in flight on the connection; a reader
//! thread matches responses to requests by id. In-flight requests are capped
//! at the broker's `inflight_requests_max` (from the handshake): `send`
//! waits for a slot. [`Producer`] adds batching by size and linger.
//! With feature `tls` and [`Options::tls`], the connection speaks TLS
//! (tls.rs).

pub mod brokers;
#[cfg(feature = "tls")]
pub mod tls;

use std::collections::HashMap;
use std::io::{self, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::frame::{self, HEADER_BYTES};
use crate::limits::{
    CONNECT_TIMEOUT_MS_DEFAULT, FRAME_BYTES_MAX_DEFAULT, MMAP_THRESHOLD_BYTES, READ_BUFFER_BYTES,
    RESPONSE_FRAME_BYTES_MAX, TRIM_THRESHOLD_BYTES,
};
use crate::requests::fetch::{Fetch, FetchOk};
use crate::requests::hello::{Hello, HelloOk};
use crate::requests::produce::{IdempotentProduce, Produce, ProduceRecord};
use crate::requests::produce_batch::ProduceBatch;
use crate::{Kind, Request, Response, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN};

/// What a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the broker: {0}")]
    Io(#[from] io::Error),
    /// The broker answered with an error frame; `details` are its
    /// details (protocol version 2: a `not_leader`'s `leader`), if any.
    #[error("{code}: {message}")]
    Broker {
        code: String,
        message: String,
        details: Option<serde_json::Map<String, serde_json::Value>>,
    },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the connection to the broker closed")]
    Closed,
    /// The TLS handshake failed: what failed (an unknown CA, a name
    /// mismatch, a refused client).
    #[error("TLS: {0}")]
    Tls(String),
}

impl ClientError {
    /// The broker's error code, when the broker sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Broker { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Connection options.
#[derive(Clone, Debug)]
pub struct Options {
    pub client_id: String,
    pub api_key: String,
    /// Compress request payloads with gzip.
    pub gzip: bool,
    /// Also how long the TLS and es handshakes may take over TLS.
    pub connect_timeout: Duration,
    /// Speak TLS (`None`: plain TCP).
    #[cfg(feature = "tls")]
    pub tls: Option<tls::TlsOptions>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            client_id: "es-client".into(),
            api_key: String::new(),
            gzip: false,
            connect_timeout: Duration::from_millis(CONNECT_TIMEOUT_MS_DEFAULT),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// Where requests are written: the socket, or the TLS session over it.
enum Writer {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(tls::WriteHalf),
}

impl Writer {
    fn write_frame(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        match self {
            Writer::Plain(s) => write_all_vectored(s, head, body),
            #[cfg(feature = "tls")]
            Writer::Tls(w) => w.write_frame(head, body),
        }
    }

    fn shutdown(&mut self) {
        match self {
            Writer::Plain(s) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
            #[cfg(feature = "tls")]
            Writer::Tls(w) => w.shutdown(),
        }
    }
}

type Slot = mpsc::Sender<Result<Response, ClientError>>;

struct Shared {
    pending: Mutex<HashMap<u64, Slot>>,
    inflight: Mutex<usize>,
    slot_free: Condvar,
    closed: Mutex<Option<String>>,
}

/// A connection to one broker. `Send + Sync`: share it between threads.
pub struct Client {
    writer: Mutex<Writer>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
    gzip: bool,
    hello: HelloOk,
    reader: Option<JoinHandle<()>>,
}

/// Keeps fetch-sized buffers (up to 32 MiB) in the heap between fetches
/// instead of mmapping and unmapping one per response, which page-faults
/// every page back in (glibc's default above 128 KiB). A program that
/// consumes a lot calls this once at start, before starting threads (with
/// glibc's allocator; the broker uses mimalloc, which reuses them anyway).
pub fn keep_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES as libc::c_int);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES as libc::c_int);
    }
}

/// Writes `head` then `body` with as few calls as the socket allows (one
/// `writev` for both, where a frame and a batch copied together into one
/// buffer cost a megabyte of copying per request).
fn write_all_vectored(w: &mut impl Write, head: &[u8], body: &[u8]) -> io::Result<()> {
    let mut parts = [io::IoSlice::new(head), io::IoSlice::new(body)];
    let mut parts = &mut parts[..];
    io::IoSlice::advance_slices(&mut parts, 0);
    while !parts.is_empty() {
        match w.write_vectored(parts) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the connection took no bytes",
                ))
            }
            Ok(n) => io::IoSlice::advance_slices(&mut parts, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A response on its way.
pub struct PendingResponse {
    rx: mpsc::Receiver<Result<Response, ClientError>>,
}

impl PendingResponse {
    /// Waits for the response; an error frame becomes `ClientError::Broker`.
    pub fn wait(self) -> Result<Response, ClientError> {
        match self.rx.recv() {
            Ok(Ok(Response::Error(e))) => Err(ClientError::Broker {
                code: e.code,
                message: e.message,
                details: e.details,
            }),
            Ok(r) => r,
            Err(_) => Err(ClientError::Closed),
        }
    }
}

impl Client {
    /// Connects and shakes hands (TLS first, with `options.tls`).
    pub fn connect(addr: &str, options: Options) -> Result<Client, ClientError> {
        let mut sock = open(addr, &options)?;
        #[cfg(feature = "tls")]
        if let Some(tls) = &options.tls {
            // A broker that never answers cannot hold the handshakes.
            sock.set_read_timeout(Some(options.connect_timeout))?;
            let mut conn = tls::handshake(&mut sock, tls, addr)?;
            let hello_ok = shake_hands(&mut rustls::Stream::new(&mut conn, &mut sock), &options).map_err(
                |e| match e {
                    ClientError::Io(e) => tls::from_io(e, &tls::name_for(tls, addr)),
                    e => e,
                },
            )?;
            sock.set_read_timeout(None)?;
            let (read_half, write_half) = tls::split(conn, sock)?;
            return Client::start(Writer::Tls(write_half), read_half, hello_ok, &options);
        }
        let hello_ok = shake_hands(&mut sock, &options)?;
        let read_half = sock.try_clone()?;
        Client::start(Writer::Plain(sock), read_half, hello_ok, &options)
    }

    /// The client of a connection past its handshakes: its reader thread
    /// reads `read_half`.
    fn start(
        writer: Writer,
        read_half: impl Read + Send + 'static,
        hello_ok: HelloOk,
        options: &Options,
    ) -> Result<Client, ClientError> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(0),
            slot_free: Condvar::new(),
            closed: Mutex::new(None),
        });
        let reader_shared = shared.clone();
        let reader = std::thread::Builder::new()
            .name("es-client-reader".into())
            .spawn(move || {
                read_loop(
                    BufReader::with_capacity(READ_BUFFER_BYTES, read_half),
                    reader_shared,
                )
            })?;
        Ok(Client {
            writer: Mutex::new(writer),
            shared,
            next_id: AtomicU64::new(1),
            gzip: options.gzip,
            hello: hello_ok,
            reader: Some(reader),
        })
    }

    /// What the broker said in the handshake.
    pub fn hello(&self) -> &HelloOk {
        &self.hello
    }

    /// Sends a request without waiting for its response (pipelining).
    pub fn send(&self, req: &Request) -> Result<PendingResponse, ClientError> {
        let (mut head, body) = req.frame_parts(0, self.gzip);
        let len = head.len() + body.len();
        if len > self.hello.frame_bytes_max as usize {
            return Err(ClientError::Protocol(format!(
                "request of {len} bytes exceeds the broker's frame limit of {}",
                self.hello.frame_bytes_max
            )));
        }
        {
            let mut inflight = self.shared.inflight.lock().expect("lock");
            while *inflight >= self.hello.inflight_requests_max.max(1) as usize {
                if self.shared.closed.lock().expect("lock").is_some() {
                    return Err(ClientError::Closed);
                }
                inflight = self.shared.slot_free.wait(inflight).expect("lock");
            }
            *inflight += 1;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.shared.pending.lock().expect("lock").insert(id, tx);
        if self.shared.closed.lock().expect("lock").is_some() {
            self.shared.pending.lock().expect("lock").remove(&id);
            return Err(ClientError::Closed);
        }
        // `head` starts with a whole frame header (`frame_parts`).
        if let Some(field) = head.get_mut(8..16) {
            field.copy_from_slice(&id.to_be_bytes());
        }
        if let Err(e) = self.writer.lock().expect("lock").write_frame(&head, body) {
            self.shared.pending.lock().expect("lock").remove(&id);
            release(&self.shared);
            return Err(e.into());
        }
        Ok(PendingResponse { rx })
    }

    /// Sends and waits.
    pub fn call(&self, req: &Request) -> Result<Response, ClientError> {
        self.send(req)?.wait()
    }

    /// Produces records to a topic; returns (partition, offset) per record
    /// once they are fsynced.
    pub fn produce(&self, topic: &str, records: Vec<ProduceRecord>) -> Result<Vec<(u32, u64)>, ClientError> {
        match self.call(&Request::Produce(Produce {
            topic: topic.into(),
            records,
        }))? {
            Response::ProduceOk(ok) => Ok(ok.offsets),
            other => Err(unexpected(other)),
        }
    }

    /// Produces one producer's batch to one partition: a retry with the same
    /// producer id, epoch and sequence is written once and answered with the
    /// original offsets.
    pub fn produce_idempotent(
        &self,
        topic: &str,
        producer: (i64, i16, i32),
        records: Vec<ProduceRecord>,
    ) -> Result<Vec<(u32, u64)>, ClientError> {
        let (producer_id, epoch, sequence) = producer;
        match self.call(&Request::IdempotentProduce(IdempotentProduce {
            producer_id,
            epoch,
            sequence,
            produce: Produce {
                topic: topic.into(),
                records,
            },
        }))? {
            Response::ProduceOk(ok) => Ok(ok.offsets),
            other => Err(unexpected(other)),
        }
    }

    /// Produces one batch built with `batch::BatchBuilder` to one partition;
    /// returns its base offset once it is fsynced.
    pub fn produce_batch(&self, topic: &str, partition: u32, batch: Vec<u8>) -> Result<u64, ClientError> {
        match self.call(&Request::ProduceBatch(ProduceBatch {
            topic: topic.into(),
            partition,
            batch,
        }))? {
            Response::ProduceBatchOk(ok) => Ok(ok.base_offset),
            other => Err(unexpected(other)),
        }
    }

    /// A new producer id (`None`), or the next epoch of one: (id, epoch).
    pub fn init_producer(&self, existing: Option<i64>) -> Result<(i64, i16), ClientError> {
        let body = match existing {
            Some(id) => serde_json::json!({ "producer_id": id }),
            None => serde_json::json!({}),
        };
        let v = self.admin(Kind::InitProducer, body)?;
        let field = |name: &str| v.get(name).and_then(serde_json::Value::as_i64);
        match (field("producer_id"), field("epoch")) {
            (Some(id), Some(epoch)) => Ok((id, epoch as i16)),
            _ => Err(ClientError::Protocol(format!("bad InitProducer answer {v}"))),
        }
    }

    pub fn fetch(&self, fetch: Fetch) -> Result<FetchOk, ClientError> {
        match self.call(&Request::Fetch(fetch))? {
            Response::FetchOk(ok) => Ok(ok),
            other => Err(unexpected(other)),
        }
    }

    /// A topic request (create, list, describe, delete, patch config).
    pub fn admin(&self, kind: Kind, body: serde_json::Value) -> Result<serde_json::Value, ClientError> {
        match self.call(&Request::Admin(kind, body))? {
            Response::AdminOk(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(mut w) = self.writer.lock() {
            w.shutdown();
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

fn unexpected(r: Response) -> ClientError {
    ClientError::Protocol(format!("unexpected response {:?}", r.kind()))
}

fn release(shared: &Shared) {
    let mut inflight = shared.inflight.lock().expect("lock");
    *inflight = inflight.saturating_sub(1);
    shared.slot_free.notify_one();
}

/// Opens a connection (TCP_NODELAY on) and shakes hands: the stream,
/// ready for requests, and what the broker said. For a caller that drives
/// a connection itself, one thread per connection, with
/// [`read_response`]; `Client::connect` starts from it too.
/// Plain TCP only: [`Client::connect`] speaks TLS.
pub fn connect(addr: &str, options: &Options) -> Result<(TcpStream, HelloOk), ClientError> {
    #[cfg(feature = "tls")]
    if options.tls.is_some() {
        return Err(ClientError::Protocol(
            "client::connect drives plain TCP connections; Client::connect speaks TLS".into(),
        ));
    }
    let mut stream = open(addr, options)?;
    let hello_ok = shake_hands(&mut stream, options)?;
    Ok((stream, hello_ok))
}

/// A TCP connection to `addr`, TCP_NODELAY on.
fn open(addr: &str, options: &Options) -> Result<TcpStream, ClientError> {
    let sock = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| ClientError::Protocol(format!("{addr} resolves to no address")))?;
    let stream = TcpStream::connect_timeout(&sock, options.connect_timeout)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The es handshake on a connection: what the broker said.
fn shake_hands(stream: &mut (impl Read + Write), options: &Options) -> Result<HelloOk, ClientError> {
    let hello = Request::Hello(Hello {
        min_version: PROTOCOL_VERSION_MIN,
        max_version: PROTOCOL_VERSION,
        client_id: options.client_id.clone(),
        api_key: options.api_key.clone(),
    });
    stream.write_all(&hello.to_frame(0, false))?;
    let hello_ok = match read_response(stream)?.map(|(_, r)| r) {
        Some(Response::HelloOk(h)) => h,
        Some(Response::Error(e)) => {
            return Err(ClientError::Broker {
                code: e.code,
                message: e.message,
                details: e.details,
            })
        }
        Some(other) => {
            return Err(ClientError::Protocol(format!(
                "expected HelloOk, got {:?}",
                other.kind()
            )))
        }
        None => return Err(ClientError::Closed),
    };
    Ok(hello_ok)
}

/// Reads one response frame and its request id from `r` (a connection
/// past its handshake); `None` at a clean end of stream. For a caller that
/// drives a connection itself, one request at a time, without the
/// client's reader thread.
pub fn read_response(r: &mut impl Read) -> Result<Option<(u64, Response)>, ClientError> {
    let mut header = [0u8; HEADER_BYTES];
    match r.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let max = FRAME_BYTES_MAX_DEFAULT.max(RESPONSE_FRAME_BYTES_MAX);
    let (h, total) = frame::check_header(&header, max).map_err(|e| ClientError::Protocol(e.to_string()))?;
    // Read the payload straight into its own buffer: no zero-fill and no
    // copy; a FetchOk's batches are then validated where they lie.
    let len = total - HEADER_BYTES;
    let mut payload = Vec::with_capacity(len);
    r.take(len as u64).read_to_end(&mut payload)?;
    if payload.len() < len {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
    }
    let f = frame::from_parts(h, payload, max).map_err(|e| ClientError::Protocol(e.to_string()))?;
    let id = f.request_id;
    let resp = Response::from_frame_owned(f).map_err(|e| ClientError::Protocol(e.to_string()))?;
    Ok(Some((id, resp)))
}

fn read_loop(mut r: impl Read, shared: Arc<Shared>) {
    let reason = loop {
        match read_response(&mut r) {
            Ok(Some((id, resp))) => {
                let slot = shared.pending.lock().expect("lock").remove(&id);
                match slot {
                    Some(tx) => {
                        let _ = tx.send(Ok(resp));
                        release(&shared);
                    }
                    // An error frame with id 0 (or an unknown id) is about the
                    // connection itself: the broker closes it next.
                    None => {
                        if let Response::Error(e) = resp {
                            break format!("{}: {}", e.code, e.message);
                        }
                    }
                }
            }
            Ok(None) => break "closed by the broker".to_string(),
            Err(e) => break e.to_string(),
        }
    };
    *shared.closed.lock().expect("lock") = Some(reason.clone());
    for (_, tx) in shared.pending.lock().expect("lock").drain() {
        let _ = tx.send(Err(ClientError::Protocol(format!("connection lost: {reason}"))));
    }
    *shared.inflight.lock().expect("lock") = 0;
    shared.slot_free.notify_all();
}

/// Batches records for one topic by size and linger, keeping several
/// batches in flight on one connection.
pub struct Producer {
    client: Arc<Client>,
    topic: String,
    batch_bytes: usize,
    linger: Duration,
    buffer: Vec<ProduceRecord>,
    buffered_bytes: usize,
    first_at: Option<Instant>,
    in_flight: std::collections::VecDeque<(usize, PendingResponse)>,
    max_in_flight: usize,
    acked: Vec<(u32, u64)>,
}

impl Producer {
    /// `batch_bytes`: send a batch once this much is buffered; `linger`:
    /// send a non-empty batch once its first record waited this long (checked
    /// on each `send` and by `flush`); `max_in_flight`: batches awaiting acks.
    pub fn new(
        client: Arc<Client>,
        topic: &str,
        batch_bytes: usize,
        linger: Duration,
        max_in_flight: usize,
    ) -> Producer {
        Producer {
            client,
            topic: topic.to_string(),
            batch_bytes: batch_bytes.max(1),
            linger,
            buffer: Vec::new(),
            buffered_bytes: 0,
            first_at: None,
            in_flight: Default::default(),
            max_in_flight: max_in_flight.max(1),
            acked: Vec::new(),
        }
    }

    /// Buffers a record, sending a batch when full or lingering too long.
    pub fn send(&mut self, record: ProduceRecord) -> Result<(), ClientError> {
        self.buffered_bytes += record.value.len() + record.key.as_ref().map_or(0, |k| k.len()) + 20;
        self.buffer.push(record);
        self.first_at.get_or_insert_with(Instant::now);
        if self.buffered_bytes >= self.batch_bytes
            || self.first_at.is_some_and(|t| t.elapsed() >= self.linger)
        {
            self.send_batch()?;
        }
        Ok(())
    }

    fn send_batch(&mut self) -> Result<(), ClientError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        while self.in_flight.len() >= self.max_in_flight {
            self.collect_one()?;
        }
        let records = std::mem::take(&mut self.buffer);
        let n = records.len();
        self.buffered_bytes = 0;
        self.first_at = None;
        let pending = self.client.send(&Request::Produce(Produce {
            topic: self.topic.clone(),
            records,
        }))?;
        self.in_flight.push_back((n, pending));
        Ok(())
    }

    fn collect_one(&mut self) -> Result<(), ClientError> {
        if let Some((n, pending)) = self.in_flight.pop_front() {
            match pending.wait()? {
                Response::ProduceOk(ok) if ok.offsets.len() == n => self.acked.extend(ok.offsets),
                other => return Err(unexpected(other)),
            }
        }
        Ok(())
    }

    /// Sends what is buffered and waits for every ack; returns the
    /// (partition, offset) of every record acknowledged since the last flush.
    pub fn flush(&mut self) -> Result<Vec<(u32, u64)>, ClientError> {
        self.send_batch()?;
        while !self.in_flight.is_empty() {
            self.collect_one()?;
        }
        Ok(std::mem::take(&mut self.acked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `step` bytes per call, some calls
    /// interrupted.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn vectored_writes_send_every_byte_in_order() {
        for (head, body) in [
            (&b"header"[..], &b"and the body"[..]),
            (b"only", b""),
            (b"", b"body"),
        ] {
            for step in [1, 5, 100] {
                let mut w = Trickle {
                    got: Vec::new(),
                    step,
                    calls: 0,
                };
                write_all_vectored(&mut w, head, body).unwrap();
                assert_eq!(w.got, [head, body].concat());
            }
        }
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = write_all_vectored(&mut Full, b"x", b"y").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    }
}
