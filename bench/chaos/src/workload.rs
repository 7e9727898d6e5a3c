//! The workload: the topics it writes, what its threads share, and their
//! start and stop. Threads: plain producers over HTTP (`w0`, `w1`) and the
//! binary protocol (`w2`), idempotent producers over the binary protocol
//! (`w3`, `w4`), two members of one consumer group committing every second
//! (`c0`, `c1`), and assign-mode readers tailing every partition (`r<i>`,
//! one per partition up to six).
//!
//! In a cluster run (`--nodes 3`) producers send each partition to its
//! leader (leaders.rs), readers tail followers, and a watcher (`l0`)
//! describes the topics every second so that leader changes are seen even
//! when no client is refused. Idempotent producers ask any node for
//! their producer id (the controller group issues it) and retry a send
//! across failovers with the same sequence; the group members follow the
//! group coordinator (the controller leader's node).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use crate::checker::Part;
use crate::conns::Conns;
use crate::history::Recorder;
use crate::http::{escape, HttpConn};
use crate::leaders::Leaders;
use crate::observed::Observed;
use crate::outcome::Outcome;
use crate::producer::Via;
use crate::{consumer, producer, reader};

/// The topics, each with `--partitions` partitions: `chaos` keeps the
/// default segment size; `chaos-roll` rolls a segment every 16 KiB, so
/// recovery meets many segments.
pub const TOPICS: [(&str, Option<u64>); 2] = [("chaos", None), ("chaos-roll", Some(16384))];
/// In a cluster run, `chaos-roll` keeps about this much per partition
/// (its active segment and at most one closed one: seconds of the
/// workload), so a replica that was down or cut off for a fault comes
/// back behind its leader's log start and catches up by snapshot
/// (`results.json`: `snapshot_installs`). `chaos` keeps everything.
pub const CLUSTER_RETENTION_BYTES: u64 = 16384;
/// Most assign-mode reader threads; past this, each tails several
/// partitions.
const READERS_MAX: usize = 6;
/// The consumer group of `c0` and `c1`.
pub const GROUP: &str = "chaos-group";
/// How often the leader watcher describes the topics (cluster runs).
const WATCH_EVERY_MS: u64 = 1000;
/// How long a describe may take.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A node's id and client addresses.
#[derive(Clone, Debug)]
pub struct Target {
    pub node: u32,
    pub http: String,
    pub binary: String,
}

/// What every workload thread shares.
pub struct Ctx {
    pub rec: Arc<Recorder>,
    pub observed: Arc<Observed>,
    pub stop: AtomicBool,
    /// Every node, in id order (one in a single-node run).
    pub nodes: Vec<Target>,
    /// Where each partition leads (cluster runs).
    pub leaders: Leaders,
    /// Where the next leader lookup starts, so lookups spread over nodes.
    pub next_lookup: AtomicUsize,
    pub parts: Vec<Part>,
    pub seed: u64,
}

impl Ctx {
    /// More than one node: routing by leader applies.
    pub fn cluster(&self) -> bool {
        self.nodes.len() > 1
    }

    /// The addresses of node `id` (the first node for an unknown id).
    pub fn node(&self, id: u32) -> &Target {
        self.nodes.iter().find(|t| t.node == id).unwrap_or(&self.nodes[0])
    }

    /// The node to send `part` to: its leader as last known, else as a
    /// lookup finds it, else the first node (which will redirect).
    pub fn leader(&self, conns: &mut Conns, process: &str, part: &Part) -> u32 {
        if !self.cluster() {
            return self.nodes[0].node;
        }
        if let Some(n) = self.leaders.get(part) {
            return n;
        }
        self.lookup(conns, process, &part.0);
        self.leaders.get(part).unwrap_or(self.nodes[0].node)
    }

    /// Describes `topic` on the first node that answers and learns its
    /// leaders. False when no node answered.
    pub fn lookup(&self, conns: &mut Conns, process: &str, topic: &str) -> bool {
        let start = self.next_lookup.fetch_add(1, Ordering::Relaxed);
        for k in 0..self.nodes.len() {
            let node = self.nodes[(start + k) % self.nodes.len()].node;
            let path = format!("/v1/topics/{}", escape(topic));
            if let Ok(v) = conns.http(self, node).call("GET", &path, None, DESCRIBE_TIMEOUT) {
                self.leaders.learn(&self.rec, process, topic, &v);
                return true;
            }
        }
        false
    }

