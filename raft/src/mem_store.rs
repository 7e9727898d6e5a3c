//! An in-memory log store ([`MemLog`]) and state machine ([`MemSm`]).
//!
//! The reference implementation of openraft's storage traits for es's
//! types: the in-process cluster tests run on it, and the conformance
//! suite checks it next to the partition-log store. "Disk" is the value
//! itself: a node restarted with the same `MemLog` and `MemSm` finds its
//! vote, log and state as a real restart would.
//!
//! The state machine keeps, per applied entry, its log id and a digest of
//! its payload, so tests can compare what replicas applied; data entries
//! get offsets as a partition would give them (dense, per record).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::rc::Rc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{RaftLogReader, RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError};
use serde_json::{json, Value};

use crate::entry::{Applied, EsEntry, EsPayload};
use crate::membership;
use crate::snapshot::EsSnapshot;
use crate::types::{log_id, EsRaft, LogId, StorageResult, StoredMembership, Vote};

#[derive(Default)]
struct LogInner {
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
    log: BTreeMap<u64, EsEntry>,
}

/// An in-memory Raft log; clones share it.
#[derive(Clone, Default)]
pub struct MemLog(Rc<RefCell<LogInner>>);

impl MemLog {
    /// The log ids of the entries held, in order.
    pub fn log_ids(&self) -> Vec<LogId> {
        self.0.borrow().log.values().map(|e| e.log_id).collect()
    }
}

impl RaftLogReader<EsRaft> for MemLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<EsEntry>> {
        Ok(self
            .0
            .borrow()
            .log
            .range(range)
            .map(|(_, e)| e.duplicate())
            .collect())
    }
}

impl RaftLogStorage<EsRaft> for MemLog {
    type LogReader = MemLog;

