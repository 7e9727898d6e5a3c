//! Key management, independent of the transport (docs/api.md, "Keys"):
//! reads (list, get, whoami) from the table on the shard that received the
//! request; changes (create, patch, revoke) on the controller shard, one at
//! a time, each written to api_keys.json durably before it is published
//! and answered.

use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::grants::{parse_grants, Grant};
use super::principal::Principal;
use super::store;
use super::table::{KeyEntry, KeyTable, Quota};
use super::token;
use crate::error::{ApiError, ErrorCode};
use crate::limits;
use crate::shard::message::{Op, Reply};
use crate::shard::{Shard, CONTROLLER_SHARD};

/// A change to the key table, run on the controller shard.
#[derive(Debug)]
pub enum KeyOp {
    Create {
        name: String,
        admin: bool,
        grants: Vec<Grant>,
        quota: Quota,
        by: Option<String>,
    },
    Patch {
        id: String,
        name: Option<String>,
        admin: Option<bool>,
        grants: Option<Vec<Grant>>,
        quota: Option<Quota>,
    },
    Revoke {
        id: String,
    },
}

fn disabled() -> ApiError {
    ApiError::invalid("this broker runs with --auth disabled: there are no API keys to manage")
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::KeyNotFound, format!("no API key has id {id:?}"))
}

/// Checks the caller is an admin on a broker with auth on.
fn admin_only(shard: &Shard, p: &Principal) -> Result<(), ApiError> {
    if !shard.state.keys.required() {
        return Err(disabled());
    }
    p.require_admin("manage API keys")
}

fn check_name(name: &str) -> Result<(), ApiError> {
    if !es_keys::file::valid_name(name) {
        return Err(ApiError::invalid(format!(
            "a key name is 1-{} characters of A-Z, a-z, 0-9, '.', '_' and '-', not {name:?}",
            limits::KEY_NAME_CHARS_MAX
        )));
    }
    Ok(())
}

fn parse_quota(v: &serde_json::Value) -> Result<Quota, ApiError> {
    if v.is_null() {
        return Ok(Quota::default());
    }
    let obj = v
        .as_object()
        .ok_or_else(|| ApiError::invalid("\"quota\" must be an object or null"))?;
    let rate = |field: &str| -> Result<Option<u64>, ApiError> {
        match obj.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|&n| (1..=crate::limits::QUOTA_BYTES_PER_SEC_MAX).contains(&n))
                .map(Some)
                .ok_or_else(|| {
                    ApiError::invalid(format!(
                        "quota.{field} must be an integer in 1..={} (bytes per second) or null",
                        crate::limits::QUOTA_BYTES_PER_SEC_MAX
                    ))
                }),
        }
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "produce_bytes_per_sec" | "fetch_bytes_per_sec"))
    {
        return Err(ApiError::invalid(format!("unknown quota field {k:?}")));
    }
    Ok(Quota {
        produce_bytes_per_sec: rate("produce_bytes_per_sec")?,
        fetch_bytes_per_sec: rate("fetch_bytes_per_sec")?,
    })
}

fn object(body: &serde_json::Value) -> Result<&serde_json::Map<String, serde_json::Value>, ApiError> {
    body.as_object()
        .ok_or_else(|| ApiError::invalid("the request body must be a JSON object"))
}

fn unknown_fields(obj: &serde_json::Map<String, serde_json::Value>, known: &[&str]) -> Result<(), ApiError> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(format!(
            "unknown field {k:?} (fields: {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// `POST /v1/keys`: a new key; the only answer that shows it.
pub async fn create(
    shard: &Rc<Shard>,
    p: &Principal,
    body: &serde_json::Value,
) -> Result<serde_json::Value, ApiError> {
    admin_only(shard, p)?;
    let obj = object(body)?;
    unknown_fields(obj, &["name", "admin", "grants", "quota"])?;
    let name = obj
        .get("name")
        .and_then(|n| n.as_str())
        .ok_or_else(|| ApiError::invalid("a key needs a string \"name\""))?;
    check_name(name)?;
    let admin = match obj.get("admin") {
        None | Some(serde_json::Value::Null) => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| ApiError::invalid("\"admin\" must be true or false"))?,
    };
    let grants = match obj.get("grants") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(v) => parse_grants(v)?,
    };
    let quota = parse_quota(obj.get("quota").unwrap_or(&serde_json::Value::Null))?;
    let op = KeyOp::Create {
        name: name.to_string(),
        admin,
        grants,
        quota,
        by: p.id().map(String::from),
    };
    call(shard, op).await
}

