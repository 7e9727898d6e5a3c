//! hyper 1.x on glommio: an adapter from futures-io streams to hyper's
//! `rt::Read`/`rt::Write`, and a `rt::Timer` on glommio's timers (so
//! hyper's header-read timeout is enforced).

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncWrite};

/// A glommio stream as hyper I/O.
pub struct HyperIo<S>(pub S);

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
            match Pin::new(&mut self.0).poll_read(cx, init) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        };
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> hyper::rt::Write for HyperIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
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
unsafe impl Sync for Sleep {}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

impl hyper::rt::Sleep for Sleep {}
