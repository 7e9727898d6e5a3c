//! One binary connection: the read loop (frames in, requests dispatched),
//! the writer task (responses out), the handshake, closing on a bad frame
//! with an error frame, closing when idle or when the client stops reading
//! (listen/watchdog.rs), and moving to the shard its partitions live on
//! (affinity.rs). Generic over its stream (transport.rs): plain TCP, or
//! TLS with `--tls-cert`.

use std::os::fd::{BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::time::Instant;

use es_protocol::frame;
use es_protocol::requests::produce_batch::ProduceBatch;
use es_protocol::{DecodeError, ErrorCode, Kind, Request, Response};
use es_storage::ReceivingBatch;
use futures::io::AsyncReadExt;
use futures::io::{ReadHalf, WriteHalf};
use futures::FutureExt;
use glommio::channels::local_channel::{self, LocalSender};
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::{Semaphore, StaticPermit};

use super::affinity::Affinity;
use super::early::EarlyFeed;
use super::end::{frame_id, End, Interrupt};
use super::handler::Incoming;
use super::handshake::hello;
use super::large_batch::{large_batch, LargeBatch};
use super::outgoing::Outgoing;
use super::read_buf::make_room;
use super::throttle::{charge_arrival, wait_unmuted, Dispatched, Muted};
use super::transport::Transport;
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::limits::{
    CHARGED_FRAME_BYTES_MIN, HELLO_FRAME_BYTES_MAX, READ_IDLE_BYTES, READ_ROOM_MIN_BYTES, WAIT_READ_BYTES,
};
use crate::listen::tls::Acceptor;
use crate::listen::watchdog::{Activity, Busy, Verdict};
use crate::shard::budget::{Budget, Held};
use crate::shard::message::{Op, Reply};
use crate::shard::placement::ShardId;
use crate::shard::Shard;

/// Serves the binary protocol on this shard until shutdown starts; with
/// `tls`, each connection once its TLS handshake is done.
pub async fn serve(shard: Rc<Shard>, listener: TcpListener, tls: Option<Acceptor>) {
    crate::listen::listener::accept_loop(shard, listener, "binary", move |shard, stream| {
        let tls = tls.clone();
        async move {
            match tls {
                None => connection(shard, stream, Vec::new(), None, Principal::Anonymous).await,
                Some(tls) => {
                    if let Some(stream) = tls.accept(&shard, stream).await {
                        connection(shard, stream, Vec::new(), None, Principal::Anonymous).await
                    }
                }
            }
        }
    })
    .await
}

/// Serves a connection another shard handed over (affinity.rs): `socket`,
/// past its handshake at protocol version `VERSION`, `unhandled`, the
/// bytes that shard read from it but did not handle, and who it
/// authenticated as. Dropped (closing the socket) during shutdown. (The
/// version is the fn's, one per version, so that the move carries it.)
pub fn adopt<const VERSION: u16>(
    shard: &Rc<Shard>,
    socket: OwnedFd,
    unhandled: Vec<u8>,
    principal: Principal,
) -> Result<(), ApiError> {
    if shard.is_shutting_down() {
        return Err(ApiError::unavailable("broker is shutting down"));
    }
    // SAFETY: a connected TCP socket, owned by nothing else in the process.
    let stream = unsafe { TcpStream::from_raw_fd(socket.into_raw_fd()) };
    let conn = connection(shard.clone(), stream, unhandled, Some(VERSION), principal);
    crate::listen::listener::spawn_connection(shard, "binary", conn);
    Ok(())
}

/// How long a read in the middle of a large frame may wait
/// (`--frame-stall-ms`): a connection that sends nothing for this long is
/// closed with `frame_stalled`, and the budget it held freed, so a client
/// cannot hold a shard's large requests back by sending most of a frame
/// and stopping.
fn stall(shard: &Shard) -> std::time::Duration {
    std::time::Duration::from_millis(shard.config.frame_stall_ms)
}

/// What a large frame holds from when its header arrives until its
/// request is handled: its place among the requests in flight, its bytes
/// of the shard's budget, and the connection's activity (not idle).
struct Reserved {
    permit: StaticPermit,
    held: Held,
    busy: Busy,
}

/// The connection's watch (listen/watchdog.rs): once idle, the read loop is told
/// to end; once its writer has waited too long for the client to read,
/// the socket is shut down, which fails that write and frees what the
/// unwritten responses held. It gives no verdict once the connection has
/// ended its activity (before it closes or hands over its socket), and
/// is dropped with the connection.
async fn watch_over(shard: Rc<Shard>, activity: Rc<Activity>, interrupt: Rc<Interrupt>, fd: RawFd) {
    let idle = std::time::Duration::from_millis(shard.config.connection_idle_ms);
    let verdict = crate::listen::watchdog::watch(&activity, Some(idle), stall(&shard)).await;
    match verdict {
        Verdict::Idle => {
            metrics::counter!("es_connections_idle_closed_total", "listener" => "binary").increment(1);
        }
        Verdict::WriteStalled => {
            metrics::counter!("es_connections_write_stalled_total", "listener" => "binary").increment(1);
            // SAFETY: `fd` is the connection's socket, open until the
            // connection ends its activity, after which no verdict comes;
            // shutdown only ends its transfers.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    }
    interrupt.watched(verdict);
}

/// Serves one connection, watched (`watch_over`) in the same task: the
/// watch is part of the connection's future, not a task of its own, so
/// nothing of it outlives the connection.
async fn connection<S: Transport>(
    shard: Rc<Shard>,
    stream: S,
    unhandled: Vec<u8>,
    handshaken: Option<u16>,
    principal: Principal,
) {
    let activity = Activity::new();
    let interrupt = Rc::new(Interrupt::new());
    let watch = watch_over(shard.clone(), activity.clone(), interrupt.clone(), stream.fd());
    let served = serve_frames(
        shard, stream, unhandled, handshaken, principal, activity, interrupt,
    );
    futures::pin_mut!(served, watch);
    // The watch acts and ends; the connection goes on to its close.
    if let futures::future::Either::Right(((), served)) = futures::future::select(served, watch).await {
        served.await;
    }
}

/// The connection's frames: `unhandled` bytes already read from it come
/// first; `handshaken` once its Hello was answered (by the shard that
/// accepted it, if it moved here): the protocol version agreed, with the
/// `principal` it authenticated as.
async fn serve_frames<S: Transport>(
    shard: Rc<Shard>,
    stream: S,
    unhandled: Vec<u8>,
    handshaken: Option<u16>,
    principal: Principal,
    activity: Rc<Activity>,
    interrupt: Rc<Interrupt>,
) {
    let frame_max = shard.config.frame_bytes_max;
    let inflight_max = shard.config.inflight_requests_max;
    // The socket itself, for reads that bypass the stream (`read_rest`).
    let fd = stream.fd();
    let (mut rd, wr) = stream.split();
    let (tx, rx) = local_channel::new_bounded::<Outgoing>(inflight_max + 1);
    let tx = Rc::new(tx);
    let writer = glommio::spawn_local(super::outgoing::write_loop(rx, wr, activity.clone()));
    let permits = Rc::new(Semaphore::new(inflight_max as u64));
    // Fetch answers not yet written (`--response-connection-bytes`).
    let responses = Budget::new(shard.config.response_connection_bytes() as u64, None);
    // Unhandled bytes are buf[start..filled]; the socket reads straight
    // into buf[filled..] and frames are decoded where they lie.
    let mut buf = vec![0u8; READ_IDLE_BYTES.max(unhandled.len() + READ_ROOM_MIN_BYTES)];
    buf[..unhandled.len()].copy_from_slice(&unhandled);
    let (mut start, mut filled) = (0usize, unhandled.len());
    // The protocol version agreed in the handshake (before it, the oldest).
    let mut version = handshaken.unwrap_or(es_protocol::PROTOCOL_VERSION_MIN);
    let mut handshaken = handshaken.is_some();
    let mut principal = principal;
    let mut affinity = Affinity::default();
    // What the frame at `start` holds, reserved once its header showed it
    // large and before the rest of it was read.
    let mut reserved: Option<Reserved> = None;
    let muted = Rc::new(Muted::default());
    let cx = Cx {
        shard: &shard,
        interrupt: &interrupt,
        activity: &activity,
        permits: &permits,
        muted: &muted,
    };
    let end = 'conn: loop {
        // Handle every whole frame in the buffer.
        // Bytes the next frame needs from `start`, once no whole frame is left.
        let wanted = loop {
            if let Some(end) = interrupt.get() {
                break 'conn end;
            }
            // A key over its quota: no next frame until its throttle passed.
            if let Err(end) = wait_unmuted(cx.muted, cx.shard, cx.activity, cx.interrupt).await {
                break 'conn end;
            }
            let frame_max = if handshaken {
                frame_max
            } else {
                frame_max.min(HELLO_FRAME_BYTES_MAX)
            };
            let (id, gzip, incoming, held) = match frame::check(&buf[start..filled], frame_max) {
                Ok((h, used)) => {
                    let raw = &buf[start + frame::HEADER_BYTES..start + used];
                    start += used;
                    let gzip = h.flags & es_protocol::FLAG_GZIP != 0;
                    let req = match decode_request(&h, raw, frame_max) {
                        Ok(r) => Incoming::Request(r),
                        Err(resp) => break 'conn End::Refused(h.request_id, resp),
                    };
                    let held = match reserve(&cx, handshaken, &mut reserved, used).await {
                        Ok(held) => held,
                        Err(end) => break 'conn end,
                    };
                    (h.request_id, gzip, req, held)
                }
                Err(DecodeError::Incomplete { needed, .. }) => {
                    let Some(big) = large_batch(&buf[start..filled], frame_max) else {
                        break needed;
                    };
                    let held =
                        match reserve(&cx, handshaken, &mut reserved, big.batch_at + big.batch_len).await {
                            Ok(held) => held,
                            Err(end) => break 'conn end,
                        };
                    let arrived = &buf[start + big.batch_at..filled];
                    let allowed =
                        handshaken && principal.allows(Operation::Write, Resource::Topic, &big.topic);
                    let received = receive_batch(&cx, &mut rd, fd, big, arrived, allowed).await;
                    (start, filled) = (0, 0);
                    match received {
                        Ok((id, incoming)) => (id, false, incoming, held),
                        Err(end) => break 'conn end,
                    }
                }
                Err(e) => break 'conn refuse_frame(&buf[start..filled], e),
            };
            if !handshaken {
                match hello(&shard, incoming.request()) {
                    Ok((ok, who, agreed)) => {
                        handshaken = true;
                        version = agreed;
                        principal = who;
                        if tx.send(Outgoing::frame(ok.to_frame(id, false))).await.is_err() {
                            break 'conn End::Eof;
                        }
                        continue;
                    }
                    Err(resp) => break 'conn End::Refused(id, resp),
                }
            }
            if matches!(incoming.request(), Some(Request::Hello(_))) {
                break 'conn End::Refused(
                    id,
                    Response::error(ErrorCode::HANDSHAKE_REQUIRED, "Hello may only be the first frame"),
                );
            }
            // A revoked key's next request closes the connection.
            if let Err(resp) = super::handshake::still_valid(&shard, &mut principal) {
                break 'conn End::Refused(id, resp);
            }
            if let Some((topic, partition)) = incoming.partition() {
                affinity.note(shard.owner(topic, partition), shard.id);
            }
            let throttled = charge_arrival(&shard, &principal, &incoming, &muted);
            let request = Dispatched(incoming, id, gzip, throttled);
            dispatch(&cx, &tx, &responses, request, held, (&principal, version)).await;
        };
        if let Some(to) = affinity.target().filter(|_| S::MOVABLE) {
            if shard.config.move_connections && !shard.is_shutting_down() {
                break 'conn End::Move(to, buf[start..filled].to_vec());
            }
        }
        // A large frame is charged before the rest of it is read.
        reserved = match reserve(&cx, handshaken, &mut reserved, wanted).await {
            Ok(held) => held,
            Err(end) => break end,
        };
        make_room(&mut buf, &mut start, &mut filled, wanted, reserved.is_some());
        if let Err(end) = wait_unmuted(cx.muted, cx.shard, cx.activity, cx.interrupt).await {
            break end;
        }
        if let Err(end) = read_more(&cx, &mut rd, fd, &mut buf, start, &mut filled, reserved.is_some()).await
        {
            break end;
        }
    };
    // Its permit would keep the wait for the requests in flight below from
    // ever ending.
    drop(reserved);
    close(&cx, end, tx, writer, fd, principal, version).await;
}

/// Ends the connection once its read loop has: answers the error frame
/// its `end` calls for after the requests in flight have answered (a
/// shutdown finishes them), lets the writer write everything, then closes
/// the socket or hands it to the shard it moves to.
async fn close<S: Transport>(
    cx: &Cx<'_>,
    end: End,
    tx: Rc<LocalSender<Outgoing>>,
    writer: glommio::Task<Option<WriteHalf<S>>>,
    fd: RawFd,
    principal: Principal,
    version: u16,
) {
    let (shard, permits) = (cx.shard, cx.permits);
    let inflight_max = shard.config.inflight_requests_max;
    match &end {
        End::Refused(id, resp) => {
            metrics::counter!("es_binary_protocol_errors_total").increment(1);
            tracing::debug!(?resp, "closing a binary connection after a protocol error");
            // Let requests already running answer first, then the error.
            let _ = permits.acquire(inflight_max as u64).await;
            let _ = tx.send(Outgoing::frame(resp.to_frame(*id, false))).await;
        }
        End::Panicked(id) => {
            let _ = permits.acquire(inflight_max as u64).await;
            let e = ApiError::internal(
                "the broker failed while handling this request (a bug; its log says more); \
                 the connection is closed: reconnect to go on",
            );
            let resp = Response::error(e.code.wire(), e.message);
            let _ = tx.send(Outgoing::frame(resp.to_frame(*id, false))).await;
        }
        // Wait for in-flight requests to answer (a shutdown finishes them).
        _ => {
            let _ = permits.acquire(inflight_max as u64).await;
        }
    }
    drop(tx);
    let written = writer.await;
    // The writer is done with the socket: nothing is left to watch, and
    // the socket may close or move.
    cx.activity.end();
    let Some(mut wr) = written else { return };
    match end {
        // The reading half is dropped once the connection's future ends:
        // the socket lives on in the copy handed over, and is not shut
        // down.
        End::Move(to, unhandled) => move_to(shard, to, fd, unhandled, principal, version).await,
        _ => {
            let _ = futures::io::AsyncWriteExt::close(&mut wr).await;
        }
    }
}

/// Receives a large produce batch whose header and first bytes
/// (`arrived`) are read: into page-aligned memory of its own, at the
/// offset in a page where the partition's log ends, those already read,
/// then the rest straight from the socket, its pages written early as they
/// arrive (early.rs). Its request id and request, or why the connection
/// ends.
async fn receive_batch<S: Transport>(
    cx: &Cx<'_>,
    rd: &mut ReadHalf<S>,
    fd: RawFd,
    big: LargeBatch,
    arrived: &[u8],
    allowed: bool,
) -> Result<(u64, Incoming), End> {
    let shard = cx.shard;
    let receiving = std::time::Instant::now();
    // Requests read before this one (a pipelining producer) are placed
    // first: then the log ends where this batch will land.
    futures_lite::future::yield_now().await;
    let mut early = EarlyFeed::new(shard, &big.topic, big.partition, big.batch_len, allowed);
    let mut batch = ReceivingBatch::new(early.in_page_offset(), big.batch_len);
    batch.extend_from_slice(arrived);
    if let Err(end) = read_rest(cx, rd, fd, &mut batch, &mut early).await {
        return Err(end.stalled(shard, big.header.request_id));
    }
    shard.hot.batch_receive.record(receiving.elapsed().as_secs_f64());
    let id = big.header.request_id;
    match ProduceBatch::from_parts(big.topic, big.partition, batch.finish()) {
        Ok(pb) => Ok((id, Incoming::Batch(pb, early.into_write()))),
        Err(e) => Err(End::Refused(id, Response::error(code_for(&e), e.to_string()))),
    }
}

/// Runs request `id` in a task of its own, which answers through `tx`. A
/// large frame came with its permit and budget (`held`); others take a
/// permit now, holding no budget while they wait. A panic in its handling
/// interrupts the read loop, which answers it and closes. A throttled
/// answer (its arrival's, or the one its handling charged) is sent once
/// the throttle has passed, and the read loop reads nothing until then.
async fn dispatch(
    cx: &Cx<'_>,
    tx: &Rc<LocalSender<Outgoing>>,
    responses: &Rc<Budget>,
    request: Dispatched,
    held: Option<Reserved>,
    (principal, version): (&Principal, u16),
) {
    let Dispatched(incoming, id, gzip, throttled) = request;
    let (permit, budget, busy) = match held {
        Some(r) => (r.permit, Some(r.held), r.busy),
        None => (
            cx.permits
                .clone()
                .acquire_static_permit(1)
                .await
                .expect("semaphore never closes"),
            None,
            cx.activity.busy(),
        ),
    };
    let (shard, tx, interrupt, responses, principal, muted) = (
        cx.shard.clone(),
        tx.clone(),
        cx.interrupt.clone(),
        responses.clone(),
        principal.clone(),
        cx.muted.clone(),
    );
    glommio::spawn_local(async move {
        let endpoint = incoming.endpoint();
        let handling = super::handler::handle(&shard, incoming, (id, gzip, version), &responses, &principal);
        let handled = crate::listen::listener::guarded("binary", || endpoint.to_string(), handling).await;
        // The request's bytes are gone: what its answer holds is
        // its own charge (a fetch's), not the request's.
        drop(budget);
        match handled {
            Ok((mut out, throttle)) => {
                let until = throttled.max(muted.extend(throttle));
                if let Some(until) = until {
                    let left = until.saturating_duration_since(Instant::now());
                    crate::auth::quota::wait(&shard, left).await;
                }
                out.busy = Some(busy);
                let _ = tx.send(out).await;
            }
            // The read loop answers it, and closes.
            Err(()) => interrupt.panicked(id),
        }
        drop(permit);
    })
    .detach();
}

/// Reads more of the connection into `buf[filled..]`. With nothing
/// unhandled, takes what the socket holds without waiting; if it holds
/// nothing the connection is idle, and waits with a small buffer. A
/// `charged` frame (large, holding budget) waits at most
/// `--frame-stall-ms` for its next bytes.
async fn read_more<S: Transport>(
    cx: &Cx<'_>,
    rd: &mut ReadHalf<S>,
    fd: RawFd,
    buf: &mut Vec<u8>,
    start: usize,
    filled: &mut usize,
    charged: bool,
) -> Result<(), End> {
    let shard = cx.shard;
    if *filled == 0 {
        match S::read_now(rd, fd, buf) {
            Ok(0) => return Err(End::Eof),
            Ok(n) => {
                *filled = n;
                cx.activity.touch();
                // A producer that keeps the socket full still lets the
                // shard's other tasks run and sees a shutdown.
                glommio::yield_if_needed().await;
                if shard.is_shutting_down() {
                    return Err(End::Shutdown);
                }
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if buf.len() > READ_IDLE_BYTES {
                    *buf = vec![0u8; READ_IDLE_BYTES];
                }
            }
            Err(_) => return Err(End::Eof),
        }
    }
    let stall = charged.then(|| stall(shard));
    match read_or_stop(cx, rd, &mut buf[*filled..], stall).await {
        Ok(n) => {
            *filled += n;
            Ok(())
        }
        Err(end) => Err(end.stalled(shard, frame_id(&buf[start..*filled]))),
    }
}

/// Hands the connection's socket (every request answered, nothing left to
/// write), its unhandled bytes and its identity to shard `to`.
async fn move_to(
    shard: &Rc<Shard>,
    to: ShardId,
    fd: RawFd,
    unhandled: Vec<u8>,
    principal: Principal,
    version: u16,
) {
    // SAFETY: `fd` is this connection's socket, open until we return.
    let socket = match unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "could not move a binary connection: closing it");
            return;
        }
    };
    let op = Op::AdoptConnection {
        socket,
        unhandled,
        principal,
        // The fn for its version: the move carries the version agreed.
        adopt: if version >= 2 { adopt::<2> } else { adopt::<1> },
    };
    match shard.call(to, op).await {
        Reply::Done(Ok(())) => metrics::counter!("es_binary_connections_moved_total").increment(1),
        other => tracing::debug!(?other, to, "a binary connection could not move: closed"),
    }
}

