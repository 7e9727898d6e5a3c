//! Changes to the registry, one at a time on the shard that owns
//! `_schemas/0` (service.rs holds the lock): each works out its records
//! from the store, appends them to `_schemas` (created on first use),
//! waits until they are durable, and only then applies them in memory and
//! answers. A change whose append fails changes nothing in memory.

use std::rc::Rc;

use serde_json::{json, Value};

use super::level::{Level, Mode};
use super::record::{Record, SchemaValue};
use super::request::{RegistryOp, VersionRef};
use super::service::{self, find_version, parse_versions, prepare, subject_not_found, Prepared};
use super::store::{Store, Version};
use super::{schema, TOPIC};
use crate::error::{ApiError, ErrorCode};
use crate::limits::{
    REGISTRY_APPEND_BATCH_BYTES, REGISTRY_STORE_BYTES_MAX, REGISTRY_SUBJECTS_MAX,
    REGISTRY_VERSIONS_PER_SUBJECT_MAX,
};
use crate::shard::message::{Op, Payload, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};
use crate::topics::topic::{CleanupPolicyName, TopicConfig, TopicMeta};

/// How long a permanently deleted version's tombstone stays in
/// `_schemas` before compaction drops it: a day (the spec's).
const DELETE_RETENTION_MS: u64 = 24 * 60 * 60 * 1000;

/// What a change appends and answers.
struct Change {
    records: Vec<Record>,
    answer: Value,
}

pub async fn run(shard: &Rc<Shard>, op: RegistryOp) -> Result<Value, ApiError> {
    let change = {
        let store = shard.registry.store.borrow();
        let store = store.as_ref().expect("loaded before any change");
        let read_only = store.mode == Some(Mode::ReadOnly);
        if read_only && !matches!(op, RegistryOp::SetMode { .. }) {
            return Err(ApiError::new(
                ErrorCode::OperationNotPermitted,
                "the registry is in READONLY mode: an admin sets PUT /mode {\"mode\":\"READWRITE\"} first",
            ));
        }
        plan(shard, store, op)?
    };
    if !change.records.is_empty() {
        append(shard, &change.records).await?;
        let mut store = shard.registry.store.borrow_mut();
        let store = store.as_mut().expect("loaded before any change");
        for r in change.records {
            if let Err(why) = store.apply(r) {
                // plan() only makes records that apply: a bug, loudly.
                tracing::error!(
                    why,
                    "a registry change did not apply in memory after it was written"
                );
            }
        }
        service::set_gauges(store);
    }
    Ok(change.answer)
}

fn plan(shard: &Shard, store: &Store, op: RegistryOp) -> Result<Change, ApiError> {
    use RegistryOp as R;
    match op {
        R::Register { subject, schema } => register(shard, store, subject, schema),
        R::DeleteSubject { subject, permanent } => delete_subject(store, &subject, permanent),
        R::DeleteVersion {
            subject,
            version,
            permanent,
        } => delete_version(store, &subject, version, permanent),
        R::SetConfig { subject, level } => Ok(Change {
            records: vec![Record::Config {
                subject,
                level: Some(level),
            }],
            answer: json!({"compatibility": level.as_str()}),
        }),
        R::DeleteConfig { subject } => {
            let Some(level) = store.levels.get(&subject).copied() else {
                return Err(match subject {
                    Some(s) => ApiError::new(
                        ErrorCode::SubjectConfigNotFound,
                        format!("subject {s:?} has no compatibility level of its own"),
                    ),
                    None => {
                        return Ok(Change {
                            records: vec![],
                            answer: json!({"compatibilityLevel": Level::DEFAULT.as_str()}),
                        })
                    }
                });
            };
            Ok(Change {
                records: vec![Record::Config { subject, level: None }],
                answer: json!({"compatibilityLevel": level.as_str()}),
            })
        }
        R::SetMode { mode, force } => {
            // Imported ids would collide with ids the registry gave:
            // IMPORT starts on an empty registry, or when told to.
            if mode == Mode::Import && !force && !store.subjects.is_empty() {
                return Err(ApiError::new(
                    ErrorCode::OperationNotPermitted,
                    "Cannot import since found existing subjects: IMPORT starts on an empty registry (PUT /mode?force=true to import into this one)",
                ));
            }
            Ok(Change {
                records: vec![Record::Mode {
                    subject: None,
                    mode: Some(mode),
                }],
                answer: json!({"mode": mode.as_str()}),
            })
        }
        other => Err(ApiError::internal(format!("{other:?} is not a change"))),
    }
}