    /// A node to read `part` from: in a cluster, the `skip`-th (modulo)
    /// of the replicas that do not lead it as far as known.
    pub fn follower(&self, part: &Part, skip: usize) -> u32 {
        let leader = self.leaders.get(part);
        let others: Vec<u32> = self
            .nodes
            .iter()
            .map(|t| t.node)
            .filter(|&n| Some(n) != leader || self.nodes.len() == 1)
            .collect();
        others[skip % others.len()]
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn topics(&self) -> Vec<String> {
        TOPICS.iter().map(|(t, _)| t.to_string()).collect()
    }

    /// Sleeps `ms`, in short steps so a stop is seen soon.
    pub fn nap(&self, ms: u64) {
        let mut left = ms;
        while left > 0 && !self.stopped() {
            let step = left.min(50);
            std::thread::sleep(Duration::from_millis(step));
            left -= step;
        }
    }
}

/// Every partition of [`TOPICS`], `per_topic` each.
pub fn partitions(per_topic: u32) -> Vec<Part> {
    TOPICS
        .iter()
        .flat_map(|(t, _)| (0..per_topic).map(move |p| (t.to_string(), p)))
        .collect()
}

/// Creates [`TOPICS`] with `partitions` partitions each, replicated on
/// `replication` nodes when given, through the first of `http` (the
/// nodes' addresses) that takes it.
pub fn create_topics(http: &[String], partitions: u32, replication: Option<u32>) -> Result<(), String> {
    for (name, segment_bytes) in TOPICS {
        let mut body = json!({"name": name, "partitions": partitions});
        if let Some(bytes) = segment_bytes {
            body["config"] = json!({"segment_bytes": bytes});
            if replication.is_some() {
                body["config"]["retention_bytes"] = json!(CLUSTER_RETENTION_BYTES);
            }
        }
        if let Some(rf) = replication {
            body["replication_factor"] = json!(rf);
        }
        let mut why = String::new();
        let created = http.iter().any(|addr| {
            let mut conn = HttpConn::new(addr);
            match conn.call("POST", "/v1/topics", Some(&body), Duration::from_secs(30)) {
                Ok(_) => true,
                Err(Outcome::Refused(_)) if topic_exists(&mut conn, name) => true,
                Err(e) => {
                    why = format!("{addr}: {} {}", e.why(), conn.last_error());
                    false
                }
            }
        });
        if !created {
            return Err(format!("create topic {name}: {why}"));
        }
    }
    Ok(())
}

fn topic_exists(conn: &mut HttpConn, name: &str) -> bool {
    conn.call(
        "GET",
        &format!("/v1/topics/{name}"),
        None,
        Duration::from_secs(30),
    )
    .is_ok()
}

/// Describes every topic each [`WATCH_EVERY_MS`], so the leader table
/// (and the history's `leader` events) follow elections.
fn watch_leaders(ctx: &Ctx) {
    let mut conns = Conns::new("l0");
    while !ctx.stopped() {
        for topic in ctx.topics() {
            ctx.lookup(&mut conns, "l0", &topic);
        }
        ctx.nap(WATCH_EVERY_MS);
    }
}

pub struct Workload {
    ctx: Arc<Ctx>,
    threads: Vec<JoinHandle<()>>,
}

impl Workload {
    pub fn start(ctx: Arc<Ctx>) -> Result<Workload, String> {
        let mut threads = Vec::new();
        let mut spawn = |name: String, f: Box<dyn FnOnce() + Send>| -> Result<(), String> {
            let h = std::thread::Builder::new()
                .name(name.clone())
                .spawn(f)
                .map_err(|e| format!("thread {name}: {e}"))?;
            threads.push(h);
            Ok(())
        };
        for (i, via) in [
            Via::Http,
            Via::Http,
            Via::Binary,
            Via::Idempotent,
            Via::Idempotent,
        ]
        .into_iter()
        .enumerate()
        {
            let c = ctx.clone();
            spawn(
                format!("w{i}"),
                Box::new(move || producer::run(&c, i as u32, via)),
            )?;
        }
        for i in 0..2 {
            let c = ctx.clone();
            spawn(format!("c{i}"), Box::new(move || consumer::run(&c, i)))?;
        }
        if ctx.cluster() {
            let c = ctx.clone();
            spawn("l0".into(), Box::new(move || watch_leaders(&c)))?;
        }
        let readers = ctx.parts.len().min(READERS_MAX);
        for i in 0..readers {
            let c = ctx.clone();
            let parts: Vec<Part> = ctx.parts.iter().skip(i).step_by(readers).cloned().collect();
            spawn(
                format!("r{i}"),
                Box::new(move || reader::run(&c, i as u32, &parts)),
            )?;
        }
        Ok(Workload { ctx, threads })
    }

    /// Stops every thread once its operation in flight has ended.
    pub fn stop(self) {
        self.ctx.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ctx(nodes: u32, dir: &std::path::Path) -> Ctx {
        Ctx {
            rec: Arc::new(Recorder::create(&dir.join("h.jsonl"), Instant::now()).unwrap()),
            observed: Arc::default(),
            stop: AtomicBool::new(false),
            nodes: (1..=nodes)
                .map(|n| Target {
                    node: n,
                    // Nothing listens: a lookup finds no node.
                    http: "127.0.0.1:1".into(),
                    binary: "127.0.0.1:1".into(),
                })
                .collect(),
            leaders: Leaders::default(),
            next_lookup: AtomicUsize::new(0),
            parts: partitions(1),
            seed: 1,
        }
    }

    #[test]
    fn a_cluster_reads_from_followers_and_writes_to_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(3, dir.path());
        let part = ("chaos".to_string(), 0);
        c.leaders.hint(&part, 2);
        let mut conns = Conns::new("t");
        assert_eq!(c.leader(&mut conns, "t", &part), 2);
        let followers: Vec<u32> = (0..4).map(|skip| c.follower(&part, skip)).collect();
        assert_eq!(followers, [1, 3, 1, 3]);
        // Unknown, and no node answers a lookup: the first node (which
        // would redirect).
        c.leaders.forget(&part);
        assert_eq!(c.leader(&mut conns, "t", &part), 1);
    }

    #[test]
    fn a_single_node_is_leader_and_follower() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(1, dir.path());
        let part = ("chaos".to_string(), 0);
        let mut conns = Conns::new("t");
        assert_eq!(c.leader(&mut conns, "t", &part), 1);
        assert_eq!((c.follower(&part, 0), c.follower(&part, 5)), (1, 1));
        assert!(!c.cluster());
    }
}
