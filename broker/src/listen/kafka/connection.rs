//! One Kafka connection: the read loop (length-prefixed frames in, each
//! decoded and run in a task of its own, up to
//! `--kafka-requests-inflight-max` at once) and the writer, which writes
//! the answers in request order (Kafka's promise: each request's answer
//! is a oneshot queued in arrival order, awaited in turn). SASL requests
//! change the connection's identity, so they run in the read loop itself,
//! before the next frame is read. A frame that is not a request es runs
//! closes the connection, and only it; a panic in a request's handling is
//! contained (listen/listener.rs `guarded`) and closes it too.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use futures::FutureExt;
use glommio::channels::local_channel::{self, LocalReceiver};
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::{Semaphore, StaticPermit};

use super::codec::{self, Body, Refusal};
use super::sasl::Sasl;
use crate::auth::Principal;
use crate::limits::{CHARGED_FRAME_BYTES_MIN, KAFKA_PRE_AUTH_FRAME_BYTES_MAX, KAFKA_READ_BYTES};
use crate::listen::tls::Acceptor;
use crate::shard::budget::{Charge, Held};
use crate::shard::Shard;

/// Serves the Kafka protocol on this shard until shutdown starts; with
/// `tls`, each connection once its TLS handshake is done.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener, tls: Option<Acceptor>) {
    crate::listen::listener::accept_loop(shard, listener, "kafka", move |shard, stream: TcpStream| {
        let tls = tls.clone();
        async move {
            match tls {
                None => connection(shard, stream).await,
                Some(tls) => {
                    if let Some(stream) = tls.accept(&shard, stream).await {
                        connection(shard, stream).await
                    }
                }
            }
        }
    })
    .await
}

/// What a connection's requests share: who it authenticated as, and until
/// when it is muted by a quota's throttle.
pub struct Conn {
    pub principal: RefCell<Principal>,
    pub sasl: RefCell<Sasl>,
    muted_until: Cell<Option<Instant>>,
    /// Signalled when the writer ends (an answer closed the connection,
    /// or a write failed): the read loop then ends too.
    writer_ended: Semaphore,
}

impl Conn {
    /// Mutes the connection (nothing more is read) until `d` from now.
    pub fn mute_for(&self, d: Duration) {
        let until = Instant::now() + d;
        if self.muted_until.get().is_none_or(|u| u < until) {
            self.muted_until.set(Some(until));
        }
    }
}

/// An answer on its way to the writer: its bytes (none for acks=0), the
/// place it held among the requests in flight, and whether the
/// connection closes after it.
pub struct Answer {
    pub bytes: Option<Vec<u8>>,
    pub close: bool,
    permit: Option<StaticPermit>,
    /// What a fetch's answer holds of the shard's budget until written.
    pub charges: Vec<Charge>,
}

impl Answer {
    pub fn bytes(bytes: Vec<u8>) -> Answer {
        Answer {
            bytes: Some(bytes),
            close: false,
            permit: None,
            charges: Vec::new(),
        }
    }

    /// No answer (a produce with acks=0), in its turn.
    pub fn none() -> Answer {
        Answer {
            bytes: None,
            close: false,
            permit: None,
            charges: Vec::new(),
        }
    }

    pub fn closing(bytes: Option<Vec<u8>>) -> Answer {
        Answer {
            bytes,
            close: true,
            permit: None,
            charges: Vec::new(),
        }
    }
}

type Queue = local_channel::LocalSender<oneshot::Receiver<Answer>>;

async fn connection<S: AsyncRead + AsyncWrite + Unpin + 'static>(shard: Rc<Shard>, stream: S) {
    let inflight = shard.config.kafka.kafka_requests_inflight_max;
    let (rd, wr) = stream.split();
    let mut rd = BufReader::with_capacity(KAFKA_READ_BYTES, rd);
    let (tx, rx) = local_channel::new_bounded(inflight);
    let permits = Rc::new(Semaphore::new(inflight as u64));
    let conn = Rc::new(Conn {
        principal: RefCell::new(Principal::Anonymous),
        sasl: RefCell::new(Sasl::default()),
        muted_until: Cell::new(None),
        writer_ended: Semaphore::new(0),
    });
    let writer = glommio::spawn_local(write_loop(
        BufWriter::with_capacity(KAFKA_READ_BYTES, wr),
        rx,
        conn.clone(),
        Duration::from_millis(shard.config.frame_stall_ms),
    ));
    while let Some(frame) = next_frame(&shard, &conn, &mut rd, &permits, inflight).await {
        if !run_frame(&shard, &conn, &tx, &permits, frame).await {
            break;
        }
    }
    drop(tx);
    let mut wr = writer.await;
    let _ = wr.close().await;
}