fn register(
    shard: &Shard,
    store: &Store,
    subject: String,
    new: super::request::NewSchema,
) -> Result<Change, ApiError> {
    let importing = store.mode == Some(Mode::Import);
    let (want_id, want_version) = (new.id, new.version);
    if !importing && (want_id.is_some() || want_version.is_some()) {
        return Err(ApiError::new(
            ErrorCode::OperationNotPermitted,
            format!("Subject {subject:?} is not in import mode: a registration names its id or version only in IMPORT mode"),
        ));
    }
    let new = prepare(shard, store, new)?;
    if importing {
        return import(store, subject, new, want_id, want_version);
    }
    let live = store.versions(&subject, false);
    // The same schema already registered under the subject: its id, and
    // nothing written.
    for (n, v) in live.iter().rev() {
        if store.schemas[&v.id].fingerprint == new.fingerprint {
            return Ok(Change {
                records: vec![],
                answer: json!({"id": v.id, "subject": subject, "version": n}),
            });
        }
    }
    let all = store.versions(&subject, true);
    if all.len() >= REGISTRY_VERSIONS_PER_SUBJECT_MAX {
        return Err(ApiError::new(
            ErrorCode::OperationNotPermitted,
            format!(
                "subject {subject:?} holds {} versions, the most a subject may (soft-deleted ones count: delete them permanently to make room)",
                all.len()
            ),
        ));
    }
    if all.is_empty() && store.subjects.len() >= REGISTRY_SUBJECTS_MAX {
        return Err(ApiError::new(
            ErrorCode::OperationNotPermitted,
            format!("the registry holds {REGISTRY_SUBJECTS_MAX} subjects, the most it may: delete subjects no longer used"),
        ));
    }
    let level = store.level_of(&subject);
    let olds = parse_versions(store, &checked_against(level, &live))?;
    let why = schema::incompatibilities(level, new.schema_type, &new.parsed, &olds);
    if !why.is_empty() {
        metrics::counter!("es_registry_incompatible_total").increment(1);
        return Err(ApiError::new(
            ErrorCode::IncompatibleSchema,
            format!(
                "Schema being registered is incompatible with an earlier schema for subject {subject:?} ({}): {}",
                level.as_str(),
                why.join("; ")
            ),
        ));
    }
    let existing = store
        .by_fingerprint
        .get(&new.fingerprint)
        .copied()
        .filter(|id| store.schemas.contains_key(id));
    let id = match existing {
        Some(id) => id,
        None => {
            if store.bytes + new.schema.len() > REGISTRY_STORE_BYTES_MAX {
                return Err(ApiError::new(
                    ErrorCode::OperationNotPermitted,
                    format!("the registry holds {} bytes of schemas; this one would pass its {REGISTRY_STORE_BYTES_MAX}", store.bytes),
                ));
            }
            if store.next_id == u32::MAX {
                return Err(ApiError::new(
                    ErrorCode::OperationNotPermitted,
                    "every schema id has been given",
                ));
            }
            store.next_id
        }
    };
    let version = all.last().map_or(1, |(n, _)| n + 1);
    let next_id = existing.is_none().then(|| id + 1);
    Ok(registered(subject, version, id, new, next_id))
}

/// The change that registers `new` as `version` of `subject` with `id`,
/// moving the next id given to `next_id` when there is one.
fn registered(subject: String, version: u32, id: u32, new: Prepared, next_id: Option<u32>) -> Change {
    let mut records = vec![Record::Schema {
        subject: subject.clone(),
        version,
        value: Some(SchemaValue {
            subject: subject.clone(),
            version,
            id,
            schema_type: new.schema_type,
            schema: new.schema,
            references: new.references,
            deleted: false,
        }),
    }];
    if let Some(next) = next_id {
        records.push(Record::NextId(Some(next)));
    }
    metrics::counter!("es_registry_registrations_total").increment(1);
    Change {
        records,
        answer: json!({"id": id, "subject": subject, "version": version}),
    }
}

