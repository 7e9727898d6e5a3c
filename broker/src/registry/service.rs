//! The registry on the shard that owns `_schemas/0`: its one in-memory
//! copy, loaded by replaying the topic once the broker is ready, the
//! checks every request makes (its subject's name, the caller's grants,
//! before anything is looked up), and the reads. Changes are write.rs.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};

use super::level::{Level, Mode};
use super::record::{subject_is_valid, Record};
use super::request::{NewSchema, RegistryOp, VersionRef};
use super::schema::{self, Parsed, Reference, Referenced, SchemaType};
use super::store::{Store, Stored, Version};
use super::{write, TOPIC};
use crate::auth::grants::{Operation, Resource};
use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::limits::{
    FETCH_RECORDS_MAX, REGISTRY_LIST_BYTES_MAX, REGISTRY_LOAD_POLL_MS, REGISTRY_REFERENCES_MAX,
    REGISTRY_REPLAY_READ_BYTES, SUBJECT_NAME_BYTES_MAX,
};
use crate::shard::message::{FetchArgs, FetchForm, Op, Reply};
use crate::shard::Shard;

/// What one shard holds of the registry: the store on the shard that owns
/// `_schemas/0`, nothing on the others.
pub struct Registry {
    pub(super) store: RefCell<Option<Store>>,
    /// One change (or the load) at a time.
    pub(super) lock: glommio::sync::Semaphore,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            store: RefCell::new(None),
            lock: glommio::sync::Semaphore::new(1),
        }
    }
}

/// Runs `op` for `caller` on this shard, which owns `_schemas/0`.
pub async fn run(shard: &Rc<Shard>, op: RegistryOp, caller: &Principal) -> Result<Value, ApiError> {
    if let Some(s) = op.subject() {
        check_subject(s)?;
    }
    authorize(&op, caller)?;
    loaded(shard).await?;
    if op.is_write() {
        let _one_at_a_time = shard.registry.lock.acquire_permit(1).await;
        return write::run(shard, op).await;
    }
    let store = shard.registry.store.borrow();
    let store = store.as_ref().expect("loaded above, and never unloaded");
    read(shard, store, op, caller)
}

/// 42208 unless `s` is a subject name es accepts.
pub fn check_subject(s: &str) -> Result<(), ApiError> {
    if subject_is_valid(s) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::InvalidSubject,
        format!(
            "invalid subject {s:?}: 1 to {SUBJECT_NAME_BYTES_MAX} bytes of UTF-8 without control characters"
        ),
    ))
}

/// The grant `op` needs (docs/security.md, "Operation matrix"), checked
/// before anything is looked up. Reads by id are checked against the
/// subjects using the id, once it is found (`by_id`); lists are filtered.
fn authorize(op: &RegistryOp, p: &Principal) -> Result<(), ApiError> {
    use RegistryOp as R;
    let subject = |op: Operation, s: &str| p.require(op, Resource::Subject, s);
    match op {
        R::Subjects { .. }
        | R::Schemas { .. }
        | R::SchemaById { .. }
        | R::SubjectsById { .. }
        | R::VersionsById { .. } => Ok(()),
        R::GetMode => Ok(()),
        R::Versions { subject: s, .. }
        | R::Version { subject: s, .. }
        | R::ReferencedBy { subject: s, .. }
        | R::Lookup { subject: s, .. }
        | R::Check { subject: s, .. } => subject(Operation::Read, s),
        R::Register { subject: s, .. } => subject(Operation::Write, s),
        R::DeleteSubject { subject: s, .. } | R::DeleteVersion { subject: s, .. } => {
            subject(Operation::Delete, s)
        }
        R::GetConfig { subject: Some(s), .. } => subject(Operation::Describe, s),
        R::GetConfig { subject: None, .. } => p.require(Operation::Describe, Resource::Cluster, ""),
        R::SetConfig { subject: Some(s), .. } | R::DeleteConfig { subject: Some(s) } => {
            subject(Operation::Alter, s)
        }
        R::SetConfig { subject: None, .. } | R::DeleteConfig { subject: None } => {
            p.require(Operation::Alter, Resource::Cluster, "")
        }
        R::SetMode { .. } => p.require_admin("change the registry's mode"),
    }
}

