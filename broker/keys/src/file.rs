//! `<data-dir>/api_keys.json` (docs/security.md, "api_keys.json"): its
//! schema, the checks a file must pass to be read (a file that does not
//! pass stops whoever reads it, naming it), its canonical rendering, and
//! its durable private write: a temp file written and fdatasynced, renamed
//! over the file, the directory fsynced; mode 0600. The file never holds
//! a key, only its SHA-256.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::grants::Grant;
use crate::limits::{GRANTS_PER_KEY_MAX, KEYS_MAX, KEY_FILE_BYTES_MAX, KEY_NAME_CHARS_MAX};
use crate::token::{self, Digest};

/// The key file's name in the data dir.
pub const FILE: &str = "api_keys.json";
/// The bootstrap admin key's plaintext, written once by the broker.
pub const ADMIN_KEY_FILE: &str = "admin.key";
/// The schema version this crate reads and writes.
pub const VERSION: u32 = 1;

/// A key's quota, stored and shown, enforced per broker (docs/security.md
/// "Quotas"). `None`: the broker's `--quota-*-default`, unlimited by
/// default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    pub produce_bytes_per_sec: Option<u64>,
    pub fetch_bytes_per_sec: Option<u64>,
}

/// One key as the file holds it, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// Public: 16 base32 characters.
    pub id: String,
    pub name: String,
    /// SHA-256 of the whole key.
    pub digest: Digest,
    pub admin: bool,
    pub grants: Vec<Grant>,
    pub quota: Quota,
    pub created_at_ms: i64,
    /// The id of the key that created it; `None` for the broker's
    /// bootstrap and for keys made offline.
    pub created_by: Option<String>,
    /// When it was revoked: a revoked key stays, for audit.
    pub revoked_at_ms: Option<i64>,
}

impl KeyRecord {
    /// A new record for `key` (generated, or checked by [`token::parse`]).
    pub fn new(
        key: &str,
        name: &str,
        admin: bool,
        grants: Vec<Grant>,
        quota: Quota,
        created_at_ms: i64,
        created_by: Option<String>,
    ) -> Result<KeyRecord, String> {
        let parsed = token::parse(key).map_err(|_| {
            "not a well-formed API key (esk_<id>_<secret>_<checksum>, 81 characters)".to_string()
        })?;
        Ok(KeyRecord {
            id: parsed.id.to_string(),
            name: name.to_string(),
            digest: parsed.digest(),
            admin,
            grants,
            quota,
            created_at_ms,
            created_by,
            revoked_at_ms: None,
        })
    }

    pub fn is_revoked(&self) -> bool {
        self.revoked_at_ms.is_some()
    }
}

/// Whether `name` is a key name: 1 to [`KEY_NAME_CHARS_MAX`] characters of
/// `A-Z a-z 0-9 . _ -`.
pub fn valid_name(name: &str) -> bool {
    let ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    !name.is_empty() && name.len() <= KEY_NAME_CHARS_MAX && name.bytes().all(ok)
}

