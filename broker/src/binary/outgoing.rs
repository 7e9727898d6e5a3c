//! Responses on their way out of a connection, and the task that writes
//! them: small ones that are ready together go out in one write; the
//! stored batches a fetch carries go out as the buffers storage read them
//! into, never copied into one.

use futures::io::AsyncWriteExt;
use futures::FutureExt;
use glommio::channels::local_channel::LocalReceiver;

/// Responses that are ready together are gathered into one write, up to
/// this many bytes.
const WRITE_COALESCE_BYTES: usize = 1 << 20;
/// A part of a response at least this large is written as it is (after
/// what was gathered before it) instead of being copied into the gathered
/// write: one more syscall costs less than copying it.
const WRITE_DIRECT_BYTES_MIN: usize = 64 << 10;

/// One response frame: `head`, then the `body` buffers back to back.
#[derive(Debug)]
pub struct Outgoing {
    pub head: Vec<u8>,
    pub body: Vec<bytes::Bytes>,
}

impl Outgoing {
    /// A frame held whole in one buffer.
    pub fn frame(head: Vec<u8>) -> Outgoing {
        Outgoing {
            head,
            body: Vec::new(),
        }
    }
}

/// Writes what `rx` brings to `wr` until the channel closes (every sender
/// gone): returns `wr`, everything written and flushed, for the caller to
/// shut down (or to leave open for a connection that moves to another
/// shard). `None` once a write fails.
pub async fn write_loop<W: futures::io::AsyncWrite + Unpin>(
    rx: LocalReceiver<Outgoing>,
    mut wr: W,
) -> Option<W> {
    let mut gathered: Vec<u8> = Vec::new();
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
                    if !gathered.is_empty() && wr.write_all(&gathered).await.is_err() {
                        return None;
                    }
                    gathered.clear();
                    if wr.write_all(&part).await.is_err() {
                        return None;
                    }
                }
            }
            if gathered.len() < WRITE_COALESCE_BYTES {
                next = rx.recv().now_or_never().flatten();
            }
        }
        if !gathered.is_empty() && wr.write_all(&gathered).await.is_err() {
            return None;
        }
        if wr.flush().await.is_err() {
            return None;
        }
        // Keep a small buffer for the next round, not a large one.
        if gathered.capacity() > WRITE_COALESCE_BYTES {
            gathered = Vec::new();
        } else {
            gathered.clear();
        }
    }
    Some(wr)
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
                        head: b"b".to_vec(),
                        body: vec![bytes::Bytes::from_static(b"cd"), big.clone()],
                    },
                    Outgoing {
                        head: b"e".to_vec(),
                        body: vec![bytes::Bytes::from_static(b"f")],
                    },
                ];
                for out in sent {
                    tx.try_send(out).unwrap();
                }
                drop(tx);
                let mut calls = Calls::default();
                write_loop(rx, &mut calls).await;
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