/// Loads the registry if it is not yet: replays `_schemas` once the
/// broker is ready (every partition open); before, 503 (clients retry).
async fn loaded(shard: &Rc<Shard>) -> Result<(), ApiError> {
    if shard.registry.store.borrow().is_some() {
        return Ok(());
    }
    let _one_at_a_time = shard.registry.lock.acquire_permit(1).await;
    if shard.registry.store.borrow().is_some() {
        return Ok(());
    }
    if !shard.state.is_ready(shard.shards) {
        return Err(ApiError::unavailable(
            "the broker is starting: the schema registry is served once every partition is open; retry",
        ));
    }
    let store = replay(shard).await?;
    set_gauges(&store);
    tracing::info!(
        schemas = store.schemas.len(),
        subjects = store.subjects.len(),
        next_id = store.next_id,
        "schema registry loaded from {TOPIC}"
    );
    *shard.registry.store.borrow_mut() = Some(store);
    Ok(())
}

/// On the shard that owns `_schemas/0`: loads the registry as soon as the
/// broker is ready, so that a damaged record is reported at start, not at
/// the first request.
pub fn spawn_load(shard: &Rc<Shard>) {
    let shard = shard.clone();
    glommio::spawn_local(async move {
        while !shard.state.is_ready(shard.shards) {
            if shard.is_shutting_down() || shard.state.is_shutting_down() {
                return;
            }
            glommio::timer::sleep(Duration::from_millis(REGISTRY_LOAD_POLL_MS)).await;
        }
        if let Err(e) = loaded(&shard).await {
            tracing::error!(error = %e, "the schema registry could not be loaded; requests retry the load");
        }
    })
    .detach();
}

/// Reads `_schemas/0` from its start to its high watermark into a store.
/// A record that is not a registry record, or contradicts the ones before
/// it, is reported (logged with its offset, counted in
/// `es_registry_damaged_records_total`) and skipped.
async fn replay(shard: &Rc<Shard>) -> Result<Store, ApiError> {
    let mut store = Store::new();
    if shard.catalog.get(TOPIC).is_none() {
        return Ok(store);
    }
    let mut offset = None;
    let mut limit = REGISTRY_REPLAY_READ_BYTES;
    loop {
        let args = FetchArgs {
            topic: TOPIC.to_string(),
            partition: 0,
            offset,
            max_records: FETCH_RECORDS_MAX as usize,
            max_bytes: limit,
            limit_bytes: limit,
            wait_ms: 0,
            form: FetchForm::Records,
            wait_only: false,
        };
        let fetched = match shard.call(shard.id, Op::Fetch(args)).await {
            Reply::Fetched(Ok(f)) => f,
            Reply::Fetched(Err(e)) | Reply::Done(Err(e)) => return Err(e),
            other => return Err(ApiError::internal(format!("unexpected reply {other:?}"))),
        };
        if let Some(len) = fetched.first_batch_bytes {
            limit = len;
            continue;
        }
        let crate::shard::message::FetchedData::Records(records) = fetched.data else {
            return Err(ApiError::internal("a records fetch answered batches"));
        };
        for r in records {
            let applied = Record::decode(r.key.as_deref(), &r.value).and_then(|rec| store.apply(rec));
            if let Err(why) = applied {
                metrics::counter!("es_registry_damaged_records_total").increment(1);
                tracing::error!(
                    topic = TOPIC,
                    offset = r.offset.0,
                    why,
                    "a damaged registry record was skipped"
                );
            }
        }
        if fetched.next_offset >= fetched.high_watermark {
            return Ok(store);
        }
        offset = Some(fetched.next_offset);
        limit = REGISTRY_REPLAY_READ_BYTES;
    }
}

/// The registry's gauges, after a load or a change.
pub(super) fn set_gauges(store: &Store) {
    metrics::gauge!("es_registry_schemas").set(store.schemas.len() as f64);
    let live = store
        .subjects
        .values()
        .filter(|vs| vs.values().any(|v| !v.deleted))
        .count();
    metrics::gauge!("es_registry_subjects").set(live as f64);
}

