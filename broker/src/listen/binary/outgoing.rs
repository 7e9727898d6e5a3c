//! Responses on their way out of a connection, and the task that writes
//! them: small ones that are ready together go out in one write; the
//! stored batches a fetch carries go out as the buffers storage read them
//! into, never copied into one. What a response holds (its charge of the
//! budgets, its place among the connection's requests in flight) is
//! given back once its last byte is written; every write reports to the
//! connection's watch whether the socket takes bytes (listen/watchdog.rs).

use std::rc::Rc;

use futures::io::AsyncWriteExt;
use futures::FutureExt;
use glommio::channels::local_channel::LocalReceiver;

use crate::limits::{WRITE_COALESCE_BYTES, WRITE_DIRECT_BYTES_MIN};
use crate::listen::watchdog::{Activity, Busy};
use crate::shard::budget::Charge;

/// One response frame: `head`, then the `body` buffers back to back.
pub struct Outgoing {
    pub head: Vec<u8>,
    pub body: Vec<bytes::Bytes>,
    /// The bytes of the budgets its memory holds (a fetch's answer).
    pub charge: Option<Charge>,
    /// Its request, in flight until this is written.
    pub busy: Option<Busy>,
}

impl Outgoing {
    /// A frame held whole in one buffer.
    pub fn frame(head: Vec<u8>) -> Outgoing {
        Outgoing {
            head,
            body: Vec::new(),
            charge: None,
            busy: None,
        }
    }

    /// Its length on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.iter().map(|b| b.len()).sum::<usize>()
    }
}

/// What the responses being written hold, given back once what was
/// gathered for them has been written.
#[derive(Default)]
struct Written {
    charges: Vec<Charge>,
    busy: Vec<Busy>,
}

impl Written {
    fn keep(&mut self, out: Option<Charge>, busy: Option<Busy>) {
        self.charges.extend(out);
        self.busy.extend(busy);
    }

    fn release(&mut self) {
        self.charges.clear();
        self.busy.clear();
    }
}

/// Writes all of `buf`, telling `activity` whether the socket takes bytes.
async fn write_all<W: futures::io::AsyncWrite + Unpin>(
    wr: &mut W,
    mut buf: &[u8],
    activity: &Activity,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        activity.write_waits();
        let n = wr.write(buf).await?;
        activity.wrote();
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
    }
    Ok(())
}

/// Writes what `rx` brings to `wr` until the channel closes (every sender
/// gone): returns `wr`, everything written and flushed, for the caller to
/// shut down (or to leave open for a connection that moves to another
/// shard). `None` once a write fails: then every response still sent is
/// dropped as it comes (with what it holds), until the channel closes.
pub async fn write_loop<W: futures::io::AsyncWrite + Unpin>(
    rx: LocalReceiver<Outgoing>,
    wr: W,
    activity: Rc<Activity>,
) -> Option<W> {
    match write_all_sent(&rx, wr, &activity).await {
        Ok(wr) => Some(wr),
        Err(()) => {
            while let Some(out) = rx.recv().await {
                drop(out);
            }
            None
        }
    }
}

/// [`write_loop`] until the channel closes or a write fails.
async fn write_all_sent<W: futures::io::AsyncWrite + Unpin>(
    rx: &LocalReceiver<Outgoing>,
    mut wr: W,
    a: &Activity,
) -> Result<W, ()> {
    let mut gathered: Vec<u8> = Vec::new();
    let mut written = Written::default();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(out) = next.take() {
            if gathered.is_empty() && out.body.is_empty() {
                // Alone so far: its buffer becomes the write, no copy.
                gathered = out.head;
            } else {
                gathered.extend_from_slice(&out.head);
                for part in out.body {
                    if part.len() < WRITE_DIRECT_BYTES_MIN {
                        gathered.extend_from_slice(&part);
                        continue;
                    }
                    if !gathered.is_empty() && write_all(&mut wr, &gathered, a).await.is_err() {
                        return Err(());
                    }
                    gathered.clear();
                    // What was gathered before is out: so are the
                    // responses it ended.
                    written.release();
                    if write_all(&mut wr, &part, a).await.is_err() {
                        return Err(());
                    }
                }
            }
            // The rest of this response, if any, is in `gathered`.
            written.keep(out.charge, out.busy);
            if gathered.len() < WRITE_COALESCE_BYTES {
                next = rx.recv().now_or_never().flatten();
            }
        }
        if !gathered.is_empty() && write_all(&mut wr, &gathered, a).await.is_err() {
            return Err(());
        }
        a.write_waits();
        let flushed = wr.flush().await;
        a.wrote();
        if flushed.is_err() {
            return Err(());
        }
        written.release();
        // Keep a small buffer for the next round, not a large one.
        if gathered.capacity() > WRITE_COALESCE_BYTES {
            gathered = Vec::new();
        } else {
            gathered.clear();
        }
    }
    Ok(wr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::channels::local_channel;

    /// A writer that records each write call.
    #[derive(Default)]
    struct Calls(Vec<Vec<u8>>);

    impl futures::io::AsyncWrite for Calls {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.0.push(buf.to_vec());
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn responses_come_out_in_order_small_parts_gathered_large_ones_as_they_are() {
        let calls = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .unwrap()
            .run(async {
                let (tx, rx) = local_channel::new_bounded(16);
                let big = bytes::Bytes::from(vec![9u8; WRITE_DIRECT_BYTES_MIN]);
                let sent = vec![
                    Outgoing::frame(b"a".to_vec()),
                    Outgoing {
                        body: vec![bytes::Bytes::from_static(b"cd"), big.clone()],
                        ..Outgoing::frame(b"b".to_vec())
                    },
                    Outgoing {
                        body: vec![bytes::Bytes::from_static(b"f")],
                        ..Outgoing::frame(b"e".to_vec())
                    },
                ];
                for out in sent {
                    tx.try_send(out).unwrap();
                }
                drop(tx);
                let mut calls = Calls::default();
                write_loop(rx, &mut calls, Activity::new()).await;
                calls.0
            });
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert_eq!(calls[0], b"abcd");
        assert_eq!(
            calls[1],
            vec![9u8; WRITE_DIRECT_BYTES_MIN],
            "the large part on its own"
        );
        assert_eq!(calls[2], b"ef");
    }
}
