//! `ControllerSm`: the controller group's state machine. Applying an entry
//! decodes its command and folds it into the [`ClusterState`] (with the
//! voters of the membership in force at that entry), answers the proposer
//! with the outcome, and publishes `(applied index, state)` on a watch
//! after every applied run of entries.
//!
//! A snapshot is the state as JSON with the last applied log id and the
//! membership, saved durably in the group's metadata (`snapshot` file,
//! `RaftMeta`), built when openraft's policy asks (every
//! `snapshot_every` entries). At open, the state machine starts from it and
//! openraft re-applies the log after it. After each snapshot the log is
//! purged up to `keep_entries` behind it (`ControllerConfig`); a follower
//! behind the purge point gets the image streamed
//! (`snapshot_image.rs`) and installs it here, replacing the whole state
//! at once (the broker's catalog follows the published state).

use std::cell::RefCell;
use std::rc::Rc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EmptyNode, RaftSnapshotBuilder, SnapshotMeta};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::controller::command::{encode_outcome, refusal, ControllerCommand, Refusal};
use crate::controller::state::ClusterState;
use crate::controller::store::command_of;
use crate::entry::{Applied, EsEntry, EsPayload};
use crate::meta::RaftMeta;
use crate::sm_snapshot::{self, bad};
use crate::snapshot::EsSnapshot;
use crate::types::{EsRaft, LogId, NodeId, StorageResult, StoredMembership};

/// The controller's state as of an applied entry: what
/// [`Controller::applied`](super::Controller::applied) publishes.
#[derive(Debug, Clone, Default)]
pub struct AppliedState {
    /// The index of the last applied entry (0 before any).
    pub index: u64,
    pub state: Rc<ClusterState>,
}

#[derive(Default)]
struct SmState {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    cluster: Rc<ClusterState>,
    snapshots: u64,
}

struct Inner {
    state: RefCell<SmState>,
    meta: Rc<RaftMeta>,
    tx: watch::Sender<AppliedState>,
}

/// The controller's state machine; clones share it.
#[derive(Clone)]
pub struct ControllerSm(Rc<Inner>);

/// A snapshot image: `{"last_applied","membership_log_id","membership","state","id"}`.
fn image(s: &SmState, id: &str) -> Vec<u8> {
    let mut v = sm_snapshot::meta_json(&s.last_applied, &s.membership, id);
    v.insert("state".into(), json!(&*s.cluster));
    Value::Object(v).to_string().into_bytes()
}

fn read_image(bytes: &[u8]) -> Option<(SnapshotMeta<NodeId, EmptyNode>, ClusterState)> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let meta = sm_snapshot::meta_of(&v)?;
    let state = serde_json::from_value(v.get("state")?.clone()).ok()?;
    Some((meta, state))
}

/// The snapshot meta of a controller image, if it is one.
pub(crate) fn read_image_meta(bytes: &[u8]) -> Option<SnapshotMeta<NodeId, EmptyNode>> {
    read_image(bytes).map(|(m, _)| m)
}

/// The command an entry's payload carries, decoded.
fn command(payload: &EsPayload) -> Result<ControllerCommand, Refusal> {
    let bytes = match payload {
        EsPayload::Command(c) => c.to_vec(),
        EsPayload::Batches(bs) => command_of(bs).map_err(|e| Refusal::new(refusal::INVALID_REQUEST, e))?,
        _ => return Err(Refusal::new(refusal::INVALID_REQUEST, "not a command entry")),
    };
    ControllerCommand::decode(&bytes)
}