/// `PATCH /v1/keys/{id}`.
pub async fn patch(
    shard: &Rc<Shard>,
    p: &Principal,
    id: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, ApiError> {
    admin_only(shard, p)?;
    let obj = object(body)?;
    unknown_fields(obj, &["name", "admin", "grants", "quota"])?;
    let name = match obj.get("name") {
        None => None,
        Some(v) => {
            let n = v
                .as_str()
                .ok_or_else(|| ApiError::invalid("\"name\" must be a string"))?;
            check_name(n)?;
            Some(n.to_string())
        }
    };
    let admin = match obj.get("admin") {
        None => None,
        Some(v) => Some(
            v.as_bool()
                .ok_or_else(|| ApiError::invalid("\"admin\" must be true or false"))?,
        ),
    };
    let grants = obj.get("grants").map(parse_grants).transpose()?;
    let quota = obj.get("quota").map(parse_quota).transpose()?;
    let op = KeyOp::Patch {
        id: id.to_string(),
        name,
        admin,
        grants,
        quota,
    };
    call(shard, op).await
}

/// `DELETE /v1/keys/{id}`: revokes the key (kept, marked, for audit).
pub async fn revoke(shard: &Rc<Shard>, p: &Principal, id: &str) -> Result<serde_json::Value, ApiError> {
    admin_only(shard, p)?;
    call(shard, KeyOp::Revoke { id: id.to_string() }).await
}

/// `GET /v1/keys`.
pub fn list(shard: &Shard, p: &Principal) -> Result<serde_json::Value, ApiError> {
    admin_only(shard, p)?;
    let table = shard.state.keys.table();
    let mut keys: Vec<&Arc<KeyEntry>> = table.keys.values().collect();
    keys.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    let keys: Vec<_> = keys.into_iter().map(|k| k.public_json()).collect();
    Ok(serde_json::json!({ "keys": keys }))
}

/// `GET /v1/keys/{id}`.
pub fn get(shard: &Shard, p: &Principal, id: &str) -> Result<serde_json::Value, ApiError> {
    admin_only(shard, p)?;
    let table = shard.state.keys.table();
    table
        .keys
        .get(id)
        .map(|k| k.public_json())
        .ok_or_else(|| not_found(id))
}

/// `GET /v1/whoami`: the caller's key, without its secret.
pub fn whoami(shard: &Shard, p: &Principal) -> Result<serde_json::Value, ApiError> {
    match p.key() {
        Some(k) => Ok(k.public_json()),
        None if !shard.state.keys.required() => Err(disabled()),
        None => Err(ApiError::new(ErrorCode::Unauthenticated, "no API key")),
    }
}

async fn call(shard: &Rc<Shard>, op: KeyOp) -> Result<serde_json::Value, ApiError> {
    match shard.call(CONTROLLER_SHARD, Op::Keys(op)).await {
        Reply::Json(r) => r,
        Reply::Done(Err(e)) => Err(e),
        other => Err(ApiError::internal(format!("unexpected reply {other:?}"))),
    }
}

/// Runs a change on the controller shard: the new table is written to
/// api_keys.json durably, then published to every shard, then answered.
pub async fn run(shard: &Rc<Shard>, op: KeyOp) -> Result<serde_json::Value, ApiError> {
    assert_eq!(shard.id, CONTROLLER_SHARD, "key changes run on the controller");
    let _guard = shard.controller_lock.acquire_permit(1).await;
    let keys = &shard.state.keys;
    let mut table: KeyTable = (*keys.table()).clone();
    let answer = match op {
        KeyOp::Create {
            name,
            admin,
            grants,
            quota,
            by,
        } => {
            if table.keys.len() >= limits::KEYS_MAX {
                return Err(ApiError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "the broker holds at most {} keys, revoked ones included",
                        limits::KEYS_MAX
                    ),
                ));
            }
            let key = token::generate().map_err(ApiError::internal)?;
            let entry = store::new_entry(&key, &name, admin, grants, quota, by);
            if table.keys.contains_key(&entry.id) {
                return Err(ApiError::internal("a generated key id collided; retry"));
            }
            let mut shown = entry.public_json();
            shown["key"] = serde_json::Value::String(key);
            table.keys.insert(entry.id.clone(), Arc::new(entry));
            shown
        }
        KeyOp::Patch {
            id,
            name,
            admin,
            grants,
            quota,
        } => {
            let old = table.keys.get(&id).ok_or_else(|| not_found(&id))?;
            if old.is_revoked() {
                return Err(ApiError::invalid(format!(
                    "key {id} is revoked: it cannot change"
                )));
            }
            let mut e = KeyEntry::clone(old);
            if admin == Some(false) && e.admin && table.live_admins() <= 1 {
                return Err(last_admin(&id, "demote"));
            }
            e.name = name.unwrap_or(e.name);
            e.admin = admin.unwrap_or(e.admin);
            e.grants = grants.unwrap_or(e.grants);
            e.quota = quota.unwrap_or(e.quota);
            let shown = e.public_json();
            table.keys.insert(id, Arc::new(e));
            shown
        }
        KeyOp::Revoke { id } => {
            let old = table.keys.get(&id).ok_or_else(|| not_found(&id))?;
            if !old.is_revoked() {
                if old.admin && table.live_admins() <= 1 {
                    return Err(last_admin(&id, "revoke"));
                }
                let mut e = KeyEntry::clone(old);
                e.revoked = AtomicBool::new(true);
                e.revoked_at_ms = Some(crate::operate::clock::now_ms());
                table.keys.insert(id.clone(), Arc::new(e));
            }
            serde_json::json!({"id": id, "revoked": true})
        }
    };
    table.generation += 1;
    store::write_and_publish(shard.state.clone(), &shard.config.data_dir, table).await?;
    Ok(answer)
}

fn last_admin(id: &str, what: &str) -> ApiError {
    ApiError::new(
        ErrorCode::LastAdmin,
        format!("key {id} is the last admin key: {what} it and no one could manage keys; create another admin key first"),
    )
}