/// What the read loop and its waits share.
struct Cx<'a> {
    shard: &'a Rc<Shard>,
    interrupt: &'a Rc<Interrupt>,
    activity: &'a Rc<Activity>,
    permits: &'a Rc<Semaphore>,
    muted: &'a Rc<Muted>,
}

/// What the frame at `start`, a frame of `bytes`, holds: what was already
/// `reserved` for it, else, if it is large (`CHARGED_FRAME_BYTES_MIN`)
/// and the connection past its handshake, a permit and then that many
/// bytes of the shard's budget, in turn (shard/budget.rs); or why the
/// connection ends meanwhile (the broker shuts down, an interrupt). The
/// permit comes first: the read loop never waits for one while it holds
/// budget, which request tasks may be waiting for. Budget waits are
/// counted (`es_request_budget_waits_total{listener}`).
async fn reserve(
    cx: &Cx<'_>,
    handshaken: bool,
    reserved: &mut Option<Reserved>,
    bytes: usize,
) -> Result<Option<Reserved>, End> {
    if let Some(r) = reserved.take() {
        return Ok(Some(r));
    }
    if bytes < CHARGED_FRAME_BYTES_MIN || !handshaken {
        return Ok(None);
    }
    // Waiting on the broker, not on the client: not idle.
    let busy = cx.activity.busy();
    let permit = {
        let permit = cx.permits.acquire_static_permit(1).fuse();
        let stop = cx.shard.shutdown.wait_for(1).fuse();
        let interrupted = cx.interrupt.wait().fuse();
        futures::pin_mut!(permit, stop, interrupted);
        futures::select! {
            p = permit => p.expect("semaphore never closes"),
            _ = stop => return Err(End::Shutdown),
            end = interrupted => return Err(end),
        }
    };
    let budget = &cx.shard.request_budget;
    let held = match budget.try_take(bytes as u64) {
        Some(held) => held,
        None => {
            metrics::counter!("es_request_budget_waits_total", "listener" => "binary").increment(1);
            let take = budget.take(bytes as u64).fuse();
            let stop = cx.shard.shutdown.wait_for(1).fuse();
            let interrupted = cx.interrupt.wait().fuse();
            futures::pin_mut!(take, stop, interrupted);
            futures::select! {
                held = take => held,
                _ = stop => return Err(End::Shutdown),
                end = interrupted => return Err(end),
            }
        }
    };
    Ok(Some(Reserved { permit, held, busy }))
}

