//! Topic metadata: name rules, per-topic config, and `meta.json` on disk
//! (`<data-dir>/topics/<topic>/meta.json`, written atomically: temp file,
//! fsync, rename, fsync the directory).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorCode};
use crate::limits::{SEGMENT_BYTES_MIN, SEGMENT_MS_MIN, TOPIC_NAME_BYTES_MAX, TOPIC_PARTITIONS_MAX};

/// Per-topic settings a user may change. Keys added after a topic was
/// created take their defaults when its `meta.json` lacks them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    pub segment_bytes: u64,
    pub segment_ms: Option<u64>,
    /// What cleanup does to closed segments: retention, compaction or both.
    #[serde(default)]
    pub cleanup_policy: CleanupPolicyName,
    /// Closed segments whose newest record is older than this leave the
    /// hot tier. `None`: no age limit.
    #[serde(default)]
    pub retention_ms: Option<u64>,
    /// Oldest closed segments leave the hot tier while a partition holds
    /// more than this. `None`: no size limit.
    #[serde(default)]
    pub retention_bytes: Option<u64>,
    /// How long a tombstone outlives the values it deleted (compaction).
    #[serde(default = "delete_retention_ms_default")]
    pub delete_retention_ms: u64,
    /// Segments leaving the hot tier go to the cold store, not away.
    #[serde(default)]
    pub tiered: bool,
    /// Cold segments whose newest record is older than this are deleted.
    #[serde(default)]
    pub cold_retention_ms: Option<u64>,
    /// Oldest cold segments are deleted while a partition's cold tier holds
    /// more than this.
    #[serde(default)]
    pub cold_retention_bytes: Option<u64>,
}

/// `cleanup_policy`: `"delete"` (retention), `"compact"` (latest record per
/// key) or `"compact,delete"` (both; `"delete,compact"` is accepted too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CleanupPolicyName {
    #[default]
    #[serde(rename = "delete")]
    Delete,
    #[serde(rename = "compact")]
    Compact,
    #[serde(rename = "compact,delete", alias = "delete,compact")]
    CompactDelete,
}

impl CleanupPolicyName {
    fn parse(s: &str) -> Option<CleanupPolicyName> {
        match s {
            "delete" => Some(CleanupPolicyName::Delete),
            "compact" => Some(CleanupPolicyName::Compact),
            "compact,delete" | "delete,compact" => Some(CleanupPolicyName::CompactDelete),
            _ => None,
        }
    }

    pub fn compacts(self) -> bool {
        self != CleanupPolicyName::Delete
    }

    pub fn deletes(self) -> bool {
        self != CleanupPolicyName::Compact
    }
}

fn delete_retention_ms_default() -> u64 {
    es_storage::limits::DELETE_RETENTION_MS_DEFAULT
}

/// What `meta.json` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u32,
    pub config: TopicConfig,
    /// Cluster mode: the controller log index of the `CreateTopic` that
    /// made this topic (none standalone). A topic the controller's state
    /// no longer holds is deleted here only once that state is at or past
    /// this index, so a node replaying its controller log after a restart
    /// never mistakes a topic not replayed yet for a deleted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_index: Option<u64>,
}

impl TopicConfig {
    /// The defaults of a new topic: `segment_bytes` from the broker's flag,
    /// no age roll, retention `delete` with no limits, not tiered.
    pub fn with_segment_bytes(segment_bytes: u64) -> TopicConfig {
        TopicConfig {
            segment_bytes,
            segment_ms: None,
            cleanup_policy: CleanupPolicyName::Delete,
            retention_ms: None,
            retention_bytes: None,
            delete_retention_ms: delete_retention_ms_default(),
            tiered: false,
            cold_retention_ms: None,
            cold_retention_bytes: None,
        }
    }

    /// Whether the topic keeps the latest record per key (and so refuses
    /// records without a key).
    pub fn is_compacted(&self) -> bool {
        self.cleanup_policy.compacts()
    }

