//! `<data-dir>/api_keys.json` (docs/security.md, "api_keys.json"): read
//! before the shards run (a file that does not parse stops the start,
//! naming it), written by the controller shard only, whole and durably
//! (temp file, fdatasync, rename, directory fsync; mode 0600) before a
//! change is answered or published.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::grants::Grant;
use super::table::{KeyEntry, KeyTable, Quota};
use super::token;
use crate::error::ApiError;
use crate::limits;

pub const FILE: &str = "api_keys.json";
/// The bootstrap admin key's plaintext, written once.
pub const ADMIN_KEY_FILE: &str = "admin.key";
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    version: u32,
    keys: Vec<KeyRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyRecord {
    id: String,
    name: String,
    token_sha256: String,
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    grants: Vec<Grant>,
    #[serde(default)]
    quota: Quota,
    created_at_ms: i64,
    #[serde(default)]
    created_by: Option<String>,
    #[serde(default)]
    revoked_at_ms: Option<i64>,
}

/// The path of the key file in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The table `bytes` (a key file's content) holds; why not, in words.
/// Never panics, whatever the bytes.
pub fn parse(bytes: &[u8]) -> Result<KeyTable, String> {
    let file: KeyFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != VERSION {
        return Err(format!(
            "version {} (this broker reads version {VERSION})",
            file.version
        ));
    }
    if file.keys.len() > limits::KEYS_MAX {
        return Err(format!("{} keys (at most {})", file.keys.len(), limits::KEYS_MAX));
    }
    let mut table = KeyTable::default();
    for r in file.keys {
        if !token::is_id(&r.id) {
            return Err(format!("key id {:?} is not 16 base32 characters", r.id));
        }
        let digest = token::from_hex(&r.token_sha256)
            .ok_or_else(|| format!("key {}: token_sha256 is not 64 hex characters", r.id))?;
        if r.grants.len() > limits::GRANTS_PER_KEY_MAX {
            return Err(format!(
                "key {}: more than {} grants",
                r.id,
                limits::GRANTS_PER_KEY_MAX
            ));
        }
        let entry = KeyEntry {
            revoked: AtomicBool::new(r.revoked_at_ms.is_some()),
            id: r.id.clone(),
            name: r.name,
            digest,
            admin: r.admin,
            grants: r.grants,
            quota: r.quota,
            created_at_ms: r.created_at_ms,
            created_by: r.created_by,
            revoked_at_ms: r.revoked_at_ms,
            runtime: Default::default(),
        };
        if table.keys.insert(r.id.clone(), Arc::new(entry)).is_some() {
            return Err(format!("key id {} appears twice", r.id));
        }
    }
    Ok(table)
}

/// The file's bytes for `table`.
pub fn render(table: &KeyTable) -> Vec<u8> {
    let mut keys: Vec<&Arc<KeyEntry>> = table.keys.values().collect();
    keys.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    let file = KeyFile {
        version: VERSION,
        keys: keys
            .into_iter()
            .map(|e| KeyRecord {
                id: e.id.clone(),
                name: e.name.clone(),
                token_sha256: token::to_hex(&e.digest),
                admin: e.admin,
                grants: e.grants.clone(),
                quota: e.quota,
                created_at_ms: e.created_at_ms,
                created_by: e.created_by.clone(),
                revoked_at_ms: e.revoked_at_ms,
            })
            .collect(),
    };
    let mut out = serde_json::to_vec_pretty(&file).expect("the key file serializes");
    out.push(b'\n');
    out
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
    let parsed = token::parse(key).expect("a generated or checked key parses");
    KeyEntry {
        id: parsed.id.to_string(),
        name: name.to_string(),
        digest: parsed.digest(),
        admin,
        grants,
        quota,
        created_at_ms: crate::operate::clock::now_ms(),
        created_by: by,
        revoked_at_ms: None,
        revoked: AtomicBool::new(false),
        runtime: Default::default(),
    }
}

/// Reads the key file at start-up (or on SIGHUP), off the shards: `None`
/// if there is none; an error naming the file if it cannot be read or
/// parsed.
pub fn read_file(data_dir: &Path) -> Result<Option<KeyTable>, String> {
    let path = path(data_dir);
    // blocking-ok: start-up (before the shards run) or the signal thread
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if bytes.len() as u64 > limits::KEY_FILE_BYTES_MAX {
        return Err(format!(
            "{}: larger than {} bytes",
            path.display(),
            limits::KEY_FILE_BYTES_MAX
        ));
    }
    parse(&bytes).map(Some).map_err(|e| {
        format!(
            "{} does not parse: {e}; fix or restore it (docs/security.md)",
            path.display()
        )
    })
}

/// Writes `bytes` to `dir/name` durably and private (0600), off the shards'
/// threads: a temp file written and fdatasynced, renamed over `name`, the
/// directory fsynced. A crash leaves the old file or the new one.
pub fn write_private_sync(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(format!("{name}.tmp"));
    let written = (|| {
        // blocking-ok: start-up, or on glommio's blocking pool (write_private)
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp); // blocking-ok: as above
        return Err(e);
    }
    std::fs::rename(&tmp, dir.join(name))?; // blocking-ok: as above
    std::fs::File::open(dir)?.sync_all() // blocking-ok: as above
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
    use super::*;

    #[test]
    fn a_table_round_trips() {
        let key = token::generate().unwrap();
        let mut table = KeyTable::default();
        let e = new_entry(&key, "ops", true, vec![], Quota::default(), None);
        table.keys.insert(e.id.clone(), Arc::new(e));
        let back = parse(&render(&table)).unwrap();
        let id = token::parse(&key).unwrap().id;
        assert_eq!(back.keys[id].digest, token::digest(&key));
        assert!(back.keys[id].admin);
    }

    #[test]
    fn bad_files_are_refused_by_reason() {
        for (bad, says) in [
            (&b"{"[..], "EOF"),
            (b"{\"version\":2,\"keys\":[]}", "version 2"),
            (b"{\"version\":1,\"keys\":[{\"id\":\"x\",\"name\":\"n\",\"token_sha256\":\"\",\"created_at_ms\":0}]}", "id"),
            (b"{\"version\":1}", "keys"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_file_is_written_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        write_private_sync(dir.path(), FILE, b"{}").unwrap();
        let meta = std::fs::metadata(dir.path().join(FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(!dir.path().join("api_keys.json.tmp").exists());
    }

    proptest::proptest! {
        #[test]
        fn the_loader_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn the_loader_never_panics_on_near_json(s in "\\{\"version\":1,\"keys\":\\[\\{\"id\":\"[a-z2-7]{0,17}\",\"name\":\".{0,3}\",\"token_sha256\":\"[0-9a-f]{0,65}\",\"created_at_ms\":-?[0-9]{0,20}(,\"grants\":\\[\\{\"resource\":\"[a-z]{0,8}\",\"pattern\":\"prefixed\",\"name\":\"\",\"operations\":\\[\"read\"\\]\\}\\])?\\}\\]\\}") {
            let _ = parse(s.as_bytes());
        }
    }
}