/// Decodes and runs one frame (with the budget it holds, if large):
/// `false` once the connection is to close.
async fn run_frame(
    shard: &Rc<Shard>,
    conn: &Rc<Conn>,
    tx: &Queue,
    permits: &Rc<Semaphore>,
    (frame, held): (Bytes, Option<Held>),
) -> bool {
    if conn.sasl.borrow().raw_next {
        let answer = super::sasl::raw_token(shard, conn, &frame);
        let close = answer.close;
        return queue_ready(tx, answer).await && !close;
    }
    let req = match codec::decode(frame) {
        Ok(req) => req,
        Err(Refusal::ApiVersionsTooNew { correlation_id }) => {
            return queue_ready(tx, Answer::bytes(codec::api_versions_too_new(correlation_id))).await;
        }
        Err(Refusal::Close(why)) => {
            metrics::counter!("es_kafka_protocol_errors_total").increment(1);
            tracing::info!(reason = %why, "closing a Kafka connection: a frame es does not serve");
            return false;
        }
    };
    if let Err(e) = refresh_principal(shard, conn) {
        tracing::info!(reason = %e, "closing a Kafka connection: its key is no longer valid");
        return false;
    }
    if matches!(req.body, Body::SaslHandshake(_) | Body::SaslAuthenticate(_)) {
        let answer = super::sasl::handle(shard, conn, req);
        let close = answer.close;
        return queue_ready(tx, answer).await && !close;
    }
    if !super::sasl::may_run(shard, conn, &req) {
        tracing::info!(api = ?req.key, client = ?req.client_id, "closing a Kafka connection: a request before SASL authentication");
        return false;
    }
    let permit = permits
        .clone()
        .acquire_static_permit(1)
        .await
        .expect("semaphore never closes");
    let (otx, orx) = oneshot::channel();
    if tx.send(orx).await.is_err() {
        return false;
    }
    let (shard, conn) = (shard.clone(), conn.clone());
    glommio::spawn_local(async move {
        let key = req.key;
        let handled = super::handler::handle(&shard, &conn, req);
        let mut answer = match crate::listen::listener::guarded("kafka", || format!("{key:?}"), handled).await
        {
            Ok((answer, throttle)) => {
                if !throttle.is_zero() {
                    conn.mute_for(throttle);
                    crate::auth::quota::wait(&shard, throttle).await;
                }
                answer
            }
            Err(()) => Answer::closing(None),
        };
        drop(held);
        answer.permit = Some(permit);
        let _ = otx.send(answer);
    })
    .detach();
    true
}

/// Queues an answer that is ready now.
async fn queue_ready(tx: &Queue, answer: Answer) -> bool {
    let (otx, orx) = oneshot::channel();
    let _ = otx.send(answer);
    tx.send(orx).await.is_ok()
}

/// Checks the connection's key is still valid (not revoked), taking its
/// current grants.
fn refresh_principal(shard: &Shard, conn: &Conn) -> Result<(), &'static str> {
    let mut p = conn.principal.borrow_mut();
    if let Principal::Key(held) = &mut *p {
        *held = shard.state.keys.current(held).map_err(|r| r.message())?;
    }
    Ok(())
}

/// Reads the next whole frame, or `None` once the connection ends: the
/// peer closed it, it stayed idle with nothing in flight for
/// `--connection-idle-ms`, a frame stalled for `--frame-stall-ms` or was
/// larger than allowed, or the broker shuts down. A frame of 64 KiB or
/// more holds that many bytes of the shard's request budget until it is
/// handled.
async fn next_frame<R: AsyncRead + Unpin>(
    shard: &Rc<Shard>,
    conn: &Conn,
    rd: &mut BufReader<R>,
    permits: &Semaphore,
    inflight: usize,
) -> Option<(Bytes, Option<Held>)> {
    if let Some(until) = conn.muted_until.take() {
        let left = until.saturating_duration_since(Instant::now());
        if !left.is_zero() && !crate::auth::quota::wait(shard, left).await {
            return None;
        }
    }
    let idle = Duration::from_millis(shard.config.connection_idle_ms);
    let stall = Duration::from_millis(shard.config.frame_stall_ms);
    // Waiting for a frame to begin takes nothing out of the stream, so
    // an idle check that comes first loses no byte.
    loop {
        match readable(shard, conn, rd, idle).await {
            Read::Done => break,
            Read::TimedOut if permits.available() < inflight as u64 => continue,
            _ => return None,
        }
    }
    let mut prefix = [0u8; 4];
    if !matches!(
        read_or_stop(shard, conn, rd, &mut prefix, stall).await,
        Read::Done
    ) {
        return None;
    }
    let len = i32::from_be_bytes(prefix);
    let max = if super::sasl::authenticated_or_open(shard, conn) {
        shard.config.frame_bytes_max
    } else {
        KAFKA_PRE_AUTH_FRAME_BYTES_MAX
    };
    if len < 0 || len as usize > max {
        metrics::counter!("es_kafka_protocol_errors_total").increment(1);
        tracing::info!(len, max, "closing a Kafka connection: frame length out of bounds");
        return None;
    }
    let len = len as usize;
    let held = if len >= CHARGED_FRAME_BYTES_MIN {
        let budget = &shard.request_budget;
        Some(match budget.try_take(len as u64) {
            Some(h) => h,
            None => budget.take(len as u64).await,
        })
    } else {
        None
    };
    let mut body = vec![0u8; len];
    match read_or_stop(shard, conn, rd, &mut body, stall).await {
        Read::Done => Some((Bytes::from(body), held)),
        _ => None,
    }
}