fn read(shard: &Shard, store: &Store, op: RegistryOp, p: &Principal) -> Result<Value, ApiError> {
    use RegistryOp as R;
    match op {
        R::Subjects {
            prefix,
            deleted,
            deleted_only,
        } => {
            let subjects: Vec<&String> = store
                .subjects
                .iter()
                .filter(|(s, vs)| {
                    let live = vs.values().any(|v| !v.deleted);
                    let shown = if deleted_only { !live } else { live || deleted };
                    shown && s.starts_with(&prefix) && p.allows(Operation::Describe, Resource::Subject, s)
                })
                .map(|(s, _)| s)
                .collect();
            Ok(json!(subjects))
        }
        R::Schemas {
            prefix,
            deleted,
            latest_only,
            offset,
            limit,
        } => {
            // Each subject's versions in order, the subjects a key may not
            // describe left out; a page ends at `limit` entries or past
            // REGISTRY_LIST_BYTES_MAX bytes of schema text, whichever first.
            let shown = store
                .subjects
                .range(prefix.clone()..)
                .take_while(|(s, _)| s.starts_with(&prefix))
                .filter(|(s, _)| p.allows(Operation::Describe, Resource::Subject, s))
                .flat_map(|(s, vs)| {
                    let live: Vec<(&u32, &Version)> =
                        vs.iter().filter(|(_, v)| deleted || !v.deleted).collect();
                    let from = if latest_only {
                        live.len().saturating_sub(1)
                    } else {
                        0
                    };
                    live.into_iter().skip(from).map(move |(n, v)| (s, *n, v.id))
                })
                .skip(offset)
                .take(limit.unwrap_or(usize::MAX));
            let mut out = Vec::new();
            let mut bytes = 0;
            for (s, n, id) in shown {
                let stored = &store.schemas[&id];
                if bytes > 0 && bytes + stored.schema.len() > REGISTRY_LIST_BYTES_MAX {
                    break;
                }
                bytes += stored.schema.len();
                out.push(version_json(s, n, id, stored));
            }
            Ok(Value::Array(out))
        }
        R::Versions { subject, deleted } => {
            let versions = store.versions(&subject, deleted);
            if versions.is_empty() {
                return Err(subject_not_found(&subject));
            }
            Ok(json!(versions.iter().map(|(n, _)| n).collect::<Vec<_>>()))
        }
        R::Version {
            subject,
            version,
            deleted,
        } => {
            let (n, v) = find_version(store, &subject, version, deleted)?;
            Ok(version_json(&subject, n, v.id, &store.schemas[&v.id]))
        }
        R::ReferencedBy { subject, version } => {
            let (n, _) = find_version(store, &subject, version, true)?;
            Ok(json!(store.referenced_by(&subject, n)))
        }
        R::Lookup {
            subject,
            schema,
            deleted,
        } => {
            if store.versions(&subject, deleted).is_empty() {
                return Err(subject_not_found(&subject));
            }
            let new = prepare(shard, store, schema)?;
            for (n, v) in store.versions(&subject, deleted).into_iter().rev() {
                if store.schemas[&v.id].fingerprint == new.fingerprint {
                    return Ok(version_json(&subject, n, v.id, &store.schemas[&v.id]));
                }
            }
            Err(ApiError::new(
                ErrorCode::SchemaNotFound,
                format!("schema not found under subject {subject:?}"),
            ))
        }
        R::Check {
            subject,
            version,
            schema,
            verbose,
        } => {
            let new = prepare(shard, store, schema)?;
            let level = store.level_of(&subject);
            let olds: Vec<(u32, Version)> = match version {
                VersionRef::Latest if level == Level::None => Vec::new(),
                VersionRef::Latest => store.versions(&subject, false),
                VersionRef::Number(_) => vec![find_version(store, &subject, version, false)?],
            };
            let parsed = parse_versions(store, &olds)?;
            let why = schema::incompatibilities(level, new.schema_type, &new.parsed, &parsed);
            let mut answer = json!({"is_compatible": why.is_empty()});
            if verbose {
                answer["messages"] = json!(why);
            }
            Ok(answer)
        }
        R::SchemaById { id } => {
            let stored = by_id(store, id, p)?;
            let mut v = json!({"schema": stored.schema});
            describe_type_and_refs(&mut v, stored);
            Ok(v)
        }
        R::SubjectsById { id, deleted } => {
            by_id(store, id, p)?;
            let mut subjects: Vec<String> = store
                .users_of(id, deleted)
                .into_iter()
                .map(|(s, _)| s)
                .filter(|s| p.allows(Operation::Describe, Resource::Subject, s))
                .collect();
            subjects.dedup();
            Ok(json!(subjects))
        }
        R::VersionsById { id, deleted } => {
            by_id(store, id, p)?;
            let versions: Vec<Value> = store
                .users_of(id, deleted)
                .into_iter()
                .filter(|(s, _)| p.allows(Operation::Describe, Resource::Subject, s))
                .map(|(s, n)| json!({"subject": s, "version": n}))
                .collect();
            Ok(json!(versions))
        }
        R::GetConfig {
            subject,
            default_to_global,
        } => {
            let own = store.levels.get(&subject).copied();
            let level = match (own, &subject) {
                (Some(l), _) => l,
                (None, None) => Level::DEFAULT,
                (None, Some(_)) if default_to_global => store.levels.get(&None).copied().unwrap_or(Level::DEFAULT),
                (None, Some(s)) => {
                    return Err(ApiError::new(
                        ErrorCode::SubjectConfigNotFound,
                        format!("subject {s:?} has no compatibility level of its own (?defaultToGlobal=true reads the global one)"),
                    ))
                }
            };
            Ok(json!({"compatibilityLevel": level.as_str()}))
        }
        R::GetMode => Ok(json!({"mode": store.mode.unwrap_or(Mode::Readwrite).as_str()})),
        other => Err(ApiError::internal(format!("{other:?} is not a read"))),
    }
}

