//! The benchmark topic: created if missing, emptied between phases, and
//! its partitions' high watermarks (through the binary protocol's topic
//! requests).

use std::path::Path;
use std::time::{Duration, Instant};

use es_protocol::client::Client;
use es_protocol::Kind;
use serde_json::json;

/// Creates `name` with `partitions` partitions (and `replication_factor`
/// replicas, if given), or checks an existing one has at least that many
/// partitions.
pub fn ensure(
    client: &Client,
    name: &str,
    partitions: u32,
    replication_factor: Option<u32>,
) -> Result<(), String> {
    let mut create = json!({"name": name, "partitions": partitions});
    if let Some(rf) = replication_factor {
        create["replication_factor"] = json!(rf);
    }
    match client.admin(Kind::CreateTopic, create) {
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

/// How long `leader_addrs` waits for every partition to have a leader: a
/// topic just created elects its leaders within a few election timeouts.
const LEADER_TIMEOUT: Duration = Duration::from_secs(60);
/// How often `leader_addrs` asks again.
const LEADER_POLL: Duration = Duration::from_millis(100);

/// Each partition's leader's binary address, in partition order, asked of
/// the broker at `addr`: the topic's `leader` node ids (DescribeTopic)
/// matched with the cluster's nodes (DescribeCluster), once every
/// partition has a leader (a phase measured before would count refusals).
/// A standalone broker (DescribeCluster `not_found`; an older one closes
/// the connection on it: `malformed_frame`) leads them all: empty.
pub fn leader_addrs(
    addr: &str,
    options: &es_protocol::client::Options,
    name: &str,
) -> Result<Vec<String>, String> {
    let client = Client::connect(addr, options.clone()).map_err(|e| format!("connect to {addr}: {e}"))?;
    let cluster = match client.admin(Kind::DescribeCluster, json!({})) {
        Ok(doc) => doc,
        Err(e) if matches!(e.code(), Some("not_found" | "malformed_frame")) => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot describe the cluster: {e}")),
    };
    let until = Instant::now() + LEADER_TIMEOUT;
    loop {
        let doc = client
            .admin(Kind::DescribeTopic, json!({"name": name}))
            .map_err(|e| format!("cannot describe topic {name}: {e}"))?;
        match leaders_in(&doc, &cluster).map_err(|e| format!("describe {name}: {e}"))? {
            Ok(addrs) => return Ok(addrs),
            Err(leaderless) if Instant::now() >= until => {
                return Err(format!(
                    "describe {name}: partition {leaderless} has no leader after {} s",
                    LEADER_TIMEOUT.as_secs()
                ))
            }
            Err(_) => std::thread::sleep(LEADER_POLL),
        }
    }
}

/// The leaders' binary addresses of a DescribeTopic document, by the
/// nodes of a DescribeCluster one, or `Err(p)`: partition `p` has no
/// leader yet.
fn leaders_in(
    topic: &serde_json::Value,
    cluster: &serde_json::Value,
) -> Result<Result<Vec<String>, usize>, String> {
    let node_addr = |id: u64| {
        cluster["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["node_id"].as_u64() == Some(id))
            .and_then(|n| n["binary_addr"].as_str())
            .map(str::to_string)
    };
    let parts = topic["partitions"]
        .as_array()
        .ok_or_else(|| format!("no partitions in {topic}"))?;
    let mut addrs = vec![String::new(); parts.len()];
    for p in parts {
        let i = p["partition"]
            .as_u64()
            .ok_or_else(|| format!("bad partition entry {p}"))? as usize;
        let Some(leader) = p["leader"].as_u64() else {
            return Ok(Err(i));
        };
        let addr = node_addr(leader)
            .ok_or_else(|| format!("partition {i}'s leader, node {leader}, is not in the cluster"))?;
        *addrs
            .get_mut(i)
            .ok_or_else(|| format!("partition {i} out of range"))? = addr;
    }
    Ok(Ok(addrs))
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
    ensure(client, name, partitions, None)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaders_by_node() {
        let cluster = json!({"nodes": [
            {"node_id": 1, "binary_addr": "h:9091"}, {"node_id": 2, "binary_addr": "h:9092"}]});
        let topic = json!({"partitions": [{"partition": 1, "leader": 1}, {"partition": 0, "leader": 2}]});
        assert_eq!(
            leaders_in(&topic, &cluster).unwrap().unwrap(),
            ["h:9092", "h:9091"]
        );
        let leaderless =
            json!({"partitions": [{"partition": 0, "leader": 1}, {"partition": 1, "leader": null}]});
        assert_eq!(leaders_in(&leaderless, &cluster).unwrap(), Err(1));
        let unknown = json!({"partitions": [{"partition": 0, "leader": 7}]});
        assert!(leaders_in(&unknown, &cluster).unwrap_err().contains("node 7"));
    }
}
