//! What the cluster operation tests share: a peer CA that makes node
//! certificates (rcgen), the flags of a cluster node, and reading a node's
//! `GET /v1/cluster` and refusal counters.

#![allow(dead_code)]

use std::path::PathBuf;

use rcgen::{CertificateParams, CertifiedIssuer, DnType, KeyPair};
use serde_json::Value;

use crate::common::{free_port, Broker};

/// A peer CA and the node certificates made with it, in a temporary dir.
pub struct Pki {
    dir: tempfile::TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let ca = crate::common::pki::ca(name);
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
        };
        std::fs::write(pki.ca_path(), pki.ca.pem()).unwrap();
        pki
    }

    /// `--peer-ca`.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A certificate naming `name` (a DNS name, as `es-node-<id>`) and its
    /// key, written as `<name>.pem` and `<name>-key.pem`.
    pub fn leaf(&self, name: &str) -> (PathBuf, PathBuf) {
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let (c, k) = (
            self.dir.path().join(format!("{name}.pem")),
            self.dir.path().join(format!("{name}-key.pem")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    /// `--peer-cert`, `--peer-key`, `--peer-ca` for a node presenting the
    /// certificate of `name`.
    pub fn flags(&self, name: &str) -> Vec<String> {
        let (c, k) = self.leaf(name);
        vec![
            "--peer-cert".into(),
            c.display().to_string(),
            "--peer-key".into(),
            k.display().to_string(),
            "--peer-ca".into(),
            self.ca_path().display().to_string(),
        ]
    }
}

/// The raft ports of a cluster of `n` nodes, and its `--peers`.
pub fn raft_ports(n: usize) -> (Vec<u16>, String) {
    let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let peers = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}=127.0.0.1:{p}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    (ports, peers)
}

/// Starts node `id` (from 1) of the cluster `(ports, peers)`, with
/// `security` (`--raft-insecure`, or the peer TLS flags) and `extra`.
pub fn start_node(id: usize, ports: &[u16], peers: &str, security: &[String]) -> Broker {
    let args = node_args(id, ports, peers, security);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start_opts(1, &args)
}

/// The flags of node `id` (but `--shards`: one).
pub fn node_args(id: usize, ports: &[u16], peers: &str, security: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--spin-before-park-us",
        "0",
        "--disk-threads",
        "2",
        "--raft-heartbeat-ms",
        "100",
        "--raft-election-timeout-ms",
        "800",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend([
        "--node-id".to_string(),
        id.to_string(),
        "--peers".into(),
        peers.into(),
        "--raft-addr".into(),
        format!("127.0.0.1:{}", ports[id - 1]),
    ]);
    args.extend(security.iter().cloned());
    args
}

/// `GET /v1/cluster`, when it answers 200.
pub fn view(b: &Broker) -> Option<Value> {
    match b.try_get("/v1/cluster") {
        Ok((200, v)) => Some(v),
        _ => None,
    }
}

/// The leader `nodes` agree on, once each names the same one and the same
/// cluster id and sees every node of `members` (1-based ids) registered
/// with the address its process serves and `up`.
pub fn agreed(nodes: &[&Broker], members: &[(usize, &Broker)]) -> Option<(u64, String)> {
    let views: Vec<Value> = nodes.iter().map(|b| view(b)).collect::<Option<_>>()?;
    let leader = views[0]["controller"]["leader"].as_u64()?;
    let id = views[0]["cluster_id"].as_str()?.to_string();
    for v in &views {
        if v["controller"]["leader"].as_u64() != Some(leader) || v["cluster_id"].as_str() != Some(&id) {
            return None;
        }
        for (node, b) in members {
            let n = v["nodes"]
                .as_array()?
                .iter()
                .find(|n| n["node_id"] == *node as u64)?;
            if n["registered"] != true
                || n["state"] != "up"
                || n["http_addr"] != b.addr().to_string()
                || n["binary_addr"] != b.binary_addr()
            {
                return None;
            }
        }
    }
    Some((leader, id))
}

/// Node `id`'s entry in a view.
pub fn node_of(view: &Value, id: u64) -> Value {
    view["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["node_id"] == id))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Raft connections `b` refused for `reason` (its one shard).
pub fn refused(b: &Broker, reason: &str) -> f64 {
    b.metric(&format!(
        "es_raft_connections_refused_total{{shard=\"0\",reason=\"{reason}\"}}"
    ))
    .unwrap_or(0.0)
}

/// The cluster id `cluster.json` in `b`'s data dir holds.
pub fn recorded_id(b: &Broker) -> Value {
    let text = std::fs::read_to_string(b.data_dir().join("cluster.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cluster_id"].clone()
}
