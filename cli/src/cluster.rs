//! `es cluster status`: the cluster's nodes, its controller and its
//! partitions' health, as `GET /v1/cluster` describes them (asked over the
//! binary protocol's DescribeCluster).

use es_protocol::client::ClientError;
use es_protocol::Kind;
use serde_json::{json, Value};

use crate::args::{ClusterCommand, Global};
use crate::error::{code, request_error, CliError, Result};
use crate::output::{cell, to_stdout, Table};
use crate::session::Session;

pub fn run(global: &Global, cmd: ClusterCommand) -> Result<()> {
    match cmd {
        ClusterCommand::Status => status(global),
    }
}

fn status(global: &Global) -> Result<()> {
    let session = Session::open(global, false)?;
    let doc = session
        .admin_routed(Kind::DescribeCluster, json!({}))
        .map_err(|(addr, e)| status_error(&addr, e))?;
    to_stdout(|w| {
        if global.json {
            writeln!(w, "{doc}")
        } else {
            w.write_all(render(&doc).as_bytes())
        }
    })
}

/// A standalone broker has no cluster: said as such.
fn status_error(addr: &str, e: ClientError) -> CliError {
    match e.code() {
        Some("not_found") => CliError::new(
            code::STANDALONE,
            format!("the broker at {addr} runs standalone (no --peers): it is not part of a cluster"),
        ),
        // A broker older than DescribeCluster closes the connection on it.
        Some("malformed_frame" | "unknown_request") => CliError::new(
            code::PROTOCOL_ERROR,
            format!("the broker at {addr} does not know `es cluster status` (an older es-broker)"),
        ),
        _ => request_error(addr, "", e),
    }
}

/// When a node last answered this one: `-` for this node itself (and
/// for a broker that does not say), `never` since this node started.
fn last_seen(doc: &Value, node: &Value) -> String {
    if node["node_id"] == doc["node_id"] {
        return "-".into();
    }
    match &node["last_seen_ms_ago"] {
        Value::Null if node.get("last_seen_ms_ago").is_some() => "never".into(),
        Value::Number(ms) => format!("{:.1}s", ms.as_f64().unwrap_or(0.0) / 1000.0),
        _ => "-".into(),
    }
}

/// The status for people: a heading line, a table of the nodes, the
/// partitions' totals.
pub fn render(doc: &Value) -> String {
    let controller = &doc["controller"];
    let leader = controller["leader"].as_u64();
    let committed = match controller.get("committed") {
        Some(c) if !c.is_null() => format!(", committed {}", cell(c)),
        _ => String::new(),
    };
    let mut out = format!(
        "cluster {}  this node {}  controller leader {} (term {}{committed})\n",
        cell(&doc["cluster_id"]),
        cell(&doc["node_id"]),
        leader.map_or("none".to_string(), |l| l.to_string()),
        cell(&controller["term"]),
    );
    let mut table = Table::new(&[
        "NODE",
        "RAFT ADDR",
        "HTTP ADDR",
        "BINARY ADDR",
        "STATE",
        "CONTROLLER",
        "LAST SEEN",
    ]);
    for n in doc["nodes"].as_array().into_iter().flatten() {
        let is_leader = leader.is_some() && n["node_id"].as_u64() == leader;
        table.row(vec![
            cell(&n["node_id"]),
            cell(&n["raft_addr"]),
            addr_cell(&n["http_addr"]),
            addr_cell(&n["binary_addr"]),
            cell(&n["state"]),
            if is_leader { "leader" } else { "-" }.to_string(),
            last_seen(doc, n),
        ]);
    }
    let mut rows = Vec::new();
    let _ = table.write(&mut rows);
    out.push_str(&String::from_utf8_lossy(&rows));
    // leaderless and under-replicated only when the broker counts them.
    let p = &doc["partitions"];
    out.push_str(&format!("partitions: {}", cell(&p["total"])));
    if let Some(n) = p.get("leaderless") {
        out.push_str(&format!(", leaderless {}", cell(n)));
    }
    if let Some(n) = p.get("under_replicated") {
        out.push_str(&format!(", under-replicated {}", cell(n)));
    }
    out.push('\n');
    out
}

/// A node's client address, or `-` while the node has not registered it
/// (it does so once it has joined the controller group).
fn addr_cell(v: &Value) -> String {
    if v.is_null() {
        "-".to_string()
    } else {
        cell(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nodes_and_totals() {
        let doc = json!({
            "cluster_id": "3f2a9c", "node_id": 1,
            "controller": {"leader": 2, "term": 4, "committed": 1234},
            "nodes": [
                {"node_id": 1, "raft_addr": "127.0.0.1:7001", "http_addr": "127.0.0.1:8081",
                 "binary_addr": "127.0.0.1:9091", "state": "up", "last_seen_ms_ago": 0},
                {"node_id": 2, "raft_addr": "127.0.0.1:7002", "http_addr": "127.0.0.1:8082",
                 "binary_addr": "127.0.0.1:9092", "state": "up", "last_seen_ms_ago": 120},
                {"node_id": 3, "raft_addr": "127.0.0.1:7003", "http_addr": "127.0.0.1:8083",
                 "binary_addr": "127.0.0.1:9093", "state": "unreachable", "last_seen_ms_ago": null}
            ],
            "partitions": {"total": 36, "leaderless": 0, "under_replicated": 12}
        });
        let text = render(&doc);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "cluster 3f2a9c  this node 1  controller leader 2 (term 4, committed 1234)"
        );
        assert!(lines[1].starts_with("NODE  RAFT ADDR"), "{}", lines[1]);
        assert!(
            lines[3].contains("127.0.0.1:9092")
                && lines[3].split_whitespace().rev().take(2).eq(["0.1s", "leader"]),
            "{}",
            lines[3]
        );
        assert!(
            lines[4].contains("unreachable") && lines[4].split_whitespace().rev().take(2).eq(["never", "-"]),
            "{}",
            lines[4]
        );
        assert_eq!(lines[5], "partitions: 36, leaderless 0, under-replicated 12");
        let no_leader = render(&json!({"controller": {"leader": null, "term": 5}, "nodes": []}));
        assert!(
            no_leader.contains("controller leader none (term 5)"),
            "{no_leader}"
        );
        assert!(no_leader.ends_with("partitions: null\n"), "{no_leader}");
        let unregistered = render(&json!({"nodes": [
            {"node_id": 2, "raft_addr": "127.0.0.1:7002", "http_addr": null, "binary_addr": null, "state": "up"}]}));
        assert!(
            unregistered.lines().nth(2).unwrap().split_whitespace().eq([
                "2",
                "127.0.0.1:7002",
                "-",
                "-",
                "up",
                "-",
                "-"
            ]),
            "{unregistered}"
        );
        let counted = render(&json!({"partitions": {"total": 3}}));
        assert!(counted.ends_with("partitions: 3\n"), "{counted}");
    }
}