impl ControllerSm {
    /// The state machine of the group whose metadata is `meta`: what its
    /// last snapshot holds (openraft re-applies the log after it).
    // openraft's StorageError is what its storage traits return.
    #[allow(clippy::result_large_err)]
    pub fn new(meta: Rc<RaftMeta>) -> StorageResult<ControllerSm> {
        let mut s = SmState::default();
        if let Some(bytes) = meta.snapshot() {
            let (m, state) = read_image(&bytes).ok_or_else(|| bad("bad controller snapshot"))?;
            s.last_applied = m.last_log_id;
            s.membership = m.last_membership;
            s.cluster = Rc::new(state);
        }
        let (tx, _) = watch::channel(AppliedState {
            index: s.last_applied.map_or(0, |l| l.index),
            state: s.cluster.clone(),
        });
        Ok(ControllerSm(Rc::new(Inner {
            state: RefCell::new(s),
            meta,
            tx,
        })))
    }

    /// The state as of the last applied entry.
    pub fn state(&self) -> Rc<ClusterState> {
        self.0.state.borrow().cluster.clone()
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogId> {
        self.0.state.borrow().last_applied
    }

    /// A subscription to `(applied index, state)`, seen as of now.
    pub fn subscribe(&self) -> watch::Receiver<AppliedState> {
        self.0.tx.subscribe()
    }

    fn publish(&self) {
        let s = self.0.state.borrow();
        self.0.tx.send_replace(AppliedState {
            index: s.last_applied.map_or(0, |l| l.index),
            state: s.cluster.clone(),
        });
    }
}

impl RaftSnapshotBuilder<EsRaft> for ControllerSm {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<EsRaft>> {
        let (meta, bytes) = {
            let mut s = self.0.state.borrow_mut();
            s.snapshots += 1;
            let meta = sm_snapshot::built_meta(s.last_applied, &s.membership, s.snapshots);
            let bytes = image(&s, &meta.snapshot_id);
            (meta, bytes)
        };
        sm_snapshot::save(&self.0.meta, meta, bytes).await
    }
}

impl RaftStateMachine<EsRaft> for ControllerSm {
    type SnapshotBuilder = ControllerSm;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId>, StoredMembership)> {
        let s = self.0.state.borrow();
        Ok((s.last_applied, s.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Applied>>
    where
        I: IntoIterator<Item = EsEntry>,
    {
        let mut out = Vec::new();
        {
            let mut s = self.0.state.borrow_mut();
            for e in entries {
                s.last_applied = Some(e.log_id);
                out.push(match e.payload {
                    EsPayload::Blank => Applied::None,
                    EsPayload::Membership(m) => {
                        s.membership = StoredMembership::new(Some(e.log_id), m);
                        Applied::None
                    }
                    payload => {
                        // Sorted: the assignment's order is the voters'.
                        let voters: Vec<NodeId> = s
                            .membership
                            .membership()
                            .voter_ids()
                            .collect::<std::collections::BTreeSet<_>>()
                            .into_iter()
                            .collect();
                        let outcome = match command(&payload) {
                            Ok(cmd) => {
                                let name = cmd.name();
                                let r = Rc::make_mut(&mut s.cluster).apply(e.log_id.index, &voters, cmd);
                                if let Err(refused) = &r {
                                    tracing::debug!(index = e.log_id.index, command = name, %refused, "controller command refused");
                                }
                                r
                            }
                            Err(r) => {
                                tracing::warn!(index = e.log_id.index, why = %r, "a controller entry that is not a command");
                                Err(r)
                            }
                        };
                        Applied::Command(encode_outcome(&outcome))
                    }
                });
            }
        }
        self.publish();
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> ControllerSm {
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
        let (m, state) = read_image(snapshot.image()).ok_or_else(|| bad("bad controller snapshot"))?;
        if m.last_log_id != meta.last_log_id {
            return Err(bad("the snapshot's image is not its meta's"));
        }
        self.0.meta.save_snapshot(snapshot.image().to_vec()).await?;
        {
            let mut s = self.0.state.borrow_mut();
            s.last_applied = meta.last_log_id;
            s.membership = meta.last_membership.clone();
            s.cluster = Rc::new(state);
        }
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<EsRaft>>> {
        sm_snapshot::current(&self.0.meta, read_image_meta, "bad controller snapshot")
    }
}