    /// The storage settings this config gives a partition log.
    pub fn log_config(&self) -> es_storage::LogConfig {
        es_storage::LogConfig {
            segment_bytes: self.segment_bytes,
            segment_age: self.segment_ms.map(Duration::from_millis),
            // A produce's records for one partition are one batch; the HTTP
            // body limit (at most this) already bounds it.
            batch_bytes_max: es_format::limits::BATCH_BYTES_MAX,
            cleanup: es_storage::CleanupPolicy {
                delete: self.cleanup_policy.deletes(),
                compact: self.cleanup_policy.compacts(),
                retention_ms: self.retention_ms,
                retention_bytes: self.retention_bytes,
                delete_retention_ms: self.delete_retention_ms,
                tiered: self.tiered,
                cold_retention_ms: self.cold_retention_ms,
                cold_retention_bytes: self.cold_retention_bytes,
            },
            ..es_storage::LogConfig::default()
        }
    }

    /// Applies a JSON object of changes (`null` clears an optional limit);
    /// unknown keys and bad values are refused and change nothing.
    pub fn patched(
        &self,
        changes: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<TopicConfig, ApiError> {
        let mut next = self.clone();
        for (key, value) in changes {
            match key.as_str() {
                "segment_bytes" => {
                    next.segment_bytes =
                        value
                            .as_u64()
                            .filter(|b| *b >= SEGMENT_BYTES_MIN)
                            .ok_or_else(|| {
                                ApiError::invalid(format!(
                                    "segment_bytes must be an integer of at least {SEGMENT_BYTES_MIN}"
                                ))
                            })?
                }
                "segment_ms" => {
                    next.segment_ms = match value {
                        serde_json::Value::Null => None,
                        v => Some(v.as_u64().filter(|ms| *ms >= SEGMENT_MS_MIN).ok_or_else(|| {
                            ApiError::invalid(format!(
                                "segment_ms must be an integer of at least {SEGMENT_MS_MIN}, or null"
                            ))
                        })?),
                    }
                }
                "cleanup_policy" => {
                    next.cleanup_policy =
                        value.as_str().and_then(CleanupPolicyName::parse).ok_or_else(|| {
                            ApiError::invalid(
                                "cleanup_policy must be \"delete\", \"compact\" or \"compact,delete\"",
                            )
                        })?
                }
                "retention_ms" => next.retention_ms = limit(key, value)?,
                "retention_bytes" => next.retention_bytes = limit(key, value)?,
                "cold_retention_ms" => next.cold_retention_ms = limit(key, value)?,
                "cold_retention_bytes" => next.cold_retention_bytes = limit(key, value)?,
                "delete_retention_ms" => {
                    next.delete_retention_ms = value.as_u64().ok_or_else(|| {
                        ApiError::invalid("delete_retention_ms must be a non-negative integer")
                    })?
                }
                "tiered" => {
                    // "true"/"false" as strings too: command lines send them so.
                    next.tiered = match value {
                        serde_json::Value::Bool(b) => *b,
                        serde_json::Value::String(s) if s == "true" => true,
                        serde_json::Value::String(s) if s == "false" => false,
                        _ => return Err(ApiError::invalid("tiered must be true or false")),
                    }
                }
                other => return Err(ApiError::invalid(format!("unknown config key {other:?}"))),
            }
        }
        next.log_config()
            .validate()
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        Ok(next)
    }
}

/// An optional limit: a positive integer, or `null` for none.
fn limit(key: &str, value: &serde_json::Value) -> Result<Option<u64>, ApiError> {
    match value {
        serde_json::Value::Null => Ok(None),
        v => Ok(Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            ApiError::invalid(format!("{key} must be a positive integer or null"))
        })?)),
    }
}

/// Checks a topic name: 1-249 of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn validate_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= TOPIC_NAME_BYTES_MAX
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(ErrorCode::InvalidTopicName,
            format!(
                "topic name {name:?} is invalid: use 1-{TOPIC_NAME_BYTES_MAX} characters of [A-Za-z0-9._-], not \".\" or \"..\""
            ),
        ))
    }
}

/// Checks a consumer group name: the same rules as topic names (it is a
/// file name too).
pub fn validate_group_name(name: &str) -> Result<(), ApiError> {
    validate_name(name).map_err(|_| {
        ApiError::new(ErrorCode::InvalidGroupName,
            format!(
                "group name {name:?} is invalid: use 1-{TOPIC_NAME_BYTES_MAX} characters of [A-Za-z0-9._-], not \".\" or \"..\""
            ),
        )
    })
}

pub fn topics_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("topics")
}

