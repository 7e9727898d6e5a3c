//! `<data-dir>/cluster.json`: who this data dir belongs to. The one reader
//! and writer of the file (the Kafka listener's cluster id comes from
//! here too).
//!
//! ```text
//! standalone  {"cluster_id": "<22 chars>"}
//! cluster     {"cluster_id": "<id>" | null, "node_id": 2, "nodes": [1, 2, 3]}
//! ```
//!
//! The rule (docs/cluster.md, "The data directory"): a data dir belongs to
//! one mode and one node for its life. A standalone broker refuses a dir
//! written by a cluster node; a cluster node refuses a dir written
//! standalone (its topics are not replicated and the controller does not
//! know them), one written by another node id, and one whose cluster had
//! other nodes. A fresh cluster node also refuses a dir that holds topics
//! without a `cluster.json` (written by a broker before the file existed).
//!
//! `load_or_create` runs on the main thread, before the shards (std I/O);
//! `follow` runs on shard 0: once the controller group agreed on the
//! cluster id, it gives it to the raft transport (whose preamble then
//! carries it: a peer that knows another id is refused) and records it in
//! the file (glommio I/O).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use es_raft::NodeId;
use serde_json::{json, Value};

/// How the broker runs: what the data dir must have been written by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Standalone,
    Cluster { node_id: NodeId, nodes: Vec<NodeId> },
}

/// What `cluster.json` says of the data dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The cluster id: standalone, made at the first start; in a cluster,
    /// the id the controller agreed on, once known (`None` before).
    pub cluster_id: Option<String>,
    pub mode: Mode,
}

impl Identity {
    /// The id the transport's preamble carries (as a hash) in cluster
    /// mode: the cluster's nodes, which every node's `--peers` lists alike
    /// and which cannot change while the roster is static. A node of
    /// another roster is refused at connect.
    pub fn roster(&self) -> String {
        match &self.mode {
            Mode::Standalone => String::new(),
            Mode::Cluster { nodes, .. } => {
                let ids: Vec<String> = nodes.iter().map(u64::to_string).collect();
                format!("es-cluster:{}", ids.join(","))
            }
        }
    }

    /// The cluster id to report (Kafka's Metadata): the one in the file,
    /// else one derived from the roster.
    pub fn reported_id(&self) -> String {
        match &self.cluster_id {
            Some(id) => id.clone(),
            None => format!("{:016x}", es_raft::transport::cluster_hash(&self.roster())),
        }
    }
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("cluster.json")
}

/// Reads `cluster.json`, or makes it at the first start; refuses a data dir
/// written in another mode or by another node (the module's rule).
pub fn load_or_create(data_dir: &Path, mode: &Mode) -> Result<Identity, String> {
    let path = path(data_dir);
    let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    // blocking-ok: main thread, before the shards run
    match std::fs::read(&path) {
        Ok(bytes) => {
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| what(&e))?;
            let found = parse(&v).map_err(|e| what(&e))?;
            check(&found, mode, &path)?;
            Ok(found)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let identity = match mode {
                Mode::Standalone => Identity {
                    cluster_id: Some(random_id().map_err(|e| what(&e))?),
                    mode: Mode::Standalone,
                },
                Mode::Cluster { .. } => {
                    if holds_topics(data_dir) {
                        return Err(format!(
                            "{} holds topics but no cluster.json: it was written by a standalone broker, \
                             whose topics are not replicated; a cluster node needs a data dir of its own \
                             (move the topics with es-tools dump/restore through the cluster's API)",
                            data_dir.display()
                        ));
                    }
                    Identity {
                        cluster_id: None,
                        mode: mode.clone(),
                    }
                }
            };
            write(data_dir, &identity).map_err(|e| what(&e))?;
            Ok(identity)
        }
        Err(e) => Err(what(&e)),
    }
}

fn parse(v: &Value) -> Result<Identity, String> {
    let cluster_id = match v.get("cluster_id") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) | None => None,
        Some(_) => return Err("\"cluster_id\" is not a string".into()),
    };
    let mode = match v.get("node_id") {
        None => {
            if cluster_id.is_none() {
                return Err("no string \"cluster_id\"".into());
            }
            Mode::Standalone
        }
        Some(id) => {
            let node_id = id.as_u64().ok_or("\"node_id\" is not a node id")?;
            let nodes = v
                .get("nodes")
                .and_then(Value::as_array)
                .ok_or("no \"nodes\" list")?
                .iter()
                .map(|n| n.as_u64().ok_or("a node id in \"nodes\" is not a number"))
                .collect::<Result<Vec<_>, _>>()?;
            Mode::Cluster { node_id, nodes }
        }
    };
    Ok(Identity { cluster_id, mode })
}

fn check(found: &Identity, mode: &Mode, path: &Path) -> Result<(), String> {
    let file = path.display();
    match (&found.mode, mode) {
        (Mode::Standalone, Mode::Standalone) => Ok(()),
        (Mode::Cluster { node_id, .. }, Mode::Standalone) => Err(format!(
            "{file}: this data dir belongs to node {node_id} of a cluster; start it with that node's \
             --node-id, --peers and --raft-addr, or give a standalone broker another --data-dir"
        )),
        (Mode::Standalone, Mode::Cluster { .. }) => Err(format!(
            "{file}: this data dir was written by a standalone broker, whose topics are not replicated; \
             a cluster node needs a data dir of its own (or start this one without --peers)"
        )),
        (
            Mode::Cluster { node_id, nodes },
            Mode::Cluster {
                node_id: want,
                nodes: want_nodes,
            },
        ) => {
            if node_id != want {
                return Err(format!(
                    "{file}: this data dir belongs to node {node_id}, not --node-id {want}: each node keeps \
                     its id for the life of its data"
                ));
            }
            if nodes != want_nodes {
                return Err(format!(
                    "{file}: this node's cluster has nodes {nodes:?}, but --peers lists {want_nodes:?}: \
                     the nodes of a cluster cannot change yet (docs/cluster.md)"
                ));
            }
            Ok(())
        }
    }
}

