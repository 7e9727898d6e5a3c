//! The records of `_schemas`, as Confluent shapes them (docs/registry.md,
//! "Storage"): a JSON key naming what the record is about, and a JSON
//! value (or an empty one: a tombstone, which compaction keeps until
//! `delete_retention_ms` has passed and then drops with the key). Each
//! value carries `"es": 1` so that a later change of format is visible.
//!
//! Decoding takes any bytes and answers a record or why it is not one,
//! never a panic: `_schemas` is a topic, and anything may have been
//! written to it (property tests below).

use serde::{Deserialize, Serialize};

use super::level::{Level, Mode};
use super::schema::{Reference, SchemaType};
use crate::limits::SUBJECT_NAME_BYTES_MAX;

/// The format tag every value carries.
pub const FORMAT: u32 = 1;

/// One record of `_schemas`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A subject's version: its schema, or `None` (a tombstone: the
    /// version was permanently deleted).
    Schema {
        subject: String,
        version: u32,
        value: Option<SchemaValue>,
    },
    /// A compatibility level (`subject` `None`: the global one), or `None`:
    /// the subject's own level was deleted.
    Config {
        subject: Option<String>,
        level: Option<Level>,
    },
    /// The mode (`subject` `None`: the global one), or `None`: deleted.
    Mode {
        subject: Option<String>,
        mode: Option<Mode>,
    },
    /// A subject was soft-deleted up to `version` (Confluent writes it; a
    /// replay needs only the versions' own records).
    DeleteSubject { subject: String, version: Option<u32> },
    /// The next schema id: written with each new id, so that ids are never
    /// reused even when every record naming an id is compacted away.
    NextId(Option<u32>),
}

/// The value of a SCHEMA record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaValue {
    pub subject: String,
    pub version: u32,
    pub id: u32,
    #[serde(rename = "schemaType", default, skip_serializing_if = "SchemaType::is_avro")]
    pub schema_type: SchemaType,
    pub schema: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Reference>,
    #[serde(default)]
    pub deleted: bool,
}

#[derive(Serialize, Deserialize)]
struct RawKey {
    keytype: String,
    #[serde(default, skip_serializing_if = "Absent::is_absent")]
    subject: Absent<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    magic: u32,
}

/// A field that may be absent, `null` or a value (`subject` is `null` for
/// global settings and absent from NOOP keys).
#[derive(Default, Serialize, Deserialize)]
#[serde(untagged)]
enum Absent<T> {
    Value(Option<T>),
    #[default]
    #[serde(skip)]
    Missing,
}

impl<T> Absent<T> {
    fn is_absent(&self) -> bool {
        matches!(self, Absent::Missing)
    }

