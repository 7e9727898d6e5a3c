//! `<data-dir>/api_keys.json` (docs/security.md, "api_keys.json"): read
//! before the shards run (a file that does not parse stops the start,
//! naming it), written by the controller shard only, whole and durably
//! (temp file, fdatasync, rename, directory fsync; mode 0600) before a
//! change is answered or published.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use es_keys::file::{self as key_file, KeyRecord};

use super::grants::Grant;
use super::table::{KeyEntry, KeyTable, Quota};
use crate::error::ApiError;

pub use es_keys::file::{write_private_sync, ADMIN_KEY_FILE, FILE};

/// The path of the key file in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    key_file::path(data_dir)
}

fn entry(r: KeyRecord) -> KeyEntry {
    KeyEntry {
        revoked: AtomicBool::new(r.revoked_at_ms.is_some()),
        id: r.id,
        name: r.name,
        digest: r.digest,
        admin: r.admin,
        grants: r.grants,
        quota: r.quota,
        created_at_ms: r.created_at_ms,
        created_by: r.created_by,
        revoked_at_ms: r.revoked_at_ms,
        runtime: Default::default(),
    }
}

fn table_of(records: Vec<KeyRecord>) -> KeyTable {
    let mut table = KeyTable::default();
    for r in records {
        table.keys.insert(r.id.clone(), Arc::new(entry(r)));
    }
    table
}

/// The file's bytes for `table`.
pub fn render(table: &KeyTable) -> Vec<u8> {
    let records: Vec<KeyRecord> = table
        .keys
        .values()
        .map(|e| KeyRecord {
            id: e.id.clone(),
            name: e.name.clone(),
            digest: e.digest,
            admin: e.admin,
            grants: e.grants.clone(),
            quota: e.quota,
            created_at_ms: e.created_at_ms,
            created_by: e.created_by.clone(),
            revoked_at_ms: e.revoked_at_ms,
        })
        .collect();
    key_file::render(&records)
}

/// A new key entry for `key` (already generated or given).
pub fn new_entry(
    key: &str,
    name: &str,
    admin: bool,
    grants: Vec<Grant>,
    quota: Quota,
    by: Option<String>,
) -> KeyEntry {
    let now = crate::operate::clock::now_ms();
    let r =
        KeyRecord::new(key, name, admin, grants, quota, now, by).expect("a generated or checked key parses");
    entry(r)
}

/// Reads the key file at start-up (or on SIGHUP), off the shards: `None`
/// if there is none; an error naming the file if it cannot be read or
/// parsed.
pub fn read_file(data_dir: &Path) -> Result<Option<KeyTable>, String> {
    // blocking-ok: start-up (before the shards run) or the signal thread
    key_file::read(data_dir).map(|r| r.map(table_of))
}

/// Held while the key file is written and its table published, and while
/// a SIGHUP reload reads and publishes it: a reload never publishes a
/// file older than the table in force. Taken only off the shards (the
/// blocking pool, the signal thread, start-up).
// blocking-ok: never taken on a shard's thread
pub static FILE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Writes `table` to api_keys.json durably, then publishes it to every
/// shard: on glommio's blocking pool, so the shard does not block.
pub async fn write_and_publish(
    state: Arc<crate::shard::state::BrokerState>,
    data_dir: &Path,
    table: KeyTable,
) -> Result<(), ApiError> {
    let dir = data_dir.to_path_buf();
    let bytes = render(&table);
    glommio::executor()
        .spawn_blocking(move || {
            let _held = FILE_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            write_private_sync(&dir, FILE, &bytes)?;
            state.keys.publish(table);
            Ok(())
        })
        .await
        .map_err(|e: std::io::Error| ApiError::io(format!("writing {}", path(data_dir).display()), &e))
}

#[cfg(test)]
mod tests {
    use super::super::token;
    use super::*;

    /// The file's checks and its proptests are es-keys' (file.rs); this
    /// is the table's way through it.
    #[test]
    fn a_table_round_trips() {
        let key = token::generate().unwrap();
        let mut table = KeyTable::default();
        let e = new_entry(&key, "ops", true, vec![], Quota::default(), None);
        table.keys.insert(e.id.clone(), Arc::new(e));
        let back = table_of(key_file::parse(&render(&table)).unwrap());
        let id = token::parse(&key).unwrap().id;
        assert_eq!(back.keys[id].digest, token::digest(&key));
        assert!(back.keys[id].admin);
        assert!(!back.keys[id].is_revoked());
    }
}
