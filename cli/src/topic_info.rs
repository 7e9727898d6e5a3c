//! A topic as DescribeTopic answers it, read defensively: a document
//! without the expected fields is an error, never a panic.

use serde_json::Value;

use crate::error::{code, CliError, Result};

#[derive(Clone, Debug, PartialEq)]
pub struct PartitionInfo {
    pub partition: u32,
    pub log_start_offset: u64,
    pub high_watermark: u64,
    pub leader: Value,
    pub replicas: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TopicInfo {
    pub name: String,
    pub replication_factor: Value,
    /// Sorted by partition number.
    pub partitions: Vec<PartitionInfo>,
    /// The config entries, sorted by key.
    pub config: Vec<(String, Value)>,
}

impl TopicInfo {
    pub fn parse(doc: &Value) -> Result<TopicInfo> {
        let bad = |what: &str| {
            CliError::new(
                code::PROTOCOL_ERROR,
                format!("the broker's topic description has no valid {what}: {doc}"),
            )
        };
        let name = doc
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("name"))?;
        let parts = doc
            .get("partitions")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("partitions"))?;
        let mut partitions = Vec::with_capacity(parts.len());
        for p in parts {
            let num = |field: &str| p.get(field).and_then(Value::as_u64).ok_or_else(|| bad(field));
            partitions.push(PartitionInfo {
                partition: u32::try_from(num("partition")?).map_err(|_| bad("partition"))?,
                log_start_offset: num("log_start_offset")?,
                high_watermark: num("high_watermark")?,
                leader: p.get("leader").cloned().unwrap_or(Value::Null),
                replicas: p
                    .get("replicas")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            });
        }
        partitions.sort_by_key(|p| p.partition);
        let mut config: Vec<(String, Value)> = doc
            .get("config")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        config.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(TopicInfo {
            name: name.to_string(),
            replication_factor: doc.get("replication_factor").cloned().unwrap_or(Value::Null),
            partitions,
            config,
        })
    }

    pub fn partition(&self, p: u32) -> Option<&PartitionInfo> {
        self.partitions.iter().find(|i| i.partition == p)
    }

    /// The error for a partition this topic does not have.
    pub fn no_partition(&self, p: u32) -> CliError {
        let n = self.partitions.len();
        let which = match n {
            0 => "no partitions".to_string(),
            1 => "1 partition (0)".to_string(),
            n => format!("{n} partitions (0 to {})", n - 1),
        };
        CliError::new(
            "partition_not_found",
            format!(
                "topic {:?} has no partition {p}; it has {which}. See them with: es topic describe {}",
                self.name, self.name
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_describe() {
        let doc = json!({"name":"orders","replication_factor":1,
            "config":{"segment_ms":null,"segment_bytes":1048576},
            "partitions":[
              {"partition":1,"log_start_offset":0,"high_watermark":0,"leader":1,"replicas":[1]},
              {"partition":0,"log_start_offset":2,"high_watermark":5,"leader":1,"replicas":[1]}]});
        let t = TopicInfo::parse(&doc).unwrap();
        assert_eq!(t.partitions[0].partition, 0);
        assert_eq!(t.partitions[0].high_watermark, 5);
        assert_eq!(t.config[0].0, "segment_bytes");
        assert!(t.partition(1).is_some() && t.partition(2).is_none());
    }

    #[test]
    fn malformed_is_an_error() {
        assert!(TopicInfo::parse(&json!({"name":"x"})).is_err());
        assert!(TopicInfo::parse(&json!({"name":"x","partitions":[{"partition":-1}]})).is_err());
        assert!(TopicInfo::parse(&json!([])).is_err());
    }
}
