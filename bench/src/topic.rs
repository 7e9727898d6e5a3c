//! The benchmark topic: created if missing, emptied between phases, and
//! its partitions' high watermarks (through the binary protocol's topic
//! requests).

use std::path::Path;
use std::time::{Duration, Instant};

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

/// How long `recreate` waits for a broker to free the deleted topic's files.
const FREED_TIMEOUT: Duration = Duration::from_secs(600);
/// How often `recreate` looks again.
const FREED_POLL: Duration = Duration::from_millis(100);

/// Deletes `name` and creates it again with `partitions` partitions, then
/// waits until the broker (one es-bench started on `data_dir`) has freed
/// the old files: it frees a deleted topic in the background, out of
/// `<data-dir>/trash/` (docs/api.md), and a phase measured meanwhile would
/// share the disk with that, or find it full.
pub fn recreate(client: &Client, name: &str, partitions: u32, data_dir: &Path) -> Result<(), String> {
    client
        .admin(Kind::DeleteTopic, json!({"name": name}))
        .map_err(|e| format!("cannot delete topic {name}: {e}"))?;
    ensure(client, name, partitions)?;
    let trash = data_dir.join("trash");
    let until = Instant::now() + FREED_TIMEOUT;
    loop {
        let empty = match std::fs::read_dir(&trash) {
            Ok(mut entries) => entries.next().is_none(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(format!("cannot list {}: {e}", trash.display())),
        };
        if empty {
            crate::scratch::settle_filesystem(data_dir);
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "the broker has not freed the deleted topic {name} ({}) after {} s",
                trash.display(),
                FREED_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(FREED_POLL);
    }
}
