//! The key table at start-up, before the shards run (docs/security.md,
//! "Bootstrap admin"): api_keys.json if it exists; otherwise, with
//! `--auth required`, one admin key, the operator's (`--admin-key-file`,
//! `ES_ADMIN_KEY`) or a generated one written to `<data-dir>/admin.key`.
//! With a key file already there, an operator's admin key whose id it does
//! not hold is added as an admin: the recovery path for lost admin keys
//! (whoever can start the broker owns its data dir anyway).

use std::path::Path;
use std::sync::Arc;

use super::store;
use super::table::{AuthMode, KeyTable, Quota};
use super::token;

/// The operator's admin key: the first line of `--admin-key-file`, else
/// `ES_ADMIN_KEY`; it must be a well-formed key.
pub fn operator_key(file: Option<&Path>, env: Option<String>) -> Result<Option<String>, String> {
    let (key, from) = match file {
        Some(f) => {
            let text = std::fs::read_to_string(f) // blocking-ok: start-up, before the shards run
                .map_err(|e| format!("--admin-key-file {}: {e}", f.display()))?;
            (
                text.lines().next().unwrap_or("").trim().to_string(),
                format!("--admin-key-file {}", f.display()),
            )
        }
        None => match env.filter(|k| !k.trim().is_empty()) {
            Some(k) => (k.trim().to_string(), "ES_ADMIN_KEY".to_string()),
            None => return Ok(None),
        },
    };
    match token::parse(&key) {
        Ok(_) => Ok(Some(key)),
        Err(_) => Err(format!(
            "{from} does not hold a well-formed API key (esk_<id>_<secret>_<checksum>, 81 characters; \
             `es-broker` writes one to <data-dir>/admin.key when given none)"
        )),
    }
}

/// The table the shards start with.
pub fn load(data_dir: &Path, mode: AuthMode, operator: Option<String>) -> Result<KeyTable, String> {
    let existing = store::read_file(data_dir)?;
    let write = |table: &KeyTable| {
        store::write_private_sync(data_dir, store::FILE, &store::render(table))
            .map_err(|e| format!("writing {}: {e}", store::path(data_dir).display()))
    };
    match (existing, mode) {
        (Some(mut table), _) => {
            let Some(key) = operator.filter(|_| mode == AuthMode::Required) else {
                return Ok(table);
            };
            let parsed = token::parse(&key).expect("checked by operator_key");
            match table.keys.get(parsed.id) {
                Some(e) if e.digest == parsed.digest() && !e.is_revoked() => {}
                Some(_) => tracing::warn!(
                    id = parsed.id,
                    "the operator's admin key (--admin-key-file / ES_ADMIN_KEY) has an id api_keys.json holds \
                     for another or a revoked key: ignored"
                ),
                None => {
                    let entry = store::new_entry(&key, "recovered-admin", true, vec![], Quota::default(), None);
                    tracing::warn!(
                        id = %entry.id,
                        "the operator's admin key (--admin-key-file / ES_ADMIN_KEY) is not in api_keys.json: \
                         added as an admin key named recovered-admin"
                    );
                    table.keys.insert(entry.id.clone(), Arc::new(entry));
                    write(&table)?;
                }
            }
            Ok(table)
        }
        (None, AuthMode::Disabled) => Ok(KeyTable::default()),
        (None, AuthMode::Required) => {
            let (key, generated) = match operator {
                Some(k) => (k, false),
                None => (token::generate()?, true),
            };
            if generated {
                let path = data_dir.join(store::ADMIN_KEY_FILE);
                store::write_private_sync(data_dir, store::ADMIN_KEY_FILE, format!("{key}\n").as_bytes())
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
                tracing::warn!(
                    "bootstrap admin key written to {}; store it and delete the file",
                    path.display()
                );
            }
            let entry = store::new_entry(&key, "bootstrap-admin", true, vec![], Quota::default(), None);
            tracing::info!(id = %entry.id, "created the bootstrap admin key");
            let mut table = KeyTable::default();
            table.keys.insert(entry.id.clone(), Arc::new(entry));
            write(&table)?;
            Ok(table)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_dir_gets_one_admin_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let t = load(dir.path(), AuthMode::Required, None).unwrap();
        assert_eq!(t.keys.len(), 1);
        let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap();
        let id = token::parse(key.trim()).unwrap().id.to_string();
        assert!(t.keys[&id].admin);
        let again = load(dir.path(), AuthMode::Required, None).unwrap();
        assert_eq!(again.keys.len(), 1, "no second key");
    }

    #[test]
    fn an_operator_key_bootstraps_then_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let first = token::generate().unwrap();
        let t = load(dir.path(), AuthMode::Required, Some(first.clone())).unwrap();
        assert_eq!(t.keys.len(), 1);
        assert!(!dir.path().join("admin.key").exists());
        let t = load(dir.path(), AuthMode::Required, Some(first)).unwrap();
        assert_eq!(t.keys.len(), 1, "already there");
        let second = token::generate().unwrap();
        let t = load(dir.path(), AuthMode::Required, Some(second)).unwrap();
        assert_eq!(t.keys.len(), 2, "a lost admin key's replacement");
        assert!(operator_key(None, Some("nope".into())).is_err());
    }

    #[test]
    fn a_broken_file_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("api_keys.json"), "{").unwrap();
        let e = load(dir.path(), AuthMode::Disabled, None).unwrap_err();
        assert!(e.contains("api_keys.json"), "{e}");
    }
}