fn holds_topics(data_dir: &Path) -> bool {
    // blocking-ok: main thread, before the shards run
    std::fs::read_dir(data_dir.join("topics")).is_ok_and(|mut d| d.next().is_some())
}

fn random_id() -> Result<String, String> {
    let mut raw = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw)
        .map_err(|_| "no randomness".to_string())?;
    Ok(base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        raw,
    ))
}

/// The file's bytes.
fn encode(identity: &Identity) -> String {
    match &identity.mode {
        Mode::Standalone => json!({ "cluster_id": identity.cluster_id }),
        Mode::Cluster { node_id, nodes } => json!({
            "cluster_id": identity.cluster_id,
            "node_id": node_id,
            "nodes": nodes,
        }),
    }
    .to_string()
}

/// Waits, on shard 0, until the controller group has applied the cluster
/// id (`ClusterInit`, proposed by its first leader), then gives it to the
/// transport and records it in `cluster.json` (durably: write, fsync,
/// rename, fsync the dir). A file that already held it is left as it is;
/// one that held another id is left too, and the disagreement logged.
pub async fn follow(shard: Rc<crate::shard::Shard>, controller: es_raft::controller::Controller) {
    let mut applied = controller.applied();
    let id = loop {
        if let Some(id) = controller.state().cluster_uuid.clone() {
            break id;
        }
        if applied.changed().await.is_err() {
            return;
        }
    };
    let config = &shard.config;
    match &config.cluster.cluster_id {
        Some(known) if *known == id => return,
        Some(known) => {
            tracing::error!(
                file = %path(&config.data_dir).display(),
                file_id = %known,
                controller_id = %id,
                "the controller group's cluster id is not the one cluster.json holds; the file is kept"
            );
            return;
        }
        None => {}
    }
    if let Some(t) = &config.cluster.transport {
        t.cluster_id.set(&id);
    }
    let identity = Identity {
        cluster_id: Some(id.clone()),
        mode: Mode::Cluster {
            node_id: config.node_id,
            nodes: config.cluster.node_ids(),
        },
    };
    let body = encode(&identity).into_bytes();
    match crate::topics::fsops::write_atomic(&config.data_dir, "cluster.json", body).await {
        Ok(()) => tracing::info!(cluster_id = %id, "the cluster id is recorded in cluster.json"),
        Err(e) => tracing::error!(
            cluster_id = %id,
            error = %e,
            "the cluster id could not be recorded in cluster.json; the next start learns it again"
        ),
    }
}

/// Writes the file durably: temp file, fsync, rename, fsync the dir.
fn write(data_dir: &Path, identity: &Identity) -> std::io::Result<()> {
    use std::io::Write;
    let body = encode(identity);
    let tmp = data_dir.join("cluster.json.tmp");
    // blocking-ok: main thread, before the shards run
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(body.as_bytes())?;
    f.sync_all()?;
    // blocking-ok: main thread, before the shards run
    std::fs::rename(&tmp, path(data_dir))?;
    // blocking-ok: main thread, before the shards run
    std::fs::File::open(data_dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(node_id: NodeId) -> Mode {
        Mode::Cluster {
            node_id,
            nodes: vec![1, 2, 3],
        }
    }

    #[test]
    fn a_data_dir_keeps_its_mode_and_node() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let first = load_or_create(d, &cluster(2)).unwrap();
        assert_eq!(first.cluster_id, None);
        assert_eq!(load_or_create(d, &cluster(2)).unwrap(), first, "read back");
        let e = load_or_create(d, &cluster(3)).unwrap_err();
        assert!(e.contains("belongs to node 2, not --node-id 3"), "{e}");
        let e = load_or_create(d, &Mode::Standalone).unwrap_err();
        assert!(e.contains("belongs to node 2 of a cluster"), "{e}");
        let other = Mode::Cluster {
            node_id: 2,
            nodes: vec![1, 2, 3, 4],
        };
        let e = load_or_create(d, &other).unwrap_err();
        assert!(e.contains("cannot change yet"), "{e}");
        assert_eq!(first.reported_id().len(), 16, "derived from the roster");

        let alone = tempfile::tempdir().unwrap();
        let a = load_or_create(alone.path(), &Mode::Standalone).unwrap();
        assert_eq!(a.cluster_id.as_ref().map(String::len), Some(22));
        assert_eq!(load_or_create(alone.path(), &Mode::Standalone).unwrap(), a);
        let e = load_or_create(alone.path(), &cluster(1)).unwrap_err();
        assert!(e.contains("written by a standalone broker"), "{e}");
    }

    #[test]
    fn a_standalone_dir_without_the_file_is_not_taken_by_a_cluster_node() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("topics/t/0")).unwrap(); // test setup
        let e = load_or_create(dir.path(), &cluster(1)).unwrap_err();
        assert!(e.contains("holds topics but no cluster.json"), "{e}");
        assert!(!dir.path().join("cluster.json").exists(), "nothing written");
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in [
            "{",
            "{}",
            r#"{"cluster_id":1}"#,
            r#"{"node_id":"x","nodes":[]}"#,
            r#"{"node_id":1}"#,
        ] {
            std::fs::write(dir.path().join("cluster.json"), bad).unwrap();
            assert!(load_or_create(dir.path(), &Mode::Standalone).is_err(), "{bad}");
        }
    }
}
