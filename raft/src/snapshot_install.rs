//! Installing a snapshot received from a leader (the spec's §5.4): the run
//! of the leader's log this replica lacked, staged in
//! `data/raft/<topic>/<p>/incoming/`, replaces the log after the last
//! entry the replica keeps. Steps:
//!
//! 1. the staged file is complete, fdatasynced and its directory fsynced
//!    (the receiver did it at done: `snapshot_recv.rs`);
//! 2. **commit**: `install.swap` (the entry kept, the staged file's name,
//!    the snapshot's descriptor; CRC-32) is written atomically and durably;
//! 3. the log is cut after the entry kept (`PartitionLog::truncate_from`,
//!    in place: an uncommitted tail goes, committed entries stay); with
//!    nothing staged (the replica held the snapshot's entries) nothing is
//!    cut;
//! 4. the staged entries are placed in the log (each batch's CRC and
//!    stamp checked again, as any follower's copy) and waited for durable;
//! 5. the descriptor is saved (`snapshot`), which is what a restart reads;
//! 6. `install.swap` and the staged file are removed.
//!
//! Recovery, when the store opens (`recover`): `install.swap` present →
//! steps 3-6 again (each is idempotent: the cut removes whatever part of
//! the staged entries a crash left, and they are placed again from the
//! staged file, which lives until step 6); absent → `incoming/` is
//! emptied. So a crash leaves the old log (before step 2) or the new one
//! (from step 2 on), never a hole: the entries after the cut are only ever
//! the staged ones, placed in order.
//!
//! The staged entries are written twice (staged, then placed): simpler
//! than renaming staged segment files in, and the cost of a transfer is
//! the network's and the leader's read, not this write.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use es_storage::batch::{self, CONTROL_BLANK, CONTROL_MEMBERSHIP};
use es_storage::PartitionLog;
use glommio::io::BufferedFile;
use openraft::{StorageError, StorageIOError};
use serde_json::{json, Value};

use crate::entry::{EntryBatch, EsEntry, EsPayload};
use crate::limits::SNAPSHOT_INSTALL_DURABLE_EVERY_BYTES;
use crate::log_store::body_of;
use crate::membership;
use crate::meta::RaftMeta;
use crate::snapshot::Start;
use crate::types::{log_id, LogId, NodeId, StorageResult};

/// The install's commit point, in the replica's metadata directory.
pub const MANIFEST: &str = "install.swap";
/// Where a snapshot being received is staged, in the metadata directory.
pub const INCOMING: &str = "incoming";

/// Bytes read from a staged file at a time (more when a batch is larger).
const READ_BYTES: usize = 1 << 20;

fn io(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_logs(&std::io::Error::other(e.to_string())).into()
}

/// A committed install not finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The last entry kept (`None`: the log is replaced whole).
    pub after: Option<LogId>,
    /// The log is reset to start here before the staged entries are placed
    /// (the cut is "all": `PartitionLog::reset_to`); `None`: cut after
    /// `after`.
    pub start: Option<Start>,
    /// The staged file's name in `incoming/` (`None`: nothing streamed).
    pub staged: Option<String>,
    /// The snapshot's descriptor, saved at step 5.
    pub descriptor: Vec<u8>,
}

impl Manifest {
    fn encode(&self) -> Vec<u8> {
        json!({
            "after": self.after.map(|a| [a.leader_id.term, a.index]),
            "start": self.start.map(|s| [s.offset, s.index]),
            "staged": self.staged,
            "descriptor": String::from_utf8_lossy(&self.descriptor),
        })
        .to_string()
        .into_bytes()
    }

    fn decode(b: &[u8]) -> Option<Manifest> {
        let v: Value = serde_json::from_slice(b).ok()?;
        let after = match v.get("after")? {
            Value::Null => None,
            a => {
                let a = a.as_array()?;
                Some(log_id(a.first()?.as_u64()?, a.get(1)?.as_u64()?))
            }
        };
        let start = match v.get("start") {
            None | Some(Value::Null) => None,
            Some(s) => {
                let s = s.as_array()?;
                Some(Start {
                    offset: s.first()?.as_u64()?,
                    index: s.get(1)?.as_u64()?,
                })
            }
        };
        if start.is_some() && after.is_some() {
            return None;
        }
        let staged = match v.get("staged")? {
            Value::Null => None,
            s => Some(s.as_str()?.to_string()),
        };
        // A staged file's name is one of ours: nothing that leaves incoming/.
        if staged
            .as_deref()
            .is_some_and(|s| s.contains('/') || s.starts_with('.'))
        {
            return None;
        }
        let descriptor = v.get("descriptor")?.as_str()?.as_bytes().to_vec();
        Some(Manifest {
            after,
            start,
            staged,
            descriptor,
        })
    }
}

