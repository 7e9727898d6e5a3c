//! hyper 1.x on glommio: an adapter from futures-io streams to hyper's
//! `rt::Read`/`rt::Write` that reports to the connection's watch whether
//! the socket takes bytes and gives back what written responses held
//! ([`Written`]), and a `rt::Timer` on glommio's timers (so hyper's
//! header-read timeout is enforced).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncWrite};

use crate::listen::watchdog::Activity;
use crate::shard::budget::Charge;

/// A glommio stream as hyper I/O, its writes counted in `written`.
pub struct HyperIo<S> {
    pub stream: S,
    pub written: Rc<Written>,
}

/// What one HTTP connection has written, and the charges of response
/// bodies that are given back once written. Responses go out one after
/// the other on an HTTP/1.1 connection, so a body's charge is given back
/// once the connection has written that many bytes more than it had when
/// the body was queued, after the bodies queued before it: its headers
/// (a few hundred bytes) may still be on their way then.
pub struct Written {
    bytes: Cell<u64>,
    /// Where the last queued body ends, in bytes written.
    queued_to: Cell<u64>,
    charges: RefCell<VecDeque<(u64, Charge)>>,
    pub activity: Rc<Activity>,
}

impl Written {
    pub fn new(activity: Rc<Activity>) -> Rc<Written> {
        Rc::new(Written {
            bytes: Cell::new(0),
            queued_to: Cell::new(0),
            charges: RefCell::new(VecDeque::new()),
            activity,
        })
    }

    /// Holds `charge` until a body of `len` bytes, queued now, is written.
    pub fn hold_until_written(&self, len: u64, charge: Charge) {
        let end = self.queued_to.get().max(self.bytes.get()) + len;
        self.queued_to.set(end);
        self.charges.borrow_mut().push_back((end, charge));
    }

    fn wrote(&self, n: usize) {
        self.bytes.set(self.bytes.get() + n as u64);
        self.activity.wrote();
        let mut charges = self.charges.borrow_mut();
        while charges.front().is_some_and(|(end, _)| *end <= self.bytes.get()) {
            charges.pop_front();
        }
    }

    /// The poll of a write or flush: the watch hears whether the socket
    /// takes bytes.
    fn report<T>(&self, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match &poll {
            Poll::Pending => self.activity.write_waits(),
            Poll::Ready(_) => self.activity.wrote(),
        }
        poll
    }
}

impl<S: AsyncRead + Unpin> hyper::rt::Read for HyperIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: the slice is fully initialized (zeroed) before it is handed
        // out as `&mut [u8]`, and `advance` covers only bytes read into it.
        let n = unsafe {
            let uninit = buf.as_mut();
            for b in uninit.iter_mut() {
                b.write(0);
            }
            let init = &mut *(uninit as *mut [MaybeUninit<u8>] as *mut [u8]);
            match Pin::new(&mut self.stream).poll_read(cx, init) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        };
        // SAFETY: `poll_read` wrote `n` bytes into the slice handed out
        // above, all of it initialized.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> hyper::rt::Write for HyperIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            this.written.wrote(*n);
        }
        this.written.report(poll)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.stream).poll_flush(cx);
        this.written.report(poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_close(cx)
    }
}

/// hyper's timer on glommio.
#[derive(Clone, Copy, Debug, Default)]
pub struct GlommioTimer;

impl hyper::rt::Timer for GlommioTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(glommio::timer::Timer::new(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep(deadline.saturating_duration_since(Instant::now()))
    }
}

struct Sleep(glommio::timer::Timer);

// SAFETY: hyper asks for `Send + Sync` sleeps, but a sleep only lives inside
// the connection future that created it, and that future holds a glommio
// socket, which is `!Send`: it never leaves its shard's thread.
unsafe impl Send for Sleep {}
// SAFETY: as for `Send`: it is only ever touched on its shard's thread.
unsafe impl Sync for Sleep {}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl hyper::rt::Sleep for Sleep {}
