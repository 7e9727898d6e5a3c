//! What the two durable state machines share about their snapshots (the
//! controller's image, `controller/machine.rs`; a partition's descriptor,
//! `partition_sm.rs`): the snapshot meta's JSON fields (last applied log
//! id, membership, snapshot id), to which each adds its own; the id of
//! each snapshot built; and keeping the bytes in the group's `RaftMeta`.

use openraft::storage::Snapshot;
use openraft::{EmptyNode, SnapshotMeta, StorageError, StorageIOError};
use serde_json::{json, Map, Value};

use crate::membership;
use crate::meta::RaftMeta;
use crate::snapshot::EsSnapshot;
use crate::types::{log_id, EsRaft, LogId, NodeId, StorageResult, StoredMembership};

/// A state machine's snapshot or state that does not read back.
pub(crate) fn bad(what: &str) -> StorageError<NodeId> {
    StorageIOError::read_state_machine(&std::io::Error::other(what.to_string())).into()
}

fn id_json(l: &Option<LogId>) -> Value {
    l.map_or(Value::Null, |l| json!([l.leader_id.term, l.index]))
}

fn id_of(v: &Value) -> Option<Option<LogId>> {
    if v.is_null() {
        return Some(None);
    }
    let a = v.as_array()?;
    Some(Some(log_id(a.first()?.as_u64()?, a.get(1)?.as_u64()?)))
}

/// The meta's fields, `{"last_applied","membership_log_id","membership","id"}`.
pub(crate) fn meta_json(
    last_applied: &Option<LogId>,
    membership: &StoredMembership,
    id: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("last_applied".into(), id_json(last_applied));
    m.insert("membership_log_id".into(), id_json(membership.log_id()));
    m.insert("membership".into(), membership::to_json(membership.membership()));
    m.insert("id".into(), Value::from(id));
    m
}

/// The meta whose fields `v` holds; `None` if it holds none.
pub(crate) fn meta_of(v: &Value) -> Option<SnapshotMeta<NodeId, EmptyNode>> {
    Some(SnapshotMeta {
        last_log_id: id_of(v.get("last_applied")?)?,
        last_membership: StoredMembership::new(
            id_of(v.get("membership_log_id")?)?,
            membership::from_json(v.get("membership")?)?,
        ),
        snapshot_id: v.get("id")?.as_str()?.to_string(),
    })
}

/// The meta of the `n`th snapshot a state machine builds, as of
/// `last_applied`: its id is `<term>-<index>-<n>`, unique per machine.
pub(crate) fn built_meta(
    last_applied: Option<LogId>,
    membership: &StoredMembership,
    n: u64,
) -> SnapshotMeta<NodeId, EmptyNode> {
    SnapshotMeta {
        last_log_id: last_applied,
        last_membership: membership.clone(),
        snapshot_id: format!(
            "{}-{}-{}",
            last_applied.map_or(0, |l| l.leader_id.term),
            last_applied.map_or(0, |l| l.index),
            n
        ),
    }
}

/// Saves a built snapshot's `bytes` durably in `meta`: the snapshot, once
/// they are on disk.
pub(crate) async fn save(
    meta: &RaftMeta,
    snapshot_meta: SnapshotMeta<NodeId, EmptyNode>,
    bytes: Vec<u8>,
) -> StorageResult<Snapshot<EsRaft>> {
    meta.save_snapshot(bytes.clone()).await?;
    Ok(Snapshot {
        meta: snapshot_meta,
        snapshot: Box::new(EsSnapshot::Image(bytes)),
    })
}

/// The snapshot `meta` keeps, if any; `read` finds its meta in its bytes,
/// and `Err(bad(what))` when it does not.
// openraft's StorageError is what its storage traits return.
#[allow(clippy::result_large_err)]
pub(crate) fn current(
    meta: &RaftMeta,
    read: impl FnOnce(&[u8]) -> Option<SnapshotMeta<NodeId, EmptyNode>>,
    what: &str,
) -> StorageResult<Option<Snapshot<EsRaft>>> {
    let Some(bytes) = meta.snapshot() else {
        return Ok(None);
    };
    let m = read(&bytes).ok_or_else(|| bad(what))?;
    Ok(Some(Snapshot {
        meta: m,
        snapshot: Box::new(EsSnapshot::Image(bytes)),
    }))
}
