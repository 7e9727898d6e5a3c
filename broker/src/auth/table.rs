//! The key table every shard reads: `Keys`, a broker-wide handle over an
//! `ArcSwap<KeyTable>` (read-mostly shared configuration, like the metrics
//! handle), and authentication against it. A new table is published only
//! after api_keys.json holds it durably (store.rs).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use subtle::ConstantTimeEq;

use super::grants::{Grant, Operation, Resource};
use super::quota::KeyRuntime;
use super::token::{self, Digest, Malformed};

/// A key's quota, stored and shown (es-keys' type, as api_keys.json holds
/// it), enforced per broker by its `KeyRuntime` (quota.rs,
/// docs/security.md "Quotas").
pub use es_keys::file::Quota;

/// One key, as the table holds it. Shared (`Arc`) by every connection that
/// authenticated with it; `revoked` reaches them all.
#[derive(Debug)]
pub struct KeyEntry {
    pub id: String,
    pub name: String,
    pub digest: Digest,
    pub admin: bool,
    pub grants: Vec<Grant>,
    pub quota: Quota,
    pub created_at_ms: i64,
    pub created_by: Option<String>,
    pub revoked_at_ms: Option<i64>,
    /// Set when the key is revoked: connections holding this entry read it
    /// (relaxed) on every request.
    pub revoked: AtomicBool,
    /// The quota buckets and counters: shared by every copy of the entry
    /// (a PATCH or a revoke keeps them), so a PATCH of `quota` applies
    /// to the next request and the debt survives it.
    pub runtime: Arc<KeyRuntime>,
}

impl Clone for KeyEntry {
    fn clone(&self) -> KeyEntry {
        KeyEntry {
            id: self.id.clone(),
            name: self.name.clone(),
            digest: self.digest,
            admin: self.admin,
            grants: self.grants.clone(),
            quota: self.quota,
            created_at_ms: self.created_at_ms,
            created_by: self.created_by.clone(),
            revoked_at_ms: self.revoked_at_ms,
            revoked: AtomicBool::new(self.revoked.load(Ordering::Relaxed)),
            runtime: self.runtime.clone(),
        }
    }
}

impl KeyEntry {
    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Relaxed)
    }

    /// Whether this key may do `op` on `resource` `name`.
    pub fn allows(&self, op: Operation, resource: Resource, name: &str) -> bool {
        self.admin || self.grants.iter().any(|g| g.allows(op, resource, name))
    }

    /// What clients see of the key: never its digest.
    pub fn public_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "name": self.name,
            "admin": self.admin,
            "grants": self.grants,
            "quota": self.quota,
            "created_at_ms": self.created_at_ms,
            "created_by": self.created_by,
            "revoked": self.is_revoked(),
            "revoked_at_ms": self.revoked_at_ms,
        })
    }
}

/// Every key, by id, and the generation of this table (one more per
/// published change).
#[derive(Debug, Default, Clone)]
pub struct KeyTable {
    pub generation: u64,
    pub keys: BTreeMap<String, Arc<KeyEntry>>,
}

impl KeyTable {
    /// Admin keys not revoked.
    pub fn live_admins(&self) -> usize {
        self.keys.values().filter(|k| k.admin && !k.is_revoked()).count()
    }
}

/// `--auth`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Every request is served; no key is asked for.
    #[default]
    Disabled,
    /// Every request but /health, /ready and /metrics needs a valid key.
    Required,
}

/// Why a request was not authenticated: each becomes 401 `unauthenticated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No key (or an empty one) while `--auth required`.
    Missing,
    Malformed(Malformed),
    /// An unknown id or a secret that does not match: told apart from
    /// each other nowhere outside this type.
    Invalid,
    /// The digest matched a revoked key.
    Revoked,
}

impl Refused {
    /// The 401 message: "revoked" only for a caller who proved it holds
    /// the secret.
    pub fn message(self) -> &'static str {
        match self {
            Refused::Missing => {
                "this broker requires an API key (Authorization: Bearer <key>, or the Hello's api_key)"
            }
            Refused::Malformed(Malformed::Shape) => {
                "malformed API key: a key is esk_<id>_<secret>_<checksum>, 81 characters"
            }
            Refused::Malformed(Malformed::Checksum) => {
                "malformed API key: its checksum does not match (a typo, or a truncated key?)"
            }
            Refused::Invalid => "invalid API key",
            Refused::Revoked => "this API key was revoked; ask an admin for a new one",
        }
    }
}