/// Reads some bytes into `into`: how many, or why the connection ends (the
/// peer closed it or failed, the broker shuts down, one of its requests
/// panicked, or nothing came for `stall`).
async fn read_or_stop(
    cx: &Cx<'_>,
    rd: &mut (impl futures::io::AsyncRead + Unpin),
    into: &mut [u8],
    stall: Option<std::time::Duration>,
) -> Result<usize, End> {
    let read = rd.read(into).fuse();
    let stop = cx.shard.shutdown.wait_for(1).fuse();
    let stalled = async {
        match stall {
            Some(d) => glommio::timer::sleep(d).await,
            None => futures::future::pending().await,
        }
    }
    .fuse();
    let interrupted = cx.interrupt.wait().fuse();
    futures::pin_mut!(read, stop, stalled, interrupted);
    futures::select! {
        r = read => match r {
            Ok(0) | Err(_) => Err(End::Eof),
            Ok(n) => {
                cx.activity.touch();
                Ok(n)
            }
        },
        _ = stop => Err(End::Shutdown),
        end = interrupted => Err(end),
        _ = stalled => {
            metrics::counter!("es_binary_stalled_frames_total").increment(1);
            Err(End::Stalled)
        }
    }
}

/// Reads until `batch` is whole: what the socket holds goes straight into
/// the bytes it lacks (never zero-filled); when it holds nothing, waits
/// through the stream for the next bytes, reading at most
/// `WAIT_READ_BYTES` of them there (the only part zeroed first). Before
/// each wait, `early` writes what has arrived (early.rs): a batch that is
/// already in the socket is read whole and written once.
async fn read_rest<S: Transport>(
    cx: &Cx<'_>,
    rd: &mut ReadHalf<S>,
    fd: RawFd,
    batch: &mut ReceivingBatch,
    early: &mut EarlyFeed,
) -> Result<(), End> {
    while batch.filled_len() < batch.len() {
        match S::read_batch_now(rd, fd, batch) {
            Ok(0) => return Err(End::Eof),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                early.arrived(batch.filled());
                let n = read_or_stop(
                    cx,
                    rd,
                    batch.unfilled_zeroed(WAIT_READ_BYTES),
                    Some(stall(cx.shard)),
                )
                .await?;
                batch.received(n);
            }
            Err(_) => return Err(End::Eof),
        }
    }
    Ok(())
}