/// A registration in IMPORT mode: the id and version it names are kept
/// (the next ones when it names none), nothing is checked for
/// compatibility, and an id or version already held by another schema is
/// refused, never overwritten.
fn import(
    store: &Store,
    subject: String,
    new: Prepared,
    want_id: Option<u32>,
    want_version: Option<u32>,
) -> Result<Change, ApiError> {
    let refuse = |why: String| Err(ApiError::new(ErrorCode::OperationNotPermitted, why));
    let all = store.versions(&subject, true);
    let id = match want_id {
        Some(id) => id,
        None => store
            .by_fingerprint
            .get(&new.fingerprint)
            .copied()
            .filter(|id| store.schemas.contains_key(id))
            .unwrap_or(store.next_id),
    };
    if let Some(held) = store.schemas.get(&id) {
        if held.fingerprint != new.fingerprint {
            return refuse(format!(
                "Overwrite new schema with id {id} is not permitted: id {id} holds another schema"
            ));
        }
    }
    if let Some((n, _)) = all
        .iter()
        .find(|(n, v)| v.id == id && want_version.is_none_or(|w| w == *n))
    {
        // Already imported: the same answer, nothing written.
        return Ok(Change {
            records: vec![],
            answer: json!({"id": id, "subject": subject, "version": n}),
        });
    }
    let version = match want_version {
        Some(v) => v,
        None => all.last().map_or(1, |(n, _)| n + 1),
    };
    if let Some((_, held)) = all.iter().find(|(n, _)| *n == version) {
        return refuse(format!(
            "Overwrite new schema version {version} of subject {subject:?} is not permitted: it holds id {}",
            held.id
        ));
    }
    if all.len() >= REGISTRY_VERSIONS_PER_SUBJECT_MAX {
        return refuse(format!(
            "subject {subject:?} holds {} versions, the most a subject may",
            all.len()
        ));
    }
    if all.is_empty() && store.subjects.len() >= REGISTRY_SUBJECTS_MAX {
        return refuse(format!(
            "the registry holds {REGISTRY_SUBJECTS_MAX} subjects, the most it may"
        ));
    }
    if !store.schemas.contains_key(&id) && store.bytes + new.schema.len() > REGISTRY_STORE_BYTES_MAX {
        return refuse(format!(
            "the registry holds {} bytes of schemas; this one would pass its {REGISTRY_STORE_BYTES_MAX}",
            store.bytes
        ));
    }
    // Ids given after the import start past every imported one.
    let next_id = (id >= store.next_id).then(|| id.saturating_add(1));
    Ok(registered(subject, version, id, new, next_id))
}

/// The live versions a new schema is checked against at `level`: none
/// for NONE, the latest, or all of them for a `_TRANSITIVE` level.
fn checked_against(level: Level, live: &[(u32, Version)]) -> Vec<(u32, Version)> {
    match level {
        Level::None => Vec::new(),
        l if l.transitive() => live.to_vec(),
        _ => live.last().copied().into_iter().collect(),
    }
}

/// 42206 if a live schema references `subject` `version`.
fn unreferenced(store: &Store, subject: &str, version: u32) -> Result<(), ApiError> {
    let by = store.referenced_by(subject, version);
    if by.is_empty() {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::ReferenceExists,
        format!(
            "version {version} of subject {subject:?} is referenced by schemas {by:?}: delete those first"
        ),
    ))
}

/// A version's record rewritten with `deleted: true`.
fn soft_deleted(store: &Store, subject: &str, version: u32, id: u32) -> Record {
    let stored = &store.schemas[&id];
    Record::Schema {
        subject: subject.to_string(),
        version,
        value: Some(SchemaValue {
            subject: subject.to_string(),
            version,
            id,
            schema_type: stored.schema_type,
            schema: stored.schema.clone(),
            references: stored.references.clone(),
            deleted: true,
        }),
    }
}

fn tombstone(subject: &str, version: u32) -> Record {
    Record::Schema {
        subject: subject.to_string(),
        version,
        value: None,
    }
}

