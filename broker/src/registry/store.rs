//! The registry in memory: what replaying `_schemas` gives, changed only
//! by applying records (the same records a change appends, once they are
//! durable). Pure: no I/O, no runtime; the shard that owns `_schemas/0`
//! holds the one copy (service.rs).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use super::level::{Level, Mode};
use super::record::{Record, SchemaValue};
use super::schema::{fingerprint, Reference, SchemaType};

/// A subject's version: its schema's id, and whether it is soft-deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub id: u32,
    pub deleted: bool,
}

/// A schema, once per id however many subjects use it.
#[derive(Debug, PartialEq, Eq)]
pub struct Stored {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<Reference>,
    /// `schema::fingerprint` without normalization: what a registration
    /// of the same schema finds.
    pub fingerprint: [u8; 32],
}

#[derive(Default)]
pub struct Store {
    /// Every subject's versions, soft-deleted ones included.
    pub subjects: BTreeMap<String, BTreeMap<u32, Version>>,
    /// Schemas by id, while some version uses them.
    pub schemas: HashMap<u32, Rc<Stored>>,
    /// Versions using each id.
    users: HashMap<u32, usize>,
    /// Ids by fingerprint.
    pub by_fingerprint: HashMap<[u8; 32], u32>,
    /// Compatibility levels: `None` is the global one.
    pub levels: BTreeMap<Option<String>, Level>,
    /// The global mode, if set.
    pub mode: Option<Mode>,
    /// The id the next new schema gets: past every id ever recorded,
    /// including ids whose records were deleted and compacted away.
    pub next_id: u32,
    /// Bytes of the schemas held (each id's once).
    pub bytes: usize,
}

impl Store {
    pub fn new() -> Store {
        Store {
            next_id: 1,
            ..Store::default()
        }
    }

    /// Applies one record. A record that contradicts what is held (an id
    /// already held with another schema) is refused, naming why, and
    /// changes nothing.
    pub fn apply(&mut self, record: Record) -> Result<(), String> {
        match record {
            Record::Schema { value: Some(v), .. } => self.put_version(v),
            Record::Schema {
                subject,
                version,
                value: None,
            } => {
                self.remove_version(&subject, version);
                Ok(())
            }
            Record::Config { subject, level } => {
                match level {
                    Some(l) => self.levels.insert(subject, l),
                    None => self.levels.remove(&subject),
                };
                Ok(())
            }
            Record::Mode { subject, mode } => {
                // Only the global mode is kept: es sets no subject's own.
                if subject.is_none() {
                    self.mode = mode;
                }
                Ok(())
            }
            Record::DeleteSubject { .. } => Ok(()),
            Record::NextId(next) => {
                if let Some(n) = next {
                    self.next_id = self.next_id.max(n);
                }
                Ok(())
            }
        }
    }

    fn put_version(&mut self, v: SchemaValue) -> Result<(), String> {
        if let Some(held) = self.schemas.get(&v.id) {
            if held.schema != v.schema || held.schema_type != v.schema_type || held.references != v.references
            {
                return Err(format!(
                    "{:?} version {} names id {} with another schema than the one held for that id",
                    v.subject, v.version, v.id
                ));
            }
        }
        let prior = self
            .subjects
            .get(&v.subject)
            .and_then(|versions| versions.get(&v.version))
            .copied();
        if let Some(prior) = prior {
            if prior.id != v.id {
                self.release(prior.id);
            }
        }
        if prior.is_none_or(|p| p.id != v.id) {
            *self.users.entry(v.id).or_default() += 1;
        }
        if !self.schemas.contains_key(&v.id) {
            let fp = fingerprint(v.schema_type, &v.schema, &v.references, None, false);
            self.bytes += v.schema.len();
            self.by_fingerprint.entry(fp).or_insert(v.id);
            self.schemas.insert(
                v.id,
                Rc::new(Stored {
                    schema_type: v.schema_type,
                    schema: v.schema,
                    references: v.references,
                    fingerprint: fp,
                }),
            );
        }
        self.next_id = self.next_id.max(v.id.saturating_add(1));
        self.subjects.entry(v.subject).or_default().insert(
            v.version,
            Version {
                id: v.id,
                deleted: v.deleted,
            },
        );
        Ok(())
    }

    fn remove_version(&mut self, subject: &str, version: u32) {
        let Some(versions) = self.subjects.get_mut(subject) else {
            return;
        };
        let Some(removed) = versions.remove(&version) else {
            return;
        };
        if versions.is_empty() {
            self.subjects.remove(subject);
        }
        self.release(removed.id);
    }