/// Admin keys not revoked.
pub fn live_admins(keys: &[KeyRecord]) -> usize {
    keys.iter().filter(|k| k.admin && !k.is_revoked()).count()
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    version: u32,
    keys: Vec<RecordJson>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordJson {
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

/// The keys `bytes` (a key file's content) holds, in file order; why
/// not, in words. Never panics, whatever the bytes.
pub fn parse(bytes: &[u8]) -> Result<Vec<KeyRecord>, String> {
    let file: KeyFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != VERSION {
        return Err(format!(
            "version {} (this build reads version {VERSION})",
            file.version
        ));
    }
    if file.keys.len() > KEYS_MAX {
        return Err(format!("{} keys (at most {KEYS_MAX})", file.keys.len()));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(file.keys.len());
    for r in file.keys {
        if !token::is_id(&r.id) {
            return Err(format!("key id {:?} is not 16 base32 characters", r.id));
        }
        let digest = token::from_hex(&r.token_sha256)
            .ok_or_else(|| format!("key {}: token_sha256 is not 64 hex characters", r.id))?;
        if r.grants.len() > GRANTS_PER_KEY_MAX {
            return Err(format!("key {}: more than {GRANTS_PER_KEY_MAX} grants", r.id));
        }
        if !ids.insert(r.id.clone()) {
            return Err(format!("key id {} appears twice", r.id));
        }
        out.push(KeyRecord {
            id: r.id,
            name: r.name,
            digest,
            admin: r.admin,
            grants: r.grants,
            quota: r.quota,
            created_at_ms: r.created_at_ms,
            created_by: r.created_by,
            revoked_at_ms: r.revoked_at_ms,
        });
    }
    Ok(out)
}

/// The file's bytes for `keys`: sorted by creation time, then id;
/// pretty-printed, ending in a newline.
pub fn render(keys: &[KeyRecord]) -> Vec<u8> {
    let mut sorted: Vec<&KeyRecord> = keys.iter().collect();
    sorted.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    let file = KeyFile {
        version: VERSION,
        keys: sorted
            .into_iter()
            .map(|e| RecordJson {
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

/// The path of the key file in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// Reads `data_dir`'s key file: `None` if there is none; an error naming
/// the file if it cannot be read, is too large or does not parse.
/// Blocking std I/O: the broker calls it before its shards run or on its
/// signal thread.
pub fn read(data_dir: &Path) -> Result<Option<Vec<KeyRecord>>, String> {
    let path = path(data_dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if bytes.len() as u64 > KEY_FILE_BYTES_MAX {
        return Err(format!(
            "{}: larger than {KEY_FILE_BYTES_MAX} bytes",
            path.display()
        ));
    }
    parse(&bytes).map(Some).map_err(|e| {
        format!(
            "{} does not parse: {e}; fix or restore it (docs/security.md)",
            path.display()
        )
    })
}

/// Writes `bytes` to `dir/name` durably and private (0600): a temp file
/// (`name.tmp`) written and fdatasynced, renamed over `name`, the
/// directory fsynced. A crash leaves the old file or the new one.
/// Blocking std I/O: the broker runs it off its shards.
pub fn write_private_sync(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(format!("{name}.tmp"));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        // A temp file left by another writer keeps its mode: make sure.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_data()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Writes `keys` as `data_dir`'s key file, durably and private.
pub fn write(data_dir: &Path, keys: &[KeyRecord]) -> std::io::Result<()> {
    write_private_sync(data_dir, FILE, &render(keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(admin: bool) -> (String, KeyRecord) {
        let key = token::generate().unwrap();
        let r = KeyRecord::new(&key, "ops", admin, vec![], Quota::default(), 7, None).unwrap();
        (key, r)
    }

    #[test]
    fn keys_round_trip() {
        let (key, r) = record(true);
        let back = parse(&render(std::slice::from_ref(&r))).unwrap();
        assert_eq!(back, vec![r.clone()]);
        assert_eq!(back[0].digest, token::digest(&key));
        assert_eq!(back[0].id, token::parse(&key).unwrap().id);
        let text = String::from_utf8(render(&[r])).unwrap();
        assert!(!text.contains(&key[21..73]), "never the secret");
    }

    #[test]
    fn bad_files_are_refused_by_reason() {
        let (_, r) = record(false);
        let twice = render(&[r.clone(), r]);
        for (bad, says) in [
            (&b"{"[..], "EOF"),
            (b"{\"version\":2,\"keys\":[]}", "version 2"),
            (b"{\"version\":1,\"keys\":[{\"id\":\"x\",\"name\":\"n\",\"token_sha256\":\"\",\"created_at_ms\":0}]}", "id"),
            (b"{\"version\":1}", "keys"),
            (b"{\"version\":1,\"keys\":[],\"extra\":1}", "extra"),
            (&twice[..], "twice"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn names() {
        for good in ["ops", "a.b_c-D9", &"x".repeat(128)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "a b", "é", &"x".repeat(129), "a/b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_file_is_written_private_and_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let (_, r) = record(true);
        // A temp file left with another mode by a crash.
        std::fs::write(dir.path().join("api_keys.json.tmp"), "x").unwrap();
        write(dir.path(), std::slice::from_ref(&r)).unwrap();
        let meta = std::fs::metadata(dir.path().join(FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert!(!dir.path().join("api_keys.json.tmp").exists());
        assert_eq!(read(dir.path()).unwrap(), Some(vec![r]));
        std::fs::write(dir.path().join(FILE), "{").unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.contains("api_keys.json does not parse"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn the_parser_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn the_parser_never_panics_on_near_json(s in "\\{\"version\":1,\"keys\":\\[\\{\"id\":\"[a-z2-7]{0,17}\",\"name\":\".{0,3}\",\"token_sha256\":\"[0-9a-f]{0,65}\",\"created_at_ms\":-?[0-9]{0,20}(,\"grants\":\\[\\{\"resource\":\"[a-z]{0,8}\",\"pattern\":\"prefixed\",\"name\":\"\",\"operations\":\\[\"read\"\\]\\}\\])?\\}\\]\\}") {
            let _ = parse(s.as_bytes());
        }
    }
}