    async fn get_log_state(&mut self) -> StorageResult<LogState<EsRaft>> {
        let inner = self.0.borrow();
        let last = inner.log.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last.or(inner.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> MemLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> StorageResult<()> {
        self.0.borrow_mut().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote>> {
        Ok(self.0.borrow().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> StorageResult<()> {
        self.0.borrow_mut().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId>> {
        Ok(self.0.borrow().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<EsRaft>) -> StorageResult<()>
    where
        I: IntoIterator<Item = EsEntry>,
    {
        {
            let mut inner = self.0.borrow_mut();
            for e in entries {
                inner.log.insert(e.log_id.index, e.duplicate());
            }
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> StorageResult<()> {
        self.0.borrow_mut().log.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> StorageResult<()> {
        let mut inner = self.0.borrow_mut();
        inner.last_purged = Some(log_id);
        let keep = inner.log.split_off(&(log_id.index + 1));
        inner.log = keep;
        Ok(())
    }
}

/// What a [`MemSm`] applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemState {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    /// The offset the next data record gets.
    pub next_offset: u64,
    /// Per applied entry: `(term, index, digest of its payload)`.
    pub applied: Vec<(u64, u64, u32)>,
}

#[derive(Default)]
struct SmInner {
    state: MemState,
    snapshot: Option<(SnapshotMeta<u64, openraft::EmptyNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// An in-memory state machine; clones share it.
#[derive(Clone, Default)]
pub struct MemSm(Rc<RefCell<SmInner>>);

impl MemSm {
    /// What it applied so far.
    pub fn state(&self) -> MemState {
        self.0.borrow().state.clone()
    }
}

/// A digest of an entry's payload: what tests compare across replicas.
pub fn digest(e: &EsEntry) -> u32 {
    let mut h = crc32fast::Hasher::new();
    match &e.payload {
        EsPayload::Blank => h.update(b"blank"),
        EsPayload::Membership(m) => h.update(&membership::encode(m)),
        EsPayload::Command(c) => h.update(c),
        EsPayload::Batches(bs) => {
            for b in bs {
                h.update(b.bytes());
            }
        }
    }
    h.finalize()
}

fn io_error(what: &str) -> StorageError<u64> {
    StorageIOError::read_state_machine(&std::io::Error::other(what.to_string())).into()
}

fn encode_state(s: &MemState) -> Vec<u8> {
    let id = |l: &Option<LogId>| l.map(|l| json!([l.leader_id.term, l.index]));
    json!({
        "last_applied": id(&s.last_applied),
        "membership_log_id": id(s.membership.log_id()),
        "membership": membership::to_json(s.membership.membership()),
        "next_offset": s.next_offset,
        "applied": s.applied,
    })
    .to_string()
    .into_bytes()
}

fn decode_state(bytes: &[u8]) -> Option<MemState> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let id = |v: &Value| -> Option<Option<LogId>> {
        if v.is_null() {
            return Some(None);
        }
        let a = v.as_array()?;
        Some(Some(log_id(a.first()?.as_u64()?, a.get(1)?.as_u64()?)))
    };
    let applied = v
        .get("applied")?
        .as_array()?
        .iter()
        .map(|t| {
            let t = t.as_array()?;
            Some((
                t.first()?.as_u64()?,
                t.get(1)?.as_u64()?,
                t.get(2)?.as_u64()? as u32,
            ))
        })
        .collect::<Option<_>>()?;
    Some(MemState {
        last_applied: id(v.get("last_applied")?)?,
        membership: StoredMembership::new(
            id(v.get("membership_log_id")?)?,
            membership::from_json(v.get("membership")?)?,
        ),
        next_offset: v.get("next_offset")?.as_u64()?,
        applied,
    })
}

impl RaftSnapshotBuilder<EsRaft> for MemSm {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<EsRaft>> {
        let mut inner = self.0.borrow_mut();
        inner.snapshots_built += 1;
        let image = encode_state(&inner.state);
        let meta = SnapshotMeta {
            last_log_id: inner.state.last_applied,
            last_membership: inner.state.membership.clone(),
            snapshot_id: format!("mem-{}", inner.snapshots_built),
        };
        inner.snapshot = Some((meta.clone(), image.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(EsSnapshot::Image(image)),
        })
    }
}

impl RaftStateMachine<EsRaft> for MemSm {
    type SnapshotBuilder = MemSm;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, StoredMembership)> {
        let inner = self.0.borrow();
        Ok((inner.state.last_applied, inner.state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Applied>>
    where
        I: IntoIterator<Item = EsEntry>,
    {
        let mut inner = self.0.borrow_mut();
        let s = &mut inner.state;
        let mut out = Vec::new();
        for e in entries {
            s.last_applied = Some(e.log_id);
            s.applied
                .push((e.log_id.leader_id.term, e.log_id.index, digest(&e)));
            out.push(match &e.payload {
                EsPayload::Blank => Applied::None,
                EsPayload::Membership(m) => {
                    s.membership = StoredMembership::new(Some(e.log_id), m.clone());
                    Applied::None
                }
                EsPayload::Command(c) => Applied::Command(c.clone()),
                EsPayload::Batches(bs) => {
                    let mut bases = Vec::with_capacity(bs.len());
                    for b in bs {
                        bases.push(s.next_offset);
                        s.next_offset += es_storage::batch::record_count_of(b.bytes()) as u64;
                    }
                    Applied::Offsets(bases)
                }
            });
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> MemSm {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<EsSnapshot>> {
        Ok(Box::new(EsSnapshot::Image(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, openraft::EmptyNode>,
        snapshot: Box<EsSnapshot>,
    ) -> StorageResult<()> {
        let state = decode_state(snapshot.image()).ok_or_else(|| io_error("bad snapshot image"))?;
        let mut inner = self.0.borrow_mut();
        inner.state = state;
        inner.snapshot = Some((meta.clone(), snapshot.image().to_vec()));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<EsRaft>>> {
        Ok(self.0.borrow().snapshot.clone().map(|(meta, image)| Snapshot {
            meta,
            snapshot: Box::new(EsSnapshot::Image(image)),
        }))
    }
}