/// The steps of an install, for the crash tests: `stop_after` ends an
/// install there, as a crash would.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Committed,
    Cut,
    Placed,
    Described,
}

/// The path of a staged file.
pub fn staged_path(meta_dir: &Path, name: &str) -> PathBuf {
    meta_dir.join(INCOMING).join(name)
}

/// Step 2: writes the manifest.
pub(crate) async fn commit(meta: &RaftMeta, m: &Manifest) -> StorageResult<()> {
    meta.write(MANIFEST, m.encode()).await
}

/// The manifest, if an install was committed and not finished.
pub(crate) async fn read_manifest(meta: &RaftMeta) -> StorageResult<Option<Manifest>> {
    meta.read(MANIFEST, Manifest::decode).await
}

/// Step 4: places the staged entries in `log`, which ends at the entry
/// kept, in order, and waits for them durable; `placed` is told of each
/// (its store's table). Returns the last entry placed.
pub(crate) async fn place_staged(
    log: &PartitionLog,
    path: &Path,
    after: Option<LogId>,
    mut placed: impl FnMut(LogId, &es_storage::PlacedEntry),
) -> StorageResult<Option<LogId>> {
    let file = BufferedFile::open(path).await.map_err(io)?;
    let size = file.file_size().await.map_err(io)?;
    let mut buf = Bytes::new();
    let mut buf_pos = 0u64;
    let mut pos = 0u64;
    // The entry being gathered: its id and batches.
    let mut open: Option<(LogId, Vec<Bytes>)> = None;
    let mut last: Option<LogId> = after;
    let mut since_wait = 0usize;
    let result = async {
        while pos < size {
            let at = (pos - buf_pos) as usize;
            let h = match batch::check(&buf[at..]) {
                Ok(h) => h,
                Err(batch::BatchError::Incomplete { needed, .. }) => {
                    let want = needed.max(READ_BYTES).min((size - pos) as usize);
                    if want < needed {
                        return Err(io(format!(
                            "{}: a batch runs past the file's end",
                            path.display()
                        )));
                    }
                    let r = file.read_at(pos, want).await.map_err(io)?;
                    buf = Bytes::copy_from_slice(&r);
                    buf_pos = pos;
                    if buf.len() < want {
                        return Err(io(format!("{}: shorter than its size", path.display())));
                    }
                    continue;
                }
                Err(e) => return Err(io(format!("{}: {e}", path.display()))),
            };
            let len = h.batch_len as usize;
            let bytes = buf.slice(at..at + len);
            pos += len as u64;
            let Some(stamp) = h.raft else {
                return Err(io("a staged batch without a raft stamp"));
            };
            let id = log_id(stamp.term, stamp.index);
            match &mut open {
                Some((open_id, batches)) if *open_id == id => batches.push(bytes),
                Some(_) => return Err(io(format!("entry {id} begins before the one before it ended"))),
                None => {
                    let want = last.map_or(id.index, |l| l.index + 1);
                    if id.index != want {
                        return Err(io(format!("staged entry {id} does not follow {last:?}")));
                    }
                    open = Some((id, vec![bytes]));
                }
            }
            if !stamp.entry_end {
                continue;
            }
            let (id, batches) = open.take().expect("an entry is open");
            let first = &batches[0];
            let fh = batch::BatchHeader::parse(first).map_err(io)?;
            let payload = match batch::control_body(&fh, first) {
                Some((CONTROL_BLANK, _)) => EsPayload::Blank,
                Some((CONTROL_MEMBERSHIP, body)) => {
                    EsPayload::Membership(membership::decode(body).ok_or_else(|| io("a bad membership"))?)
                }
                Some((kind, _)) => return Err(io(format!("unknown control kind {kind}"))),
                None => EsPayload::Batches(batches.into_iter().map(EntryBatch::Shared).collect()),
            };
            since_wait += len;
            let e = EsEntry { log_id: id, payload };
            let p = log
                .append_entry(id.leader_id.term, id.index, body_of(e.payload)?)
                .map_err(io)?;
            placed(id, &p);
            last = Some(id);
            // Placed entries queue for the writer: wait for them now and
            // then, so memory held stays bounded.
            if since_wait >= SNAPSHOT_INSTALL_DURABLE_EVERY_BYTES {
                log.wait_durable_index(id.index).await.map_err(io)?;
                since_wait = 0;
            }
        }
        if open.is_some() {
            return Err(io(format!("{}: the last entry is not whole", path.display())));
        }
        if let Some(l) = last.filter(|_| last != after) {
            log.wait_durable_index(l.index).await.map_err(io)?;
        }
        Ok(last)
    }
    .await;
    let _ = file.close().await;
    result
}