fn delete_subject(store: &Store, subject: &str, permanent: bool) -> Result<Change, ApiError> {
    let all = store.versions(subject, true);
    if all.is_empty() {
        return Err(subject_not_found(subject));
    }
    let live = store.versions(subject, false);
    for (n, _) in &all {
        unreferenced(store, subject, *n)?;
    }
    let versions: Vec<u32> = all.iter().map(|(n, _)| *n).collect();
    if !permanent {
        if live.is_empty() {
            return Err(ApiError::new(
                ErrorCode::SubjectSoftDeleted,
                format!("subject {subject:?} was soft-deleted already (?permanent=true deletes it for good)"),
            ));
        }
        let mut records: Vec<Record> = live
            .iter()
            .map(|(n, v)| soft_deleted(store, subject, *n, v.id))
            .collect();
        records.push(Record::DeleteSubject {
            subject: subject.to_string(),
            version: live.last().map(|(n, _)| *n),
        });
        return Ok(Change {
            records,
            answer: json!(live.iter().map(|(n, _)| n).collect::<Vec<_>>()),
        });
    }
    if !live.is_empty() {
        return Err(ApiError::new(
            ErrorCode::SubjectNotSoftDeleted,
            format!("subject {subject:?} must be soft-deleted (DELETE without ?permanent=true) before it is deleted permanently"),
        ));
    }
    let mut records: Vec<Record> = versions.iter().map(|n| tombstone(subject, *n)).collect();
    if store.levels.contains_key(&Some(subject.to_string())) {
        records.push(Record::Config {
            subject: Some(subject.to_string()),
            level: None,
        });
    }
    Ok(Change {
        records,
        answer: json!(versions),
    })
}

fn delete_version(
    store: &Store,
    subject: &str,
    version: VersionRef,
    permanent: bool,
) -> Result<Change, ApiError> {
    // A permanent delete names a soft-deleted version, which `latest`
    // (the newest live one) never is.
    let (n, v) = find_version(store, subject, version, permanent)?;
    unreferenced(store, subject, n)?;
    if !permanent {
        if v.deleted {
            return Err(ApiError::new(
                ErrorCode::VersionSoftDeleted,
                format!("version {n} of subject {subject:?} was soft-deleted already"),
            ));
        }
        return Ok(Change {
            records: vec![soft_deleted(store, subject, n, v.id)],
            answer: json!(n),
        });
    }
    if !v.deleted {
        return Err(ApiError::new(
            ErrorCode::VersionNotSoftDeleted,
            format!(
                "version {n} of subject {subject:?} must be soft-deleted before it is deleted permanently"
            ),
        ));
    }
    Ok(Change {
        records: vec![tombstone(subject, n)],
        answer: json!(n),
    })
}

/// Appends `records` to `_schemas/0` (created first if it is not there),
/// in batches of about [`REGISTRY_APPEND_BATCH_BYTES`], each durable
/// before the next is sent.
async fn append(shard: &Rc<Shard>, records: &[Record]) -> Result<(), ApiError> {
    if shard.catalog.get(TOPIC).is_none() {
        create_topic(shard).await?;
    }
    let mut batch = Vec::new();
    let mut bytes = 0;
    let now = crate::ops::produce::now_ms();
    for (i, r) in records.iter().enumerate() {
        let (key, value) = r.encode();
        bytes += key.len() + value.len();
        batch.push(es_storage::Record {
            key: Some(key),
            value,
            timestamp_ms: now,
        });
        if bytes >= REGISTRY_APPEND_BATCH_BYTES || i + 1 == records.len() {
            let op = Op::Produce {
                topic: TOPIC.to_string(),
                partition: 0,
                payload: Payload::Records(std::mem::take(&mut batch)),
                producer: None,
            };
            match shard.call(shard.owner(TOPIC, 0), op).await {
                Reply::Produced(Ok(_)) => {}
                Reply::Produced(Err(e)) | Reply::Done(Err(e)) => return Err(e),
                other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
            }
            bytes = 0;
        }
    }
    Ok(())
}

/// Creates `_schemas`: one partition, compacted, tombstones kept a day.
async fn create_topic(shard: &Rc<Shard>) -> Result<(), ApiError> {
    let mut config = TopicConfig::with_segment_bytes(shard.config.segment_bytes);
    config.cleanup_policy = CleanupPolicyName::Compact;
    config.delete_retention_ms = DELETE_RETENTION_MS;
    let meta = TopicMeta {
        name: TOPIC.to_string(),
        partitions: 1,
        replication_factor: 1,
        config,
        created_index: None,
    };
    match shard.call(CONTROLLER_SHARD, Op::CreateTopic(meta)).await {
        Reply::Topic(Ok(_)) => {
            tracing::info!(topic = TOPIC, "created the schema registry's topic");
            Ok(())
        }
        Reply::Topic(Err(e)) if e.code == ErrorCode::TopicExists => Ok(()),
        Reply::Topic(Err(e)) | Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}