/// A new schema, checked and parsed: its references resolved, its text
/// (the canonical form with `normalize`), its fingerprint.
pub(super) struct Prepared {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<Reference>,
    pub parsed: Parsed,
    pub fingerprint: [u8; 32],
}

pub(super) fn prepare(shard: &Shard, store: &Store, new: NewSchema) -> Result<Prepared, ApiError> {
    let max = shard.config.registry.registry_schema_bytes_max;
    if new.schema.len() > max {
        return Err(too_large(new.schema.len(), max));
    }
    let mut references = Vec::with_capacity(new.references.len());
    for r in &new.references {
        check_subject(&r.subject).map_err(|e| {
            ApiError::new(
                ErrorCode::InvalidSchema,
                format!("reference {:?}: {}", r.name, e.message),
            )
        })?;
        let version = match r.version {
            -1 => store
                .versions(&r.subject, false)
                .last()
                .map(|(n, _)| *n)
                .ok_or_else(|| unresolved(&r.name, &r.subject, "latest"))?,
            n if n >= 1 && n <= u32::MAX as i64 => n as u32,
            n => return Err(unresolved(&r.name, &r.subject, &n.to_string())),
        };
        references.push(Reference {
            name: r.name.clone(),
            subject: r.subject.clone(),
            version,
        });
    }
    let referenced = resolve(store, &references)?;
    let parsed = schema::parse(new.schema_type, &new.schema, &referenced)?;
    let text = match (&parsed, new.normalize) {
        (Parsed::Avro(s), true) => s.canonical_form(),
        (Parsed::Json, true) => serde_json::from_str::<Value>(&new.schema)
            .map(|v| v.to_string())
            .unwrap_or(new.schema),
        (Parsed::Protobuf, true) | (_, false) => new.schema,
    };
    let fingerprint = schema::fingerprint(new.schema_type, &text, &references, Some(&parsed), false);
    Ok(Prepared {
        schema_type: new.schema_type,
        schema: text,
        references,
        parsed,
        fingerprint,
    })
}

/// The schemas `references` name, transitively, each after the ones it
/// references (what apache-avro resolves names from; protox opens them by
/// their names).
fn resolve(store: &Store, references: &[Reference]) -> Result<Vec<Referenced>, ApiError> {
    let mut out: Vec<Referenced> = Vec::new();
    let mut seen: Vec<(String, u32)> = Vec::new();
    fn visit(
        store: &Store,
        r: &Reference,
        out: &mut Vec<Referenced>,
        seen: &mut Vec<(String, u32)>,
    ) -> Result<(), ApiError> {
        let key = (r.subject.clone(), r.version);
        if seen.contains(&key) {
            return Ok(());
        }
        seen.push(key);
        if seen.len() > REGISTRY_REFERENCES_MAX {
            return Err(ApiError::new(
                ErrorCode::InvalidSchema,
                format!(
                    "a schema may reference at most {REGISTRY_REFERENCES_MAX} schemas, counted transitively"
                ),
            ));
        }
        let v = store
            .subjects
            .get(&r.subject)
            .and_then(|vs| vs.get(&r.version))
            .filter(|v| !v.deleted)
            .ok_or_else(|| unresolved(&r.name, &r.subject, &r.version.to_string()))?;
        let stored = &store.schemas[&v.id];
        for inner in &stored.references {
            visit(store, inner, out, seen)?;
        }
        out.push(Referenced {
            name: r.name.clone(),
            text: stored.schema.clone(),
        });
        Ok(())
    }
    for r in references {
        visit(store, r, &mut out, &mut seen)?;
    }
    Ok(out)
}