/// Compared against when an id is unknown, so that path costs what a
/// wrong secret costs.
const DUMMY_DIGEST: Digest = [0x5a; 32];

#[cfg(test)]
thread_local! {
    /// Digests compared, in test builds: the unknown-id path counts too.
    pub static DIGESTS_COMPARED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The broker-wide key table and mode, shared by all shards and the main
/// thread (in `BrokerState`).
#[derive(Default)]
pub struct Keys {
    mode: AtomicU8,
    table: ArcSwap<KeyTable>,
}

impl Keys {
    /// Sets the mode and the table loaded at start-up (or reloaded).
    pub fn install(&self, mode: AuthMode, table: KeyTable) {
        self.mode.store(mode as u8, Ordering::Release);
        self.table.store(Arc::new(table));
    }

    pub fn mode(&self) -> AuthMode {
        if self.mode.load(Ordering::Acquire) == AuthMode::Required as u8 {
            AuthMode::Required
        } else {
            AuthMode::Disabled
        }
    }

    pub fn required(&self) -> bool {
        self.mode() == AuthMode::Required
    }

    /// The table now.
    pub fn table(&self) -> Arc<KeyTable> {
        self.table.load_full()
    }

    /// Publishes `table`: call only once it is durable. Entries revoked in
    /// it are marked revoked in the table they replace too, so every
    /// connection holding one sees it on its next request.
    /// A key that was in the table before keeps its quota state, even
    /// when the new table was read from the file (a SIGHUP reload).
    pub fn publish(&self, mut table: KeyTable) {
        let old = self.table.load_full();
        for (id, entry) in table.keys.iter_mut() {
            let Some(was) = old.keys.get(id) else { continue };
            if entry.is_revoked() {
                was.revoked.store(true, Ordering::Relaxed);
            }
            if !Arc::ptr_eq(&entry.runtime, &was.runtime) {
                let mut kept = (**entry).clone();
                kept.runtime = was.runtime.clone();
                *entry = Arc::new(kept);
            }
        }
        self.table.store(Arc::new(table));
    }

    /// The entry `key` (as a client sent it) authenticates as.
    pub fn authenticate(&self, key: &str) -> Result<Arc<KeyEntry>, Refused> {
        if key.is_empty() {
            return Err(Refused::Missing);
        }
        let parsed = token::parse(key).map_err(Refused::Malformed)?;
        let digest = parsed.digest();
        let table = self.table.load();
        let entry = table.keys.get(parsed.id);
        let stored = entry.map_or(&DUMMY_DIGEST, |e| &e.digest);
        #[cfg(test)]
        DIGESTS_COMPARED.with(|c| c.set(c.get() + 1));
        let matched: bool = digest.ct_eq(stored).into();
        match entry {
            Some(e) if matched => {
                if e.is_revoked() {
                    Err(Refused::Revoked)
                } else {
                    Ok(e.clone())
                }
            }
            _ => Err(Refused::Invalid),
        }
    }

    /// The current entry of a key a connection authenticated as earlier:
    /// its grants as changed since, or why it no longer authenticates.
    pub fn current(&self, held: &Arc<KeyEntry>) -> Result<Arc<KeyEntry>, Refused> {
        if held.is_revoked() {
            return Err(Refused::Revoked);
        }
        match self.table.load().keys.get(&held.id) {
            Some(e) if e.is_revoked() => Err(Refused::Revoked),
            Some(e) => Ok(e.clone()),
            None => Err(Refused::Invalid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, admin: bool) -> KeyEntry {
        KeyEntry {
            id: token::parse(key).unwrap().id.to_string(),
            name: "k".into(),
            digest: token::digest(key),
            admin,
            grants: vec![],
            quota: Quota::default(),
            created_at_ms: 0,
            created_by: None,
            revoked_at_ms: None,
            revoked: AtomicBool::new(false),
            runtime: Default::default(),
        }
    }

    fn keys_with(list: &[&str]) -> Keys {
        let keys = Keys::default();
        let mut table = KeyTable::default();
        for k in list {
            let e = entry(k, false);
            table.keys.insert(e.id.clone(), Arc::new(e));
        }
        keys.install(AuthMode::Required, table);
        keys
    }

    #[test]
    fn authentication_outcomes() {
        let good = token::assemble(&[1; 10], &[2; 32]);
        let keys = keys_with(&[&good]);
        assert_eq!(keys.authenticate(&good).unwrap().id, &good[4..20]);
        assert_eq!(keys.authenticate("").unwrap_err(), Refused::Missing);
        assert_eq!(
            keys.authenticate("esk_nope").unwrap_err(),
            Refused::Malformed(Malformed::Shape)
        );
        let unknown = token::assemble(&[3; 10], &[2; 32]);
        assert_eq!(keys.authenticate(&unknown).unwrap_err(), Refused::Invalid);
        // Same id, a secret that differs only in its first or last byte
        // (so its first or last character), with a valid checksum.
        let mut first = [2u8; 32];
        first[0] = 0xf2;
        let mut last = [2u8; 32];
        last[31] = 3;
        for other in [
            token::assemble(&[1; 10], &first),
            token::assemble(&[1; 10], &last),
        ] {
            assert_eq!(other[4..20], good[4..20]);
            assert_eq!(
                keys.authenticate(&other).unwrap_err(),
                Refused::Invalid,
                "{other}"
            );
        }
        assert_ne!(token::assemble(&[1; 10], &first)[21..22], good[21..22]);
        assert_ne!(token::assemble(&[1; 10], &last)[72..73], good[72..73]);
    }

    #[test]
    fn an_unknown_id_computes_and_compares_a_digest() {
        let keys = keys_with(&[]);
        let before = DIGESTS_COMPARED.with(|c| c.get());
        let unknown = token::assemble(&[3; 10], &[2; 32]);
        assert_eq!(keys.authenticate(&unknown).unwrap_err(), Refused::Invalid);
        assert_eq!(DIGESTS_COMPARED.with(|c| c.get()), before + 1);
        // A malformed key is refused before any lookup.
        let _ = keys.authenticate("esk_x");
        assert_eq!(DIGESTS_COMPARED.with(|c| c.get()), before + 1);
    }

    #[test]
    fn quota_state_survives_a_patch_and_a_reload() {
        let good = token::assemble(&[1; 10], &[2; 32]);
        let keys = keys_with(&[&good]);
        let held = keys.authenticate(&good).unwrap();
        // A PATCH clones the entry: the clone shares its buckets.
        let mut patched = (*held).clone();
        patched.quota.produce_bytes_per_sec = Some(10);
        assert!(Arc::ptr_eq(&patched.runtime, &held.runtime));
        // A reload reads a fresh entry from the file: it gets the old
        // buckets when published.
        let mut table = KeyTable::default();
        let fresh = entry(&good, false);
        assert!(!Arc::ptr_eq(&fresh.runtime, &held.runtime));
        table.keys.insert(fresh.id.clone(), Arc::new(fresh));
        keys.publish(table);
        let now = keys.authenticate(&good).unwrap();
        assert!(Arc::ptr_eq(&now.runtime, &held.runtime));
    }

    #[test]
    fn revocation_reaches_held_entries() {
        let good = token::assemble(&[1; 10], &[2; 32]);
        let keys = keys_with(&[&good]);
        let held = keys.authenticate(&good).unwrap();
        let mut table = (*keys.table()).clone();
        let mut e = (**table.keys.get(&held.id).unwrap()).clone();
        e.revoked = AtomicBool::new(true);
        table.keys.insert(e.id.clone(), Arc::new(e));
        keys.publish(table);
        assert!(held.is_revoked(), "the entry a connection holds");
        assert_eq!(keys.current(&held).unwrap_err(), Refused::Revoked);
        assert_eq!(
            keys.authenticate(&good).unwrap_err(),
            Refused::Revoked,
            "the secret matched"
        );
    }
}
