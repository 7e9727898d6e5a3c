//! `PartitionSm`: a partition replica's state machine. The records are in
//! the log already (the log is the Raft log): applying an entry only moves
//! what the replica may serve, its high watermark (`committed_offset`: the
//! offset after the last applied entry), and answers each batch's base
//! offset to its producer.
//!
//! Applying also keeps the partition's idempotent window
//! ([`ProducerWindow`]): each batch with a producer stamp is checked
//! against it and recorded, in log order, on every replica, so every
//! replica holds the same window (the leader's Proposer checks retries
//! against it before they are proposed: docs/design/raft-produce.md
//! "Idempotent producers").
//!
//! A snapshot is a descriptor of the applied prefix: its last log id,
//! membership, end offset and the idempotent window's image, saved durably
//! in the replica's metadata. The records it covers are the log itself; a
//! late replica gets them streamed (`snapshot_send.rs`/`snapshot_recv.rs`)
//! and installs them with the window (docs/design/raft-snapshots.md).

use std::cell::RefCell;
use std::rc::Rc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EmptyNode, RaftSnapshotBuilder, SnapshotMeta};
use serde_json::{json, Value};

use crate::entry::{Applied, EsEntry, EsPayload};
use crate::log_store::LogStore;
use crate::meta::RaftMeta;
use crate::producer_window::ProducerWindow;
use crate::sm_snapshot::{self, bad};
use crate::snapshot::{EsSnapshot, StagedSuffix};
use crate::snapshot_install::Manifest;
use crate::types::{EsRaft, LogId, NodeId, StorageResult, StoredMembership};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The offset after the last applied batch: the high watermark.
    end_offset: u64,
    snapshots: u64,
    /// The idempotent window as of `last_applied`.
    window: ProducerWindow,
}

struct Inner {
    state: RefCell<State>,
    meta: Rc<RaftMeta>,
    /// The log whose high watermark applying raises.
    store: LogStore,
}

/// A partition replica's state machine; clones share it.
#[derive(Clone)]
pub struct PartitionSm(Rc<Inner>);

/// A snapshot descriptor:
/// `{"last_applied","membership_log_id","membership","end_offset","log_start_offset","id","producers"}`
/// (`log_start_offset`: the log's first hot offset when it was built,
/// after retention; `producers`: the idempotent window as of
/// `last_applied`, which the entries up to it are never re-applied to
/// rebuild, at a restart or on a replica that installs it).
fn descriptor(s: &State, log_start_offset: u64, id: &str) -> Vec<u8> {
    let producers: Value = serde_json::from_slice(&s.window.image()).unwrap_or(Value::Null);
    let mut v = sm_snapshot::meta_json(&s.last_applied, &s.membership, id);
    v.insert("end_offset".into(), json!(s.end_offset));
    v.insert("log_start_offset".into(), json!(log_start_offset));
    v.insert("producers".into(), producers);
    Value::Object(v).to_string().into_bytes()
}

pub(crate) fn read_descriptor(bytes: &[u8]) -> Option<(SnapshotMeta<NodeId, EmptyNode>, u64)> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let meta = sm_snapshot::meta_of(&v)?;
    Some((meta, v.get("end_offset")?.as_u64()?))
}

/// The idempotent window a descriptor holds (empty for a descriptor
/// written before windows were replicated).
// openraft's StorageError is what its storage traits return.
#[allow(clippy::result_large_err)]
fn window_of(bytes: &[u8]) -> StorageResult<ProducerWindow> {
    let v: Value = serde_json::from_slice(bytes).map_err(|_| bad("bad snapshot descriptor"))?;
    match v.get("producers") {
        None | Some(Value::Null) => Ok(ProducerWindow::default()),
        Some(p) => ProducerWindow::restore(p.to_string().as_bytes()).map_err(|e| bad(&e)),
    }
}

impl PartitionSm {
    /// The state machine of the replica whose log is `store`: what its
    /// last snapshot says was applied (openraft re-applies the rest).
    // openraft's StorageError is what its storage traits return.
    #[allow(clippy::result_large_err)]
    pub fn new(store: &LogStore) -> StorageResult<PartitionSm> {
        let meta = store.meta();
        let mut state = State::default();
        if let Some(bytes) = meta.snapshot() {
            let (m, end) = read_descriptor(&bytes).ok_or_else(|| bad("bad snapshot descriptor"))?;
            state.last_applied = m.last_log_id;
            state.membership = m.last_membership;
            state.end_offset = end;
            state.window = window_of(&bytes)?;
        }
        if state.end_offset > 0 {
            store.set_committed(state.end_offset);
        }
        Ok(PartitionSm(Rc::new(Inner {
            state: RefCell::new(state),
            meta,
            store: store.clone(),
        })))
    }

