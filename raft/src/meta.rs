//! `RaftMeta`: what a replica keeps besides its log, in its own directory
//! (`data/raft/<topic>/<partition>/`, the spec's §1.7):
//!
//! - `vote`: the last vote, durable before openraft is told it is saved
//!   (written to a temporary file, fdatasynced, renamed, directory
//!   fsynced): a replica that forgot its vote could vote twice in a term.
//! - `purged`: the last log id purged (same protocol; rare).
//! - `snapshot`: the last snapshot's descriptor (same protocol).
//!
//! - `committed`: the last committed log id, a hint and a lower bound:
//!   written in place (one `pwrite` of 20 bytes, never fsynced) behind
//!   openraft's `save_committed`, so a commit never waits on it: one
//!   writer task at a time, which writes the latest value, then waits
//!   `COMMITTED_WRITE_INTERVAL` before it looks again (a busy replica
//!   writes it about ten times a second, not once per commit), and opens
//!   the file for each write (a replica holds no descriptor for it). A
//!   restarted replica re-applies its log up to it before it hears from a
//!   leader, so it serves what it had committed at once. Lost, late or
//!   torn (a crash before the page cache reached the disk), it is only
//!   older: a file that fails its CRC or is short reads as none.
//!
//! Each file is its payload followed by its CRC-32; a vote, purge point or
//! snapshot file that fails its CRC is refused (the replica does not
//! start), never guessed at.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use std::time::Duration;

use glommio::io::OpenOptions;
use openraft::{StorageError, StorageIOError};

use crate::types::{log_id, LogId, NodeId, StorageResult, Vote};

const VOTE: &str = "vote";
const PURGED: &str = "purged";
const SNAPSHOT: &str = "snapshot";
const COMMITTED: &str = "committed";

/// How long the committed file's writer waits after a write before it
/// writes a newer value: what a restarted replica's hint may lag by.
pub const COMMITTED_WRITE_INTERVAL: Duration = Duration::from_millis(100);

/// A replica's vote, purge point, snapshot descriptor and committed log
/// id, on disk and cached.
pub struct RaftMeta {
    dir: PathBuf,
    vote: Cell<Option<Vote>>,
    purged: Cell<Option<LogId>>,
    snapshot: RefCell<Option<Vec<u8>>>,
    committed: Rc<Committed>,
}

/// The committed log id and its file, written behind.
struct Committed {
    /// The latest value openraft saved.
    value: Cell<Option<LogId>>,
    /// What the file holds (as far as this process wrote it).
    in_file: Cell<Option<LogId>>,
    path: PathBuf,
    /// The writer task, while one runs (see the module's notes).
    writer: RefCell<Option<glommio::task::JoinHandle<()>>>,
    /// Set by `close`: no writer starts after it.
    closed: Cell<bool>,
}

impl Committed {
    /// Writes `c` in place: open, one pwrite, close; no fsync.
    async fn write(&self, c: LogId) -> std::io::Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .buffered_open(&self.path)
            .await?;
        let written = file.write_at(seal(encode_log_id(&c)), 0).await;
        let closed = file.close().await;
        written?;
        closed?;
        Ok(())
    }

    /// Writes the latest value if the file does not hold it yet.
    async fn catch_up(&self) -> bool {
        let Some(c) = self.value.get().filter(|&c| self.in_file.get() != Some(c)) else {
            return false;
        };
        match self.write(c).await {
            Ok(()) => self.in_file.set(Some(c)),
            Err(e) => tracing::warn!(
                file = %self.path.display(),
                error = %e,
                "could not note the committed log id (a hint: a restart learns it from the leader)"
            ),
        }
        true
    }
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write(&std::io::Error::other(format!("{}: {e}", path.display()))).into()
}

