//! What a binary connection runs over: a plain TCP stream, or TLS over one
//! (listen/tls/). The read loop is generic over it, so the plaintext path
//! compiles to what it was: reads that bypass the stream go straight to
//! the socket (recv.rs), into the read buffer or a large batch's own
//! memory. Over TLS every byte goes through the session, which decrypts
//! into the same places (one copy, out of rustls's buffer).
//!
//! A TLS connection never moves to another shard (affinity.rs): its
//! session state lives in this shard's memory, and only a bare socket can
//! be handed over. Its requests for other shards' partitions go through
//! the mesh, as for any connection that has not moved (docs/security.md).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use es_storage::ReceivingBatch;
use futures::io::{AsyncRead, AsyncWrite, ReadHalf};
use futures_rustls::server::TlsStream;
use glommio::net::TcpStream;

/// Most bytes a TLS read that does not wait takes into a large batch at
/// once: a TLS record holds at most 16 KiB of plaintext, and the slice is
/// zeroed first (decrypted bytes are copied into initialized memory).
const TLS_BATCH_READ_BYTES: usize = 64 << 10;

/// A binary connection's byte stream.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Sized + 'static {
    /// Whether the connection may move to another shard as its bare socket.
    const MOVABLE: bool;

    /// The socket under it.
    fn fd(&self) -> RawFd;

    /// Reads what has arrived into `into` without waiting: how many bytes,
    /// `Ok(0)` once the peer has closed, `WouldBlock` when nothing is there
    /// yet (then wait through `rd`).
    fn read_now(rd: &mut ReadHalf<Self>, fd: RawFd, into: &mut [u8]) -> io::Result<usize>;

    /// [`Transport::read_now`] into the bytes `batch` still lacks.
    fn read_batch_now(rd: &mut ReadHalf<Self>, fd: RawFd, batch: &mut ReceivingBatch) -> io::Result<usize>;
}

impl Transport for TcpStream {
    const MOVABLE: bool = true;

    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }

    #[inline]
    fn read_now(_: &mut ReadHalf<Self>, fd: RawFd, into: &mut [u8]) -> io::Result<usize> {
        super::recv::recv_now(fd, into)
    }

    #[inline]
    fn read_batch_now(_: &mut ReadHalf<Self>, fd: RawFd, batch: &mut ReceivingBatch) -> io::Result<usize> {
        super::recv::recv_batch(fd, batch)
    }
}

impl Transport for TlsStream<TcpStream> {
    const MOVABLE: bool = false;

    fn fd(&self) -> RawFd {
        self.get_ref().0.as_raw_fd()
    }

    fn read_now(rd: &mut ReadHalf<Self>, _: RawFd, into: &mut [u8]) -> io::Result<usize> {
        if into.is_empty() {
            return Ok(0);
        }
        // Polled once, without a task to wake: what the session holds
        // decrypted, or what the socket holds now. A later wait through
        // `rd` registers its own waker (glommio keeps only the last).
        match Pin::new(rd).poll_read(&mut Context::from_waker(Waker::noop()), into) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn read_batch_now(rd: &mut ReadHalf<Self>, fd: RawFd, batch: &mut ReceivingBatch) -> io::Result<usize> {
        let n = Self::read_now(rd, fd, batch.unfilled_zeroed(TLS_BATCH_READ_BYTES))?;
        batch.received(n);
        Ok(n)
    }
}