    /// The high watermark: every record below it is committed and applied.
    pub fn committed_offset(&self) -> u64 {
        self.0.state.borrow().end_offset
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId> {
        self.0.state.borrow().last_applied
    }

    /// Calls `f` with the idempotent window as of the last applied entry.
    pub fn with_window<T>(&self, f: impl FnOnce(&ProducerWindow) -> T) -> T {
        f(&self.0.state.borrow().window)
    }
}

impl PartitionSm {
    /// Installs a snapshot a leader streamed (docs/design/raft-snapshots.md):
    /// the log takes the staged entries after the entry it keeps
    /// (`LogStore::install`, crash-safe through `install.swap`), then this
    /// machine adopts the snapshot's applied id, membership and end.
    // openraft's StorageError is what its storage traits return.
    async fn install_staged(
        &self,
        meta: &SnapshotMeta<NodeId, EmptyNode>,
        staged: StagedSuffix,
        end: u64,
    ) -> StorageResult<()> {
        let window = window_of(&staged.descriptor)?;
        let manifest = Manifest {
            after: staged.after,
            start: staged.start,
            staged: staged.staged,
            descriptor: staged.descriptor,
        };
        self.0.store.install(&manifest, end, None).await?;
        let next = self.0.store.log().next_offset().0;
        if next < end {
            return Err(bad(&format!(
                "after the install the log ends at offset {next}, the snapshot at {end}"
            )));
        }
        self.adopt(meta, end, window);
        Ok(())
    }

    /// Takes an installed snapshot's applied id, membership, end and
    /// idempotent window as this machine's; the log's committed mark
    /// follows.
    fn adopt(&self, meta: &SnapshotMeta<NodeId, EmptyNode>, end: u64, window: ProducerWindow) {
        let mut s = self.0.state.borrow_mut();
        s.last_applied = meta.last_log_id;
        s.membership = meta.last_membership.clone();
        s.end_offset = end;
        s.window = window;
        drop(s);
        self.0.store.set_committed(end);
    }
}

impl RaftSnapshotBuilder<EsRaft> for PartitionSm {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<EsRaft>> {
        let (meta, bytes) = {
            let mut s = self.0.state.borrow_mut();
            s.snapshots += 1;
            let meta = sm_snapshot::built_meta(s.last_applied, &s.membership, s.snapshots);
            let start = self.0.store.log().hot_start_offset().0;
            let bytes = descriptor(&s, start, &meta.snapshot_id);
            (meta, bytes)
        };
        sm_snapshot::save(&self.0.meta, meta, bytes).await
    }
}

impl RaftStateMachine<EsRaft> for PartitionSm {
    type SnapshotBuilder = PartitionSm;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, StoredMembership)> {
        let s = self.0.state.borrow();
        Ok((s.last_applied, s.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Applied>>
    where
        I: IntoIterator<Item = EsEntry>,
    {
        let mut s = self.0.state.borrow_mut();
        let mut out = Vec::new();
        for e in entries {
            s.last_applied = Some(e.log_id);
            out.push(match e.payload {
                EsPayload::Blank => Applied::None,
                EsPayload::Membership(m) => {
                    s.membership = StoredMembership::new(Some(e.log_id), m);
                    Applied::None
                }
                EsPayload::Batches(bs) => {
                    let mut answers = Vec::with_capacity(bs.len());
                    for b in &bs {
                        let h = es_storage::batch::BatchHeader::parse(b.bytes())
                            .map_err(|e| bad(&e.to_string()))?;
                        answers.push(s.window.apply(&h));
                        s.end_offset = s.end_offset.max(h.next_offset().0);
                    }
                    if answers.iter().all(|a| a.is_ok()) {
                        Applied::Offsets(answers.into_iter().flatten().collect())
                    } else {
                        Applied::Produced(answers)
                    }
                }
                EsPayload::Command(_) => return Err(bad("a partition applies no controller command")),
            });
        }
        let end = s.end_offset;
        drop(s);
        self.0.store.set_committed(end);
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> PartitionSm {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<EsSnapshot>> {
        Ok(Box::new(EsSnapshot::Image(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, EmptyNode>,
        snapshot: Box<EsSnapshot>,
    ) -> StorageResult<()> {
        let (m, end) = read_descriptor(snapshot.image()).ok_or_else(|| bad("bad snapshot descriptor"))?;
        if m.last_log_id != meta.last_log_id {
            return Err(bad("the snapshot's descriptor is not its meta's"));
        }
        if let EsSnapshot::Staged(staged) = *snapshot {
            return self.install_staged(meta, staged, end).await;
        }
        // A descriptor alone carries no records: installing one whose records
        // this log lacks would claim data the replica does not have.
        // (A leader streams them: a `Staged` snapshot.)
        let next = self.0.store.log().next_offset().0;
        if end > next {
            return Err(bad(&format!(
                "the snapshot ends at offset {end}, this log at {next}: its records were not transferred"
            )));
        }
        let window = window_of(snapshot.image())?;
        self.0.meta.save_snapshot(snapshot.image().to_vec()).await?;
        self.adopt(meta, end, window);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<EsRaft>>> {
        sm_snapshot::current(
            &self.0.meta,
            |b| read_descriptor(b).map(|(m, _)| m),
            "bad snapshot descriptor",
        )
    }
}
