//! Topic metadata: name rules, per-topic config, and `meta.json` on disk
//! (`<data-dir>/topics/<topic>/meta.json`, written atomically: temp file,
//! fsync, rename, fsync the directory).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// Most partitions one topic may have: each is a directory, open files and
/// memory on its shard.
pub const PARTITIONS_MAX: u32 = 1024;
/// Longest topic name (Kafka's limit: it must fit a file name with room).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Per-topic settings a user may change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    pub segment_bytes: u64,
    pub segment_ms: Option<u64>,
}

/// What `meta.json` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u32,
    pub config: TopicConfig,
}

impl TopicConfig {
    /// The storage settings this config gives a partition log.
    pub fn log_config(&self) -> es_storage::LogConfig {
        es_storage::LogConfig {
            segment_bytes: self.segment_bytes,
            segment_age: self.segment_ms.map(Duration::from_millis),
            // A produce's records for one partition are one batch; the HTTP
            // body limit (at most this) already bounds it.
            batch_bytes_max: es_storage::batch::BATCH_BYTES_MAX,
            ..es_storage::LogConfig::default()
        }
    }

    /// Applies a JSON object of changes (`null` clears `segment_ms`);
    /// unknown keys and bad values are refused and change nothing.
    pub fn patched(
        &self,
        changes: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<TopicConfig, ApiError> {
        let mut next = self.clone();
        for (key, value) in changes {
            match key.as_str() {
                "segment_bytes" => {
                    next.segment_bytes = value
                        .as_u64()
                        .ok_or_else(|| ApiError::invalid("segment_bytes must be a positive integer"))?
                }
                "segment_ms" => {
                    next.segment_ms = match value {
                        serde_json::Value::Null => None,
                        v => Some(v.as_u64().filter(|ms| *ms > 0).ok_or_else(|| {
                            ApiError::invalid("segment_ms must be a positive integer or null")
                        })?),
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
        Err(ApiError::new(
            hyper::StatusCode::BAD_REQUEST,
            "invalid_topic_name",
            format!(
                "topic name {name:?} is invalid: use 1-{TOPIC_NAME_BYTES_MAX} characters of [A-Za-z0-9._-], not \".\" or \"..\""
            ),
        ))
    }
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

/// Reads every topic's `meta.json` at start-up, before any shard runs (so
/// std I/O is fine here). A topic directory without a readable meta.json is
/// skipped with a warning: it is a create that did not finish, or damage.
pub fn load_all(data_dir: &Path) -> std::io::Result<Vec<TopicMeta>> {
    let dir = topics_dir(data_dir);
    std::fs::create_dir_all(&dir)?; // blocking-ok: start-up, before the shards run
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        // blocking-ok: start-up, before the shards run
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path().join("meta.json");
        match std::fs::read(&path) // blocking-ok: start-up, before the shards run
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<TopicMeta>(&b).map_err(|e| e.to_string()))
        {
            Ok(meta) if meta.name == name && validate_name(&name).is_ok() && meta.partitions >= 1 => {
                out.push(meta)
            }
            Ok(_) => {
                tracing::warn!(path = %path.display(), "meta.json does not match its directory; topic skipped")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "no readable meta.json; topic skipped")
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Writes `meta.json` for `meta` atomically, from a shard.
pub async fn write_meta(data_dir: &Path, meta: &TopicMeta) -> Result<(), ApiError> {
    let dir = topic_dir(data_dir, &meta.name);
    es_storage::create_dir_all(&dir)
        .await
        .map_err(ApiError::storage)?;
    let tmp = dir.join("meta.json.tmp");
    let bytes = serde_json::to_vec_pretty(meta).expect("meta serializes");
    let io = |e: glommio::GlommioError<()>| ApiError::internal(format!("writing {}: {e}", tmp.display()));
    let file = glommio::io::BufferedFile::create(&tmp).await.map_err(io)?;
    let n = file.write_at(bytes.clone(), 0).await.map_err(io)?;
    if n != bytes.len() {
        return Err(ApiError::internal(format!("short write to {}", tmp.display())));
    }
    file.fdatasync().await.map_err(io)?;
    file.close().await.map_err(io)?;
    glommio::io::rename(&tmp, dir.join("meta.json"))
        .await
        .map_err(io)?;
    es_storage::sync_dir(&dir).await.map_err(ApiError::storage)?;
    es_storage::sync_dir(&topics_dir(data_dir))
        .await
        .map_err(ApiError::storage)
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
        let c = TopicConfig {
            segment_bytes: 1000,
            segment_ms: None,
        };
        let m = |v: serde_json::Value| v.as_object().unwrap().clone();
        let p = c.patched(&m(serde_json::json!({"segment_ms": 5}))).unwrap();
        assert_eq!(p.segment_ms, Some(5));
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
}