pub fn topic_dir(data_dir: &Path, topic: &str) -> PathBuf {
    topics_dir(data_dir).join(topic)
}

pub fn partition_dir(data_dir: &Path, topic: &str, partition: u32) -> PathBuf {
    topic_dir(data_dir, topic).join(partition.to_string())
}

/// What `meta.json` is renamed to when its topic is deleted (durable before
/// anything else of the topic goes): a topic directory holding it is the
/// broker's own deleted data, whatever a crash left of it.
pub const DELETED_META: &str = "meta.json.deleted";

/// What a topic directory holds besides records.
enum MetaFound {
    Meta(TopicMeta),
    /// A delete that a crash cut short.
    Deleted,
    /// No `meta.json`: a create cut short before it, or metadata lost.
    Missing,
}

/// Reads every topic's `meta.json` at start-up, before any shard runs (so
/// std I/O is fine here). A damaged `meta.json` (unreadable, not JSON, or
/// not matching its directory) stops the start with an error naming every
/// such file and what to do, changing nothing: serving without the topic,
/// and a later create of the name, would lose its records. A delete that a
/// crash cut short is finished here. A directory whose `meta.json` is
/// missing while it holds records is left alone, said at error level, and
/// never served; a create of its name is refused ([`clear_for_create`]).
pub fn load_all(data_dir: &Path) -> std::io::Result<Vec<TopicMeta>> {
    let dir = topics_dir(data_dir);
    es_storage::create_dir_all_durable(&dir)?; // blocking-ok: start-up, before the shards run
    let mut out = Vec::new();
    let mut damaged = Vec::new();
    let entries = std::fs::read_dir(&dir)?; // blocking-ok: start-up, before the shards run
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !path.is_dir() || validate_name(&name).is_err() {
            tracing::warn!(path = %path.display(), "not a topic directory; ignored");
            continue;
        }
        match read_meta(&path, &name) {
            Ok(MetaFound::Meta(meta)) => out.push(meta),
            Ok(MetaFound::Deleted) => finish_delete(data_dir, &name)?,
            Ok(MetaFound::Missing) => match first_record_file(&path)? {
                Some(file) => tracing::error!(
                    dir = %path.display(),
                    file = %file.display(),
                    "topic directory holds records but no meta.json: not served, and a create of \
                     this name is refused; restore meta.json to serve it, or move the directory away"
                ),
                None => {
                    tracing::info!(dir = %path.display(), "a create cut short before its meta.json; a create of this name clears it")
                }
            },
            Err(why) => damaged.push(why),
        }
    }
    if !damaged.is_empty() {
        return Err(std::io::Error::other(format!(
            "{}. Nothing was changed and the records are intact, but the broker cannot know \
             these topics' partitions and config: restore each meta.json (from a backup, or \
             rewrite it), or move its topic directory out of {} to start without that topic",
            damaged.join("; "),
            dir.display()
        )));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The `meta.json` of the topic directory `dir` named `name`; `Err` says
/// why it is damaged, naming the file.
fn read_meta(dir: &Path, name: &str) -> Result<MetaFound, String> {
    let path = dir.join("meta.json");
    let read = std::fs::read(&path); // blocking-ok: start-up, before the shards run
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let marker = dir.join(DELETED_META).exists(); // blocking-ok: start-up, before the shards run
            return Ok(if marker {
                MetaFound::Deleted
            } else {
                MetaFound::Missing
            });
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let meta = serde_json::from_slice::<TopicMeta>(&bytes)
        .map_err(|e| format!("{} is damaged: {e}", path.display()))?;
    if meta.name != name {
        return Err(format!(
            "{} is damaged: it names topic {:?}, its directory {name:?}",
            path.display(),
            meta.name
        ));
    }
    if meta.partitions == 0 || meta.partitions > TOPIC_PARTITIONS_MAX {
        return Err(format!(
            "{} is damaged: {} partitions (1 to {TOPIC_PARTITIONS_MAX})",
            path.display(),
            meta.partitions
        ));
    }
    Ok(MetaFound::Meta(meta))
}

/// The first non-empty file in a partition directory of the topic
/// directory `dir`: records that no create of the name wrote. (A create
/// cut short leaves only empty segments behind.)
fn first_record_file(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let partitions = std::fs::read_dir(dir)?; // blocking-ok: start-up or the blocking pool
    for p in partitions {
        let p = p?.path();
        if !p.is_dir() {
            continue;
        }
        let files = std::fs::read_dir(&p)?; // blocking-ok: start-up or the blocking pool
        for f in files {
            let f = f?;
            if f.metadata()?.len() > 0 {
                return Ok(Some(f.path()));
            }
        }
    }
    Ok(None)
}

/// Finishes a delete that a crash cut short: the topic's directory and
/// producer snapshots go. Start-up only.
fn finish_delete(data_dir: &Path, name: &str) -> std::io::Result<()> {
    let dir = topic_dir(data_dir, name);
    std::fs::remove_dir_all(&dir)?; // blocking-ok: start-up, before the shards run
    std::fs::File::open(topics_dir(data_dir))?.sync_all()?; // blocking-ok: start-up, before the shards run
    let snapshots = data_dir.join("producers").join(name);
    let removed = std::fs::remove_dir_all(&snapshots); // blocking-ok: start-up, before the shards run
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    tracing::info!(topic = %name, "finished deleting a topic whose delete was cut short");
    Ok(())
}

/// What a create finds in its topic's directory.
enum Leftover {
    Nothing,
    /// The broker's own: a deleted topic's data, or a create cut short.
    Clearable,
    /// Records no create wrote (the first such file).
    Records(PathBuf),
}

/// Before a create of `name`, from the controller shard: clears what the
/// broker itself left in the topic's directory (a delete or a create that
/// a crash cut short), and refuses, changing nothing, when the directory
/// holds records that no create wrote (a topic whose `meta.json` was lost).
pub async fn clear_for_create(data_dir: &Path, name: &str) -> Result<(), ApiError> {
    let dir = topic_dir(data_dir, name);
    let d = dir.clone();
    let found = glommio::executor()
        .spawn_blocking(move || -> std::io::Result<Leftover> {
            let present = d.exists(); // blocking-ok: on the blocking pool
            if !present {
                return Ok(Leftover::Nothing);
            }
            let deleted = d.join(DELETED_META).exists() && !d.join("meta.json").exists(); // blocking-ok: on the blocking pool
            if deleted {
                return Ok(Leftover::Clearable);
            }
            Ok(match first_record_file(&d)? {
                Some(file) => Leftover::Records(file),
                None => Leftover::Clearable,
            })
        })
        .await
        .map_err(|e| ApiError::io(format!("reading {}", dir.display()), &e))?;
    match found {
        Leftover::Nothing => Ok(()),
        Leftover::Clearable => crate::topics::fsops::remove_dir_all(&dir).await,
        Leftover::Records(file) => {
            tracing::error!(topic = %name, file = %file.display(), "create refused: the topic directory holds records of a topic not in the catalog");
            Err(ApiError::new(ErrorCode::TopicDataExists,
                format!(
                    "{} holds records of a topic named {name:?} that the broker does not know (its meta.json is missing), e.g. {}; \
                     nothing was changed. Restore its meta.json and restart to serve it, or move the directory away to reuse the name",
                    dir.display(),
                    file.display()
                ),
            ))
        }
    }
}

/// Marks topic `name` deleted: `meta.json` is renamed to [`DELETED_META`],
/// durably, so a crash at any later step of the delete never brings the
/// topic back, and what is left is known to be the broker's own.
pub async fn mark_deleted(data_dir: &Path, name: &str) -> Result<(), ApiError> {
    let dir = topic_dir(data_dir, name);
    if es_storage::rename_if_exists(&dir.join("meta.json"), &dir.join(DELETED_META))
        .await
        .map_err(ApiError::storage)?
    {
        es_storage::sync_dir(&dir).await.map_err(ApiError::storage)?;
    }
    Ok(())
}

/// Writes `meta.json` for `meta` atomically, from a shard. (The topic's
/// directory, when it is created, is made durable in `topics/` too.)
pub async fn write_meta(data_dir: &Path, meta: &TopicMeta) -> Result<(), ApiError> {
    let dir = topic_dir(data_dir, &meta.name);
    let bytes = serde_json::to_vec_pretty(meta).expect("meta serializes");
    crate::topics::fsops::write_atomic(&dir, "meta.json", bytes).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["a", "orders", "A.b_c-9", &"x".repeat(249)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "é", &"x".repeat(250), "a\0"] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn config_patch() {
        let c = TopicConfig::with_segment_bytes(1000);
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        let p = c.patched(&m(serde_json::json!({"segment_ms": 5000}))).unwrap();
        assert_eq!(p.segment_ms, Some(5000));
        assert_eq!(
            p.patched(&m(serde_json::json!({"segment_ms": null})))
                .unwrap()
                .segment_ms,
            None
        );
        assert!(c.patched(&m(serde_json::json!({"nope": 1}))).is_err());
        assert!(c.patched(&m(serde_json::json!({"segment_bytes": 0}))).is_err());
        assert!(c.patched(&m(serde_json::json!({"segment_bytes": -5}))).is_err());
    }

    /// Below the minimums a create or change is refused, naming the
    /// minimum; at them it is taken. A topic created with less before
    /// (read from its meta.json) keeps its value through other changes.
    #[test]
    fn segments_have_minimums() {
        let c = TopicConfig::with_segment_bytes(1 << 30);
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        let e = c
            .patched(&m(serde_json::json!({"segment_bytes": 1})))
            .unwrap_err();
        assert_eq!(e.code.http_status(), 400);
        assert!(e.message.contains("at least 1024"), "{}", e.message);
        let e = c.patched(&m(serde_json::json!({"segment_ms": 999}))).unwrap_err();
        assert!(e.message.contains("at least 1000"), "{}", e.message);
        let p = c
            .patched(&m(
                serde_json::json!({"segment_bytes": SEGMENT_BYTES_MIN, "segment_ms": SEGMENT_MS_MIN}),
            ))
            .unwrap();
        assert_eq!(
            (p.segment_bytes, p.segment_ms),
            (SEGMENT_BYTES_MIN, Some(SEGMENT_MS_MIN))
        );
        let old = TopicConfig::with_segment_bytes(5);
        let p = old
            .patched(&m(serde_json::json!({"retention_ms": 1000})))
            .unwrap();
        assert_eq!(p.segment_bytes, 5);
    }

    #[test]
    fn cleanup_keys() {
        let c = TopicConfig::with_segment_bytes(1000);
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        let p = c
            .patched(&m(serde_json::json!({
                "cleanup_policy": "delete,compact", "retention_ms": 60000, "retention_bytes": 4096,
                "delete_retention_ms": 0
            })))
            .unwrap();
        assert_eq!(p.cleanup_policy, CleanupPolicyName::CompactDelete);
        assert!(p.is_compacted());
        assert_eq!(
            (p.retention_ms, p.retention_bytes, p.delete_retention_ms),
            (Some(60000), Some(4096), 0)
        );
        let lc = p.log_config();
        assert!(lc.cleanup.compact && lc.cleanup.delete);
        let cleared = p.patched(&m(serde_json::json!({"retention_ms": null}))).unwrap();
        assert_eq!(cleared.retention_ms, None);
        let t = c
            .patched(&m(
                serde_json::json!({"tiered": true, "cold_retention_bytes": 10}),
            ))
            .unwrap();
        assert!(t.tiered && t.log_config().cleanup.tiered);
        let as_text = c.patched(&m(serde_json::json!({"tiered": "true"}))).unwrap();
        assert!(as_text.tiered);
        for bad in [
            serde_json::json!({"cleanup_policy": "shred"}),
            serde_json::json!({"cleanup_policy": 1}),
            serde_json::json!({"retention_ms": 0}),
            serde_json::json!({"retention_bytes": -1}),
            serde_json::json!({"retention_ms": 1.5}),
            serde_json::json!({"delete_retention_ms": -1}),
            serde_json::json!({"tiered": "yes"}),
            serde_json::json!({"tiered": 1}),
            serde_json::json!({"cold_retention_ms": u64::MAX}),
            serde_json::json!({"tiered": true, "cleanup_policy": "compact"}),
        ] {
            assert!(c.patched(&m(bad.clone())).is_err(), "{bad}");
        }
        // meta.json written before these keys existed reads with defaults.
        let old: TopicConfig = serde_json::from_str(r#"{"segment_bytes": 5, "segment_ms": null}"#).unwrap();
        assert_eq!(old, TopicConfig::with_segment_bytes(5));
        let round: TopicConfig = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(round, p);
    }
}
