//! The benchmark topic: created if missing, and its partitions' high
//! watermarks (through the binary protocol's topic requests).

use es_protocol::client::Client;
use es_protocol::Kind;
use serde_json::json;

/// Creates `name` with `partitions` partitions, or checks an existing one
/// has at least that many.
pub fn ensure(client: &Client, name: &str, partitions: u32) -> Result<(), String> {
    match client.admin(Kind::CreateTopic, json!({"name": name, "partitions": partitions})) {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("topic_exists") => {
            let have = high_watermarks(client, name)?.len();
            if have < partitions as usize {
                return Err(format!(
                    "topic {name} exists with {have} partitions, fewer than --partitions {partitions}"
                ));
            }
            Ok(())
        }
        Err(e) => Err(format!("cannot create topic {name}: {e}")),
    }
}

/// Each partition's high watermark, in partition order.
pub fn high_watermarks(client: &Client, name: &str) -> Result<Vec<u64>, String> {
    let doc = client
        .admin(Kind::DescribeTopic, json!({"name": name}))
        .map_err(|e| format!("cannot describe topic {name}: {e}"))?;
    let parts = doc["partitions"]
        .as_array()
        .ok_or_else(|| format!("describe {name}: no partitions in {doc}"))?;
    let mut marks = vec![0u64; parts.len()];
    for p in parts {
        let (Some(i), Some(hw)) = (p["partition"].as_u64(), p["high_watermark"].as_u64()) else {
            return Err(format!("describe {name}: bad partition entry {p}"));
        };
        let slot = marks
            .get_mut(i as usize)
            .ok_or_else(|| format!("describe {name}: partition {i} out of range"))?;
        *slot = hw;
    }
    Ok(marks)
}