/// `payload ++ crc32(payload)`.
fn seal(mut payload: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

/// The payload of a sealed file, `None` if its CRC fails.
fn unseal(bytes: &[u8]) -> Option<&[u8]> {
    let (payload, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    (crc32fast::hash(payload).to_le_bytes() == crc).then_some(payload)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn encode_vote(v: &Vote) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    out.extend_from_slice(&v.leader_id.term.to_le_bytes());
    out.extend_from_slice(&v.leader_id.voted_for.unwrap_or(u64::MAX).to_le_bytes());
    out.push(v.committed as u8);
    out
}

fn decode_vote(b: &[u8]) -> Option<Vote> {
    let term = u64_at(b, 0)?;
    let node = u64_at(b, 8)?;
    let committed = *b.get(16)? != 0;
    let mut v = Vote::new(term, node);
    if node == u64::MAX {
        v.leader_id.voted_for = None;
    }
    if committed {
        v.commit();
    }
    Some(v)
}

fn encode_log_id(l: &LogId) -> Vec<u8> {
    let mut out = l.leader_id.term.to_le_bytes().to_vec();
    out.extend_from_slice(&l.index.to_le_bytes());
    out
}

fn decode_log_id(b: &[u8]) -> Option<LogId> {
    Some(log_id(u64_at(b, 0)?, u64_at(b, 8)?))
}

impl RaftMeta {
    /// Opens (creating) the metadata directory `dir` and reads its files.
    pub async fn open(dir: &Path) -> StorageResult<RaftMeta> {
        es_storage::create_dir_all(dir)
            .await
            .map_err(|e| io_err(dir, e))?;
        let path = dir.join(COMMITTED);
        // The committed file is a hint: what it holds is checked, never
        // required (it is not fsynced, so a crash may leave it short).
        let in_file = es_storage::read_file(&path)
            .await
            .map_err(|e| io_err(&path, e))?
            .and_then(|b| unseal(&b).and_then(decode_log_id));
        let meta = RaftMeta {
            dir: dir.to_path_buf(),
            vote: Cell::new(None),
            purged: Cell::new(None),
            snapshot: RefCell::new(None),
            committed: Rc::new(Committed {
                value: Cell::new(in_file),
                in_file: Cell::new(in_file),
                path,
                writer: RefCell::new(None),
                closed: Cell::new(false),
            }),
        };
        meta.vote.set(meta.read(VOTE, decode_vote).await?);
        meta.purged.set(meta.read(PURGED, decode_log_id).await?);
        *meta.snapshot.borrow_mut() = meta.read(SNAPSHOT, |b| Some(b.to_vec())).await?;
        Ok(meta)
    }

    /// Stops the committed file's writer and writes the latest value (a
    /// replica stopping): the file then holds the last committed log id
    /// openraft saved.
    pub async fn close(&self) {
        let committed = &self.committed;
        committed.closed.set(true);
        let writer = committed.writer.borrow_mut().take();
        if let Some(w) = writer {
            // A write it had in flight may still land; it is older than
            // the one below, and either is a lower bound.
            w.cancel();
            w.await;
        }
        committed.catch_up().await;
    }

    /// The metadata directory (`data/raft/<topic>/<partition>/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads the sealed file `name` (payload + CRC-32); `None` if absent,
    /// an error if it fails its checksum.
    pub(crate) async fn read<T>(
        &self,
        name: &str,
        decode: impl Fn(&[u8]) -> Option<T>,
    ) -> StorageResult<Option<T>> {
        let path = self.dir.join(name);
        let Some(bytes) = es_storage::read_file(&path).await.map_err(|e| io_err(&path, e))? else {
            return Ok(None);
        };
        let value = unseal(&bytes)
            .and_then(decode)
            .ok_or_else(|| io_err(&path, "fails its checksum: refusing to guess"))?;
        Ok(Some(value))
    }

    /// Writes the sealed file `name` atomically and durably (temporary
    /// file, fdatasync, rename, directory fsync).
    pub(crate) async fn write(&self, name: &str, payload: Vec<u8>) -> StorageResult<()> {
        es_storage::write_file_atomic(&self.dir, name, seal(payload))
            .await
            .map_err(|e| io_err(&self.dir.join(name), e))
    }

    /// Removes the file `name`, durably (directory fsynced).
    pub(crate) async fn remove(&self, name: &str) -> StorageResult<()> {
        let path = self.dir.join(name);
        es_storage::remove_if_exists(&path)
            .await
            .map_err(|e| io_err(&path, e))?;
        es_storage::sync_dir(&self.dir)
            .await
            .map_err(|e| io_err(&self.dir, e))
    }

    pub fn vote(&self) -> Option<Vote> {
        self.vote.get()
    }

    /// Saves `v`, durable when this returns.
    pub async fn save_vote(&self, v: &Vote) -> StorageResult<()> {
        self.write(VOTE, encode_vote(v)).await?;
        self.vote.set(Some(*v));
        Ok(())
    }

    pub fn purged(&self) -> Option<LogId> {
        self.purged.get()
    }

    /// Saves the purge point, durable when this returns.
    pub async fn save_purged(&self, l: &LogId) -> StorageResult<()> {
        self.write(PURGED, encode_log_id(l)).await?;
        self.purged.set(Some(*l));
        Ok(())
    }

    /// The last committed log id saved (read from the file at open).
    pub fn committed(&self) -> Option<LogId> {
        self.committed.value.get()
    }

    /// Notes the committed log id `c` and has it written to the file
    /// behind (see the module's notes); returns at once.
    pub fn note_committed(&self, c: Option<LogId>) {
        let committed = &self.committed;
        committed.value.set(c);
        let running = committed.writer.borrow().as_ref().is_some();
        if running || committed.closed.get() || committed.in_file.get() == c {
            return;
        }
        let task = Rc::clone(committed);
        let handle = glommio::spawn_local(async move {
            // Each round writes what is current when it starts, then
            // waits; the task ends once a round finds nothing new.
            while task.catch_up().await {
                glommio::timer::sleep(COMMITTED_WRITE_INTERVAL).await;
            }
            task.writer.borrow_mut().take();
        })
        .detach();
        *committed.writer.borrow_mut() = Some(handle);
    }

    /// The last snapshot descriptor saved.
    pub fn snapshot(&self) -> Option<Vec<u8>> {
        self.snapshot.borrow().clone()
    }

    /// Saves a snapshot descriptor, durable when this returns.
    pub async fn save_snapshot(&self, descriptor: Vec<u8>) -> StorageResult<()> {
        self.write(SNAPSHOT, descriptor.clone()).await?;
        *self.snapshot.borrow_mut() = Some(descriptor);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Any file content (the committed file is never fsynced: a crash
        // can leave anything there) reads as a log id or as none.
        #[test]
        fn any_file_reads_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = unseal(&bytes).and_then(decode_log_id);
            let _ = unseal(&bytes).and_then(decode_vote);
        }
    }

    #[test]
    fn votes_and_log_ids_round_trip_and_a_bad_crc_is_refused() {
        let mut v = Vote::new(7, 3);
        assert_eq!(decode_vote(&encode_vote(&v)), Some(v));
        v.commit();
        assert_eq!(decode_vote(&encode_vote(&v)), Some(v));
        let l = log_id(4, 99);
        assert_eq!(decode_log_id(&encode_log_id(&l)), Some(l));
        let mut sealed = seal(encode_log_id(&l));
        assert!(unseal(&sealed).is_some());
        sealed[3] ^= 1;
        assert!(unseal(&sealed).is_none());
        assert!(unseal(&[1, 2]).is_none());
    }
}