/// Decodes the request in a whole, checked frame; the error frame to answer
/// if it is not a request that decodes.
fn decode_request(h: &frame::FrameHeader, raw: &[u8], frame_max: usize) -> Result<Request, Response> {
    let refuse = |e: DecodeError| Response::error(code_for(&e), e.to_string());
    let kind = Kind::from_u8(h.kind)
        .ok_or_else(|| refuse(DecodeError::malformed(format!("unknown kind {:#04x}", h.kind))))?;
    let payload = frame::payload(h, raw, frame_max).map_err(refuse)?;
    Request::decode(kind, &payload).map_err(|e| {
        let code = if kind.is_request() {
            ErrorCode::MALFORMED_FRAME
        } else {
            ErrorCode::UNKNOWN_REQUEST
        };
        Response::error(code, e.to_string())
    })
}

fn code_for(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::TooLarge { .. } => ErrorCode::FRAME_TOO_LARGE,
        _ => ErrorCode::MALFORMED_FRAME,
    }
}

/// The answer to a frame that cannot be decoded.
fn refuse_frame(buf: &[u8], e: DecodeError) -> End {
    let id = if buf.len() >= frame::HEADER_BYTES {
        u64::from_be_bytes(buf[8..16].try_into().expect("8"))
    } else {
        0
    };
    End::Refused(id, Response::error(code_for(&e), e.to_string()))
}