/// Parses stored versions (with their references) for a check.
pub(super) fn parse_versions(
    store: &Store,
    versions: &[(u32, Version)],
) -> Result<Vec<(u32, SchemaType, Parsed)>, ApiError> {
    versions
        .iter()
        .map(|(n, v)| {
            let stored = &store.schemas[&v.id];
            let referenced = resolve(store, &stored.references)?;
            let parsed = schema::parse(stored.schema_type, &stored.schema, &referenced).map_err(|e| {
                ApiError::internal(format!(
                    "stored version {n} (id {}) no longer parses: {}",
                    v.id, e.message
                ))
            })?;
            Ok((*n, stored.schema_type, parsed))
        })
        .collect()
}

fn unresolved(name: &str, subject: &str, version: &str) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidSchema,
        format!("reference {name:?} names subject {subject:?} version {version}, which does not exist"),
    )
}

pub fn too_large(len: usize, max: usize) -> ApiError {
    ApiError::new(
        ErrorCode::SchemaTooLarge,
        format!("the schema is {len} bytes, more than the {max} allowed (--registry-schema-bytes-max)"),
    )
}

pub(super) fn subject_not_found(subject: &str) -> ApiError {
    ApiError::new(
        ErrorCode::SubjectNotFound,
        format!("subject {subject:?} not found"),
    )
}

fn version_not_found(subject: &str, version: VersionRef) -> ApiError {
    let v = match version {
        VersionRef::Latest => "latest".to_string(),
        VersionRef::Number(n) => n.to_string(),
    };
    ApiError::new(
        ErrorCode::VersionNotFound,
        format!("version {v} of subject {subject:?} not found"),
    )
}

/// A subject's version as a path names it: 40401 without the subject (or
/// without a live version, unless `deleted`), 40402 without the version.
pub(super) fn find_version(
    store: &Store,
    subject: &str,
    version: VersionRef,
    deleted: bool,
) -> Result<(u32, Version), ApiError> {
    let versions = store.versions(subject, deleted);
    if versions.is_empty() {
        return Err(subject_not_found(subject));
    }
    let found = match version {
        VersionRef::Latest => versions.last().copied(),
        VersionRef::Number(n) => versions.into_iter().find(|(m, _)| *m == n),
    };
    found.ok_or_else(|| version_not_found(subject, version))
}

/// The schema of `id`, if the caller may read a subject that uses it: 403
/// when only subjects it may not read use it, 40403 when none does.
fn by_id<'a>(store: &'a Store, id: u32, p: &Principal) -> Result<&'a Stored, ApiError> {
    let Some(stored) = store.schemas.get(&id) else {
        return Err(ApiError::new(
            ErrorCode::SchemaNotFound,
            format!("schema {id} not found"),
        ));
    };
    if !p.is_admin() {
        let users = store.users_of(id, true);
        if !users
            .iter()
            .any(|(s, _)| p.allows(Operation::Read, Resource::Subject, s))
        {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "key {} may not read schema {id}: it may read none of the subjects using it",
                    p.id().unwrap_or("-")
                ),
            ));
        }
    }
    Ok(stored)
}

/// `{"subject","version","id","schema"}` and, when not AVRO, `schemaType`,
/// and the references when there are some.
pub(super) fn version_json(subject: &str, version: u32, id: u32, stored: &Stored) -> Value {
    let mut v = json!({"subject": subject, "version": version, "id": id, "schema": stored.schema});
    describe_type_and_refs(&mut v, stored);
    v
}

fn describe_type_and_refs(v: &mut Value, stored: &Stored) {
    if stored.schema_type != SchemaType::Avro {
        v["schemaType"] = json!(stored.schema_type.as_str());
    }
    if !stored.references.is_empty() {
        v["references"] = json!(stored.references);
    }
}