    fn value(self) -> Option<T> {
        match self {
            Absent::Value(v) => v,
            Absent::Missing => None,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SchemaValueTagged {
    #[serde(flatten)]
    value: SchemaValue,
    #[serde(default)]
    es: u32,
}

#[derive(Serialize, Deserialize)]
struct ConfigValue {
    #[serde(rename = "compatibilityLevel")]
    level: Level,
    #[serde(default)]
    es: u32,
}

#[derive(Serialize, Deserialize)]
struct ModeValue {
    mode: Mode,
    #[serde(default)]
    es: u32,
}

#[derive(Serialize, Deserialize)]
struct DeleteSubjectValue {
    subject: String,
    #[serde(default)]
    version: Option<u32>,
    #[serde(default)]
    es: u32,
}

#[derive(Serialize, Deserialize)]
struct NextIdValue {
    next_id: u32,
    #[serde(default)]
    es: u32,
}

impl Record {
    /// The record's key and value bytes (an empty value: a tombstone).
    /// Equal keys are equal bytes: compaction keeps the newest per key.
    pub fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let key = |keytype: &str, subject: Absent<String>, version: Option<u32>, magic: u32| {
            serde_json::to_vec(&RawKey {
                keytype: keytype.into(),
                subject,
                version,
                magic,
            })
            .expect("keys serialize")
        };
        match self {
            Record::Schema {
                subject,
                version,
                value,
            } => (
                key("SCHEMA", Absent::Value(Some(subject.clone())), Some(*version), 1),
                value.as_ref().map_or_else(Vec::new, |v| {
                    json(&SchemaValueTagged {
                        value: v.clone(),
                        es: FORMAT,
                    })
                }),
            ),
            Record::Config { subject, level } => (
                key("CONFIG", Absent::Value(subject.clone()), None, 0),
                level.map_or_else(Vec::new, |level| json(&ConfigValue { level, es: FORMAT })),
            ),
            Record::Mode { subject, mode } => (
                key("MODE", Absent::Value(subject.clone()), None, 0),
                mode.map_or_else(Vec::new, |mode| json(&ModeValue { mode, es: FORMAT })),
            ),
            Record::DeleteSubject { subject, version } => (
                key("DELETE_SUBJECT", Absent::Value(Some(subject.clone())), None, 0),
                json(&DeleteSubjectValue {
                    subject: subject.clone(),
                    version: *version,
                    es: FORMAT,
                }),
            ),
            Record::NextId(next) => (
                key("NOOP", Absent::Missing, None, 0),
                next.map_or_else(Vec::new, |next_id| json(&NextIdValue { next_id, es: FORMAT })),
            ),
        }
    }

    /// Decodes a record of `_schemas`; `Err` says why it is not one.
    pub fn decode(key: Option<&[u8]>, value: &[u8]) -> Result<Record, String> {
        let key = key.ok_or("a record without a key")?;
        let raw: RawKey =
            serde_json::from_slice(key).map_err(|e| format!("key is not a registry key: {e}"))?;
        let tombstone = value.is_empty();
        let subject = raw.subject.value();
        let check_subject = |s: &Option<String>| -> Result<(), String> {
            match s {
                Some(s) if !subject_is_valid(s) => Err(format!("invalid subject {s:?} in the key")),
                _ => Ok(()),
            }
        };
        check_subject(&subject)?;
        let bad_value = |e: serde_json::Error| format!("{} value: {e}", raw.keytype);
        match raw.keytype.as_str() {
            "SCHEMA" => {
                let subject = subject.ok_or("a SCHEMA key without a subject")?;
                let version = raw
                    .version
                    .filter(|v| *v >= 1)
                    .ok_or("a SCHEMA key without a version of 1 or more")?;
                if tombstone {
                    return Ok(Record::Schema {
                        subject,
                        version,
                        value: None,
                    });
                }
                let v: SchemaValueTagged = serde_json::from_slice(value).map_err(bad_value)?;
                let v = v.value;
                if v.subject != subject || v.version != version {
                    return Err(format!(
                        "SCHEMA value for {:?} version {} under the key of {subject:?} version {version}",
                        v.subject, v.version
                    ));
                }
                if v.id == 0 {
                    return Err("SCHEMA value with id 0".into());
                }
                for r in &v.references {
                    if !subject_is_valid(&r.subject) || r.version < 1 {
                        return Err(format!("SCHEMA value with a bad reference {r:?}"));
                    }
                }
                Ok(Record::Schema {
                    subject,
                    version,
                    value: Some(v),
                })
            }
            "CONFIG" => Ok(Record::Config {
                subject,
                level: if tombstone {
                    None
                } else {
                    Some(
                        serde_json::from_slice::<ConfigValue>(value)
                            .map_err(bad_value)?
                            .level,
                    )
                },
            }),
            "MODE" => Ok(Record::Mode {
                subject,
                mode: if tombstone {
                    None
                } else {
                    Some(
                        serde_json::from_slice::<ModeValue>(value)
                            .map_err(bad_value)?
                            .mode,
                    )
                },
            }),
            "DELETE_SUBJECT" => {
                let subject = subject.ok_or("a DELETE_SUBJECT key without a subject")?;
                let version = if tombstone {
                    None
                } else {
                    serde_json::from_slice::<DeleteSubjectValue>(value)
                        .map_err(bad_value)?
                        .version
                };
                Ok(Record::DeleteSubject { subject, version })
            }
            "NOOP" => Ok(Record::NextId(if tombstone {
                None
            } else {
                Some(
                    serde_json::from_slice::<NextIdValue>(value)
                        .map_err(bad_value)?
                        .next_id,
                )
            })),
            other => Err(format!("unknown keytype {other:?}")),
        }
    }
}

/// Whether `s` is a subject name es accepts: 1 to 255 bytes of UTF-8
/// without control characters.
pub fn subject_is_valid(s: &str) -> bool {
    !s.is_empty() && s.len() <= SUBJECT_NAME_BYTES_MAX && !s.chars().any(char::is_control)
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("registry values serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn schema_record(deleted: bool) -> Record {
        Record::Schema {
            subject: "orders-value".into(),
            version: 2,
            value: Some(SchemaValue {
                subject: "orders-value".into(),
                version: 2,
                id: 7,
                schema_type: SchemaType::Avro,
                schema: "\"string\"".into(),
                references: vec![Reference {
                    name: "x".into(),
                    subject: "x-value".into(),
                    version: 1,
                }],
                deleted,
            }),
        }
    }

    #[test]
    fn records_round_trip_in_confluents_shape() {
        let records = [
            schema_record(false),
            schema_record(true),
            Record::Schema {
                subject: "s".into(),
                version: 1,
                value: None,
            },
            Record::Config {
                subject: None,
                level: Some(Level::FullTransitive),
            },
            Record::Config {
                subject: Some("s".into()),
                level: None,
            },
            Record::Mode {
                subject: None,
                mode: Some(Mode::ReadOnly),
            },
            Record::DeleteSubject {
                subject: "s".into(),
                version: Some(3),
            },
            Record::NextId(Some(12)),
        ];
        for r in records {
            let (k, v) = r.encode();
            assert_eq!(Record::decode(Some(&k), &v).unwrap(), r);
        }
        let (k, v) = schema_record(false).encode();
        assert_eq!(
            String::from_utf8(k).unwrap(),
            r#"{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}"#
        );
        let v: serde_json::Value = serde_json::from_slice(&v).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["es"], 1);
        assert_eq!(v["deleted"], false);
        assert!(
            v.get("schemaType").is_none(),
            "AVRO is the absent type, as Confluent writes it"
        );
        let (k, _) = Record::Config {
            subject: None,
            level: Some(Level::Backward),
        }
        .encode();
        assert_eq!(
            String::from_utf8(k).unwrap(),
            r#"{"keytype":"CONFIG","subject":null,"magic":0}"#
        );
    }

    #[test]
    fn damaged_records_are_reported() {
        let bad: &[(Option<&[u8]>, &[u8])] = &[
            (None, b"{}"),
            (Some(b"not json"), b""),
            (Some(br#"{"keytype":"SCHEMA","magic":1}"#), b""),
            (
                Some(br#"{"keytype":"SCHEMA","subject":"s","version":0,"magic":1}"#),
                b"",
            ),
            (
                Some(br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#),
                b"{",
            ),
            (
                Some(br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#),
                br#"{"subject":"t","version":1,"id":1,"schema":"x"}"#,
            ),
            (
                Some(br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#),
                br#"{"subject":"s","version":1,"id":0,"schema":"x"}"#,
            ),
            (
                Some(br#"{"keytype":"SCHEMA","subject":"s\n","version":1,"magic":1}"#),
                b"",
            ),
            (
                Some(br#"{"keytype":"CONFIG","subject":null,"magic":0}"#),
                br#"{"compatibilityLevel":"SIDEWAYS"}"#,
            ),
            (Some(br#"{"keytype":"WHAT","magic":0}"#), b""),
        ];
        for (k, v) in bad {
            assert!(
                Record::decode(*k, v).is_err(),
                "{:?} {:?}",
                k.map(String::from_utf8_lossy),
                String::from_utf8_lossy(v)
            );
        }
    }

    proptest! {
        /// Any bytes decode to a record or an error, never a panic.
        #[test]
        fn any_bytes_decode_without_panic(key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
                                          value in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Record::decode(key.as_deref(), &value);
        }

        /// A valid record with bytes flipped, cut or extended decodes to a
        /// record or an error, never a panic; untouched, it round-trips.
        #[test]
        fn damaged_valid_records_never_panic(deleted in any::<bool>(), at in any::<usize>(), byte in any::<u8>(),
                                             cut in any::<usize>(), in_key in any::<bool>()) {
            let r = schema_record(deleted);
            let (mut k, mut v) = r.encode();
            prop_assert_eq!(Record::decode(Some(&k), &v).unwrap(), r);
            let target = if in_key { &mut k } else { &mut v };
            let i = at % target.len();
            target[i] = byte;
            let _ = Record::decode(Some(&k), &v);
            let target = if in_key { &mut k } else { &mut v };
            target.truncate(cut % (target.len() + 1));
            let _ = Record::decode(Some(&k), &v);
        }
    }
}