/// Step 3: cuts the log after the entry kept, or, when the install
/// replaces the whole log, resets it to start where the staged entries do.
pub(crate) async fn cut(log: &PartitionLog, m: &Manifest) -> StorageResult<()> {
    match m.start {
        Some(s) => log
            .reset_to(es_storage::Offset(s.offset), s.index)
            .await
            .map_err(io),
        None => log
            .truncate_from(m.after.map_or(0, |a| a.index + 1))
            .await
            .map_err(io),
    }
}

/// Step 6: the manifest and everything staged go.
pub(crate) async fn finish(meta: &RaftMeta) -> StorageResult<()> {
    meta.remove(MANIFEST).await?;
    clear_incoming(meta.dir()).await
}

/// Empties `incoming/` (leftovers of a transfer that did not finish).
pub async fn clear_incoming(meta_dir: &Path) -> StorageResult<()> {
    let dir = meta_dir.join(INCOMING);
    let names = match es_storage::list_names(&dir).await {
        Ok(n) => n,
        Err(es_storage::StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(())
        }
        Err(e) => return Err(io(e)),
    };
    if names.is_empty() {
        return Ok(());
    }
    for n in &names {
        es_storage::remove_if_exists(&dir.join(n)).await.map_err(io)?;
    }
    es_storage::sync_dir(&dir).await.map_err(io)?;
    tracing::info!(dir = %dir.display(), files = names.len(), "removed a snapshot transfer's leftovers");
    Ok(())
}

/// At open, before the store reads the log: finishes a committed install
/// (steps 3-6 on `log`, just opened) or empties `incoming/`. Returns
/// whether an install was finished.
pub(crate) async fn recover(log: &PartitionLog, meta: &RaftMeta) -> StorageResult<bool> {
    let Some(m) = read_manifest(meta).await? else {
        clear_incoming(meta.dir()).await?;
        return Ok(false);
    };
    // The log's index marks, as the store sets them at open.
    let last = log
        .placed_batches()
        .await
        .map_err(io)?
        .iter()
        .filter_map(|p| p.header.raft.filter(|r| r.entry_end).map(|r| r.index))
        .max();
    if let Some(last) = last {
        log.resume_entries(last);
    }
    if let Some(name) = &m.staged {
        cut(log, &m).await?;
        place_staged(log, &staged_path(meta.dir(), name), m.after, |_, _| {}).await?;
    }
    meta.save_snapshot(m.descriptor.clone()).await?;
    finish(meta).await?;
    tracing::info!(
        dir = %meta.dir().display(),
        after = ?m.after,
        "finished a snapshot install interrupted by a crash"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_manifest_round_trips_and_a_foreign_name_is_refused() {
        let m = Manifest {
            after: Some(log_id(3, 17)),
            start: None,
            staged: Some("7.stage".into()),
            descriptor: br#"{"end_offset":5}"#.to_vec(),
        };
        assert_eq!(Manifest::decode(&m.encode()), Some(m.clone()));
        let none = Manifest {
            after: None,
            start: None,
            staged: None,
            descriptor: Vec::new(),
        };
        assert_eq!(Manifest::decode(&none.encode()), Some(none));
        let whole = Manifest {
            after: None,
            start: Some(Start {
                offset: 900,
                index: 41,
            }),
            staged: Some("8.stage".into()),
            descriptor: br#"{"end_offset":950}"#.to_vec(),
        };
        assert_eq!(Manifest::decode(&whole.encode()), Some(whole));
        let both = Manifest {
            after: Some(log_id(1, 2)),
            start: Some(Start { offset: 9, index: 3 }),
            staged: Some("8.stage".into()),
            descriptor: Vec::new(),
        };
        assert_eq!(Manifest::decode(&both.encode()), None);
        let bad = Manifest {
            staged: Some("../x".into()),
            ..m
        };
        assert_eq!(Manifest::decode(&bad.encode()), None);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_a_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Manifest::decode(&b);
        }
    }
}

#[cfg(test)]
#[path = "snapshot_install_tests.rs"]
mod crash_tests;
