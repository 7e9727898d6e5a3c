//! The SHA-256 of a stream, computed beside the copy: an entry's bytes are
//! gathered in chunks of [`HASH_CHUNK_BYTES`] and hashed on a thread of
//! their own, so a dump or a restore hashes one chunk while it reads and
//! writes the next (SHA-256 is most of their CPU). An entry smaller than
//! one chunk is hashed where it is, with no thread. At most
//! [`HASH_QUEUE_CHUNKS`] chunks wait for the hasher: memory stays bounded
//! and a slow hasher slows the copy.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use ring::digest::{Context, Digest, SHA256};

use crate::limits::{HASH_CHUNK_BYTES, HASH_QUEUE_CHUNKS};

pub struct Sha256Stream {
    pending: Vec<u8>,
    worker: Option<(SyncSender<Vec<u8>>, JoinHandle<Digest>)>,
    /// Where the hashing happens when no thread could be started.
    inline: Option<Context>,
}

impl Default for Sha256Stream {
    fn default() -> Sha256Stream {
        Sha256Stream::new()
    }
}

impl Sha256Stream {
    pub fn new() -> Sha256Stream {
        Sha256Stream {
            pending: Vec::new(),
            worker: None,
            inline: None,
        }
    }

    pub fn update(&mut self, mut data: &[u8]) {
        if let Some(ctx) = &mut self.inline {
            ctx.update(data);
            return;
        }
        while !data.is_empty() {
            let room = HASH_CHUNK_BYTES - self.pending.len();
            let (now, rest) = data.split_at(room.min(data.len()));
            self.pending.extend_from_slice(now);
            data = rest;
            if self.pending.len() == HASH_CHUNK_BYTES {
                self.hand_over();
            }
        }
    }

    /// Hands the full pending chunk to the hasher thread, started on the
    /// first one.
    fn hand_over(&mut self) {
        let chunk = std::mem::replace(&mut self.pending, Vec::with_capacity(HASH_CHUNK_BYTES));
        if self.worker.is_none() {
            let (tx, rx) = sync_channel::<Vec<u8>>(HASH_QUEUE_CHUNKS);
            let spawned = std::thread::Builder::new()
                .name("es-tools-sha256".into())
                .spawn(move || {
                    let mut ctx = Context::new(&SHA256);
                    for chunk in rx {
                        ctx.update(&chunk);
                    }
                    ctx.finish()
                });
            match spawned {
                Ok(handle) => self.worker = Some((tx, handle)),
                Err(_) => {
                    let mut ctx = Context::new(&SHA256);
                    ctx.update(&chunk);
                    self.inline = Some(ctx);
                    return;
                }
            }
        }
        if let Some((tx, _)) = &self.worker {
            // The hasher ends only when the sender is dropped (finish).
            let _ = tx.send(chunk);
        }
    }

    /// The digest of everything given, as lowercase hex.
    pub fn finish(mut self) -> String {
        let digest = match (self.inline.take(), self.worker.take()) {
            (Some(mut ctx), _) => {
                ctx.update(&self.pending);
                ctx.finish()
            }
            (None, Some((tx, handle))) => {
                if !self.pending.is_empty() {
                    let _ = tx.send(std::mem::take(&mut self.pending));
                }
                drop(tx);
                match handle.join() {
                    Ok(d) => d,
                    // Never expected; a digest no entry can have, so the
                    // archive fails its check rather than passing unhashed.
                    Err(_) => return "hashing-thread-failed".to_string(),
                }
            }
            (None, None) => ring::digest::digest(&SHA256, &self.pending),
        };
        crate::show::hex(digest.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_sha256_however_the_bytes_come() {
        let data: Vec<u8> = (0..3 * HASH_CHUNK_BYTES + 12345)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let want = crate::show::hex(ring::digest::digest(&SHA256, &data).as_ref());
        for step in [4096usize, 1000003, 1 << 20, 3 << 20, data.len()] {
            let mut s = Sha256Stream::new();
            for c in data.chunks(step) {
                s.update(c);
            }
            assert_eq!(s.finish(), want, "step {step}");
        }
        let small = Sha256Stream::new();
        assert_eq!(
            small.finish(),
            crate::show::hex(ring::digest::digest(&SHA256, b"").as_ref())
        );
    }
}
