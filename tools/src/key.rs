//! `es-tools key create|list|revoke --data-dir D`: API keys of a stopped
//! broker's data dir, offline, under the broker's own lock (a running
//! broker: exit 2). The recovery path when every admin key is lost
//! (docs/security.md). The key format, the file's schema and its durable
//! private write are es-keys', the very code the broker runs.

use std::io::Write;
use std::path::Path;

use es_keys::file::{self as key_file, KeyRecord, Quota};
use es_keys::limits::KEYS_MAX;
use es_keys::token;
use serde_json::json;

use crate::datadir;
use crate::fail::{Fail, Outcome};

/// The keys of `data`'s api_keys.json (none if it has no file); the lock
/// must be held.
fn read(data: &Path) -> Result<Vec<KeyRecord>, Fail> {
    Ok(key_file::read(data).map_err(Fail)?.unwrap_or_default())
}

fn write(data: &Path, keys: &[KeyRecord]) -> Result<(), Fail> {
    key_file::write(data, keys).map_err(|e| Fail::io(&key_file::path(data), e))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `key create`: a new admin key, added to the file; the key is printed
/// once (stdout), never stored.
pub fn create(data: &Path, name: &str, json: bool, out: &mut dyn Write) -> Result<Outcome, Fail> {
    if !key_file::valid_name(name) {
        return Err(Fail(format!(
            "a key name is 1-{} characters of A-Z, a-z, 0-9, '.', '_' and '-', not {name:?}",
            es_keys::limits::KEY_NAME_CHARS_MAX
        )));
    }
    let _lock = datadir::lock(data)?;
    let mut keys = read(data)?;
    if keys.len() >= KEYS_MAX {
        return Err(Fail(format!(
            "{} holds {} keys, revoked ones included: at most {KEYS_MAX}",
            key_file::path(data).display(),
            keys.len()
        )));
    }
    let key = loop {
        let key = token::generate().map_err(Fail)?;
        let id = token::parse(&key)
            .map(|p| p.id.to_string())
            .map_err(|_| Fail("a generated key does not parse".into()))?;
        if keys.iter().all(|k| k.id != id) {
            break key;
        }
    };
    let record =
        KeyRecord::new(&key, name, true, Vec::new(), Quota::default(), now_ms(), None).map_err(Fail)?;
    let (id, created) = (record.id.clone(), record.created_at_ms);
    keys.push(record);
    write(data, &keys)?;
    if json {
        let v = json!({"id": id, "key": key, "name": name, "admin": true, "created_at_ms": created,
                       "file": key_file::path(data).display().to_string()});
        writeln!(out, "{v}")?;
    } else {
        writeln!(out, "{key}")?;
        eprintln!(
            "admin key {name} created (id {id}) in {}. It is shown only this once: store it now. \
             Start the broker (or send it SIGHUP) to use it.",
            key_file::path(data).display()
        );
    }
    Ok(Outcome::Clean)
}

/// `key list`: every key's id, name, admin flag, creation and revocation;
/// never a secret nor a digest.
pub fn list(data: &Path, json: bool, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let _lock = datadir::lock(data)?;
    let mut keys = read(data)?;
    keys.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    if json {
        let list: Vec<_> = keys
            .iter()
            .map(|k| {
                json!({"id": k.id, "name": k.name, "admin": k.admin, "grants": k.grants, "quota": k.quota,
                       "created_at_ms": k.created_at_ms, "created_by": k.created_by,
                       "revoked": k.is_revoked(), "revoked_at_ms": k.revoked_at_ms})
            })
            .collect();
        writeln!(out, "{}", json!({ "keys": list }))?;
        return Ok(Outcome::Clean);
    }
    let width = keys.iter().map(|k| k.name.len()).max().unwrap_or(4).max(4);
    writeln!(
        out,
        "{:<16}  {:<width$}  {:<5}  {:<6}  {:<7}  CREATED_AT_MS",
        "ID", "NAME", "ADMIN", "GRANTS", "REVOKED"
    )?;
    for k in &keys {
        writeln!(
            out,
            "{:<16}  {:<width$}  {:<5}  {:<6}  {:<7}  {}",
            k.id,
            k.name,
            k.admin,
            k.grants.len(),
            k.is_revoked(),
            k.created_at_ms
        )?;
    }
    writeln!(
        out,
        "{} keys ({} live admin)",
        keys.len(),
        key_file::live_admins(&keys)
    )?;
    Ok(Outcome::Clean)
}

/// `key revoke ID`: marks the key revoked (it stays, for audit). The last
/// live admin key is not revoked, as the broker refuses it too.
pub fn revoke(data: &Path, id: &str, json: bool, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let _lock = datadir::lock(data)?;
    let mut keys = read(data)?;
    let live_admins = key_file::live_admins(&keys);
    let Some(k) = keys.iter_mut().find(|k| k.id == id) else {
        return Err(Fail(format!(
            "no API key has id {id:?} in {}",
            key_file::path(data).display()
        )));
    };
    let was = k.is_revoked();
    if !was {
        if k.admin && live_admins <= 1 {
            return Err(Fail(format!(
                "key {id} is the last admin key: revoke it and no one could manage keys; \
                 create another admin key first (es-tools key create --admin)"
            )));
        }
        k.revoked_at_ms = Some(now_ms());
        write(data, &keys)?;
    }
    if json {
        writeln!(out, "{}", json!({"id": id, "revoked": true, "already": was}))?;
    } else if was {
        writeln!(out, "key {id} was already revoked")?;
    } else {
        writeln!(out, "key {id} revoked")?;
    }
    Ok(Outcome::Clean)
}