enum Read {
    Done,
    TimedOut,
    Ended,
}

/// Waits until the stream has bytes, without taking any, unless the peer
/// closes, `limit` passes, or the broker shuts down.
async fn readable<R: AsyncRead + Unpin>(
    shard: &Shard,
    conn: &Conn,
    rd: &mut BufReader<R>,
    limit: Duration,
) -> Read {
    let read = futures::io::AsyncBufReadExt::fill_buf(rd).fuse();
    let stop = shard.shutdown.wait_for(1).fuse();
    let timer = glommio::timer::sleep(limit).fuse();
    let ended = conn.writer_ended.acquire(1).fuse();
    futures::pin_mut!(read, stop, timer, ended);
    futures::select! {
        r = read => match r {
            Ok(b) if !b.is_empty() => Read::Done,
            _ => Read::Ended,
        },
        _ = stop => Read::Ended,
        _ = ended => Read::Ended,
        _ = timer => Read::TimedOut,
    }
}

/// Fills `into`, unless the peer closes, `limit` passes with nothing read,
/// or the broker shuts down.
async fn read_or_stop<R: AsyncRead + Unpin>(
    shard: &Shard,
    conn: &Conn,
    rd: &mut R,
    into: &mut [u8],
    limit: Duration,
) -> Read {
    let read = rd.read_exact(into).fuse();
    let stop = shard.shutdown.wait_for(1).fuse();
    let timer = glommio::timer::sleep(limit).fuse();
    let ended = conn.writer_ended.acquire(1).fuse();
    futures::pin_mut!(read, stop, timer, ended);
    futures::select! {
        r = read => if r.is_ok() { Read::Done } else { Read::Ended },
        _ = stop => Read::Ended,
        _ = ended => Read::Ended,
        _ = timer => Read::TimedOut,
    }
}

/// Writes the answers in request order, each as soon as it and those
/// before it are ready, gathered into few writes; ends when the read
/// loop is done and every answer is written, when an answer closes the
/// connection, or when a write fails. Returns the writer to close.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: BufWriter<W>,
    rx: LocalReceiver<oneshot::Receiver<Answer>>,
    conn: Rc<Conn>,
    stall: Duration,
) -> BufWriter<W> {
    'outer: while let Some(mut next) = rx.recv().await {
        loop {
            let answer = match (&mut next).now_or_never() {
                Some(a) => a,
                None => {
                    if !within(stall, wr.flush()).await {
                        break 'outer;
                    }
                    next.await
                }
            };
            let Ok(answer) = answer else { break 'outer };
            if let Some(bytes) = &answer.bytes {
                if !within(stall, wr.write_all(bytes)).await {
                    break 'outer;
                }
            }
            if answer.close {
                break 'outer;
            }
            drop(answer);
            match rx.recv().now_or_never() {
                Some(Some(n)) => next = n,
                Some(None) => break 'outer,
                None => break,
            }
        }
        if !within(stall, wr.flush()).await {
            break;
        }
    }
    let _ = within(stall, wr.flush()).await;
    // Wakes the read loop for good: the connection ends.
    conn.writer_ended.signal(u64::MAX / 2);
    wr
}

/// Runs a write, `true` if it succeeded within `stall`: a client that
/// stops reading for that long is closed, freeing what its answers hold.
async fn within(stall: Duration, write: impl std::future::Future<Output = std::io::Result<()>>) -> bool {
    let write = write.fuse();
    let timer = glommio::timer::sleep(stall).fuse();
    futures::pin_mut!(write, timer);
    futures::select! {
        r = write => r.is_ok(),
        _ = timer => {
            metrics::counter!("es_connections_write_stalled_total", "listener" => "kafka").increment(1);
            false
        }
    }
}