    /// One version fewer uses `id`; the last one gone, its schema goes
    /// (its id is never given again: `next_id` stays past it).
    fn release(&mut self, id: u32) {
        let Some(n) = self.users.get_mut(&id) else {
            return;
        };
        *n -= 1;
        if *n > 0 {
            return;
        }
        self.users.remove(&id);
        if let Some(s) = self.schemas.remove(&id) {
            self.bytes -= s.schema.len();
            if self.by_fingerprint.get(&s.fingerprint) == Some(&id) {
                self.by_fingerprint.remove(&s.fingerprint);
            }
        }
    }

    /// A subject's versions; soft-deleted ones only with `deleted`.
    pub fn versions(&self, subject: &str, deleted: bool) -> Vec<(u32, Version)> {
        self.subjects
            .get(subject)
            .map(|vs| {
                vs.iter()
                    .filter(|(_, v)| deleted || !v.deleted)
                    .map(|(n, v)| (*n, *v))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The compatibility level of `subject`: its own, else the global one,
    /// else BACKWARD.
    pub fn level_of(&self, subject: &str) -> Level {
        self.levels
            .get(&Some(subject.to_string()))
            .or_else(|| self.levels.get(&None))
            .copied()
            .unwrap_or(Level::DEFAULT)
    }

    /// Every (subject, version) using `id`; soft-deleted ones only with
    /// `deleted`.
    pub fn users_of(&self, id: u32, deleted: bool) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for (s, versions) in &self.subjects {
            for (n, v) in versions {
                if v.id == id && (deleted || !v.deleted) {
                    out.push((s.clone(), *n));
                }
            }
        }
        out
    }

    /// Ids of the schemas (of live versions) that reference `subject`
    /// `version`.
    pub fn referenced_by(&self, subject: &str, version: u32) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .schemas
            .iter()
            .filter(|(_, s)| {
                s.references
                    .iter()
                    .any(|r| r.subject == subject && r.version == version)
            })
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(subject: &str, version: u32, id: u32, text: &str, deleted: bool) -> Record {
        Record::Schema {
            subject: subject.into(),
            version,
            value: Some(SchemaValue {
                subject: subject.into(),
                version,
                id,
                schema_type: SchemaType::Avro,
                schema: text.into(),
                references: vec![],
                deleted,
            }),
        }
    }

    fn tombstone(subject: &str, version: u32) -> Record {
        Record::Schema {
            subject: subject.into(),
            version,
            value: None,
        }
    }

    #[test]
    fn replay_keeps_the_latest_per_key_and_ids_move_on() {
        let mut s = Store::new();
        s.apply(schema("a", 1, 1, "\"int\"", false)).unwrap();
        s.apply(schema("b", 1, 1, "\"int\"", false)).unwrap();
        s.apply(schema("a", 2, 2, "\"long\"", false)).unwrap();
        assert_eq!(s.next_id, 3);
        assert_eq!(s.users_of(1, false).len(), 2);
        s.apply(schema("a", 2, 2, "\"long\"", true)).unwrap();
        assert_eq!(s.versions("a", false).len(), 1);
        assert_eq!(s.versions("a", true).len(), 2);
        s.apply(tombstone("a", 2)).unwrap();
        assert!(!s.schemas.contains_key(&2), "no version uses id 2");
        assert_eq!(s.next_id, 3, "an id is never given again");
        s.apply(tombstone("a", 1)).unwrap();
        assert!(s.schemas.contains_key(&1), "b still uses id 1");
        s.apply(tombstone("b", 1)).unwrap();
        assert!(s.subjects.is_empty() && s.schemas.is_empty() && s.bytes == 0);
        // Every record of an id compacted away: the NOOP record keeps it.
        let mut fresh = Store::new();
        fresh.apply(Record::NextId(Some(3))).unwrap();
        assert_eq!(fresh.next_id, 3);
    }

    #[test]
    fn a_contradicting_record_is_refused() {
        let mut s = Store::new();
        s.apply(schema("a", 1, 1, "\"int\"", false)).unwrap();
        assert!(s.apply(schema("b", 1, 1, "\"long\"", false)).is_err());
        assert!(!s.subjects.contains_key("b"));
    }

    #[test]
    fn levels_fall_back_to_global_then_backward() {
        let mut s = Store::new();
        assert_eq!(s.level_of("x"), Level::Backward);
        s.apply(Record::Config {
            subject: None,
            level: Some(Level::Full),
        })
        .unwrap();
        assert_eq!(s.level_of("x"), Level::Full);
        s.apply(Record::Config {
            subject: Some("x".into()),
            level: Some(Level::None),
        })
        .unwrap();
        assert_eq!(s.level_of("x"), Level::None);
        s.apply(Record::Config {
            subject: Some("x".into()),
            level: None,
        })
        .unwrap();
        assert_eq!(s.level_of("x"), Level::Full);
    }
}
