//! The cluster part of a run (`--nodes` > 1): the proxy on every peer
//! link, the nodes' membership flags, leader lookups for the nemesis, the
//! wait for the replicas to agree before the final drain, and the
//! reference log built from each partition's leader.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use es_protocol::requests::fetch::Fetch;
use es_protocol::{Request, Response};
use serde_json::{json, Value};

use crate::binary::BinConn;
use crate::checker::{part_name, FinalLog, Part};
use crate::conns::Conns;
use crate::node::{free_port, Membership, Node};
use crate::proxy::Proxy;
use crate::workload::Ctx;

/// How long the replicas may take to agree after the final heal (shared
/// raft spec §7.3): a bound, past which the run is checked as it stands.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one high watermark read may take.
const HW_TIMEOUT: Duration = Duration::from_secs(5);

/// Starts the proxy (one listener per node, toward its real raft
/// listener) and gives every node its membership flags.
pub fn wire(nodes: &mut [Node]) -> Result<Proxy, String> {
    let mut raft = Vec::new();
    for node in nodes.iter() {
        raft.push((u64::from(node.id), free_port()?));
    }
    let proxy = Proxy::start(&raft)?;
    let peers = raft
        .iter()
        .map(|(id, _)| {
            proxy
                .addr_of(*id)
                .map(|a| format!("{id}={a}"))
                .ok_or_else(|| format!("no proxy for node {id}"))
        })
        .collect::<Result<Vec<_>, _>>()?
        .join(",");
    for (node, (_, addr)) in nodes.iter_mut().zip(&raft) {
        node.join(&Membership {
            raft: *addr,
            peers: peers.clone(),
        });
    }
    Ok(proxy)
}

/// Starts every node that is down and waits until each is ready: all
/// spawned first, since a cluster node is ready only with a majority up.
pub fn start_all(nodes: &mut [Node]) -> Result<(), String> {
    for node in nodes.iter_mut() {
        node.spawn()?;
    }
    for node in nodes.iter_mut() {
        node.wait_ready()?;
    }
    Ok(())
}

/// The leader of `part` as a describe shows it now.
pub fn leader_of(ctx: &Ctx, part: &Part) -> Option<u32> {
    let mut conns = Conns::new("es-chaos-nemesis");
    ctx.leaders.forget(part);
    ctx.lookup(&mut conns, "nemesis", &part.0);
    ctx.leaders.get(part)
}

/// Waits (up to [`SETTLE_TIMEOUT`]) until every partition has a leader
/// and every replica reports the same high watermark. What was seen, for
/// `results.json`: `settled`, the seconds waited, and the last
/// disagreement.
pub fn settle(ctx: &Ctx) -> Value {
    let start = Instant::now();
    let mut conns = Conns::new("es-chaos-settle");
    let mut bins: BTreeMap<u32, BinConn> = ctx
        .nodes
        .iter()
        .map(|t| (t.node, BinConn::new(&t.binary, "es-chaos-settle")))
        .collect();
    loop {
        let mut leaderless: Vec<String> = Vec::new();
        for topic in ctx.topics() {
            ctx.lookup(&mut conns, "settle", &topic);
        }
        for part in &ctx.parts {
            if ctx.leaders.get(part).is_none() {
                leaderless.push(part_name(part));
            }
        }
        let mut apart: BTreeMap<String, BTreeMap<u32, Option<u64>>> = BTreeMap::new();
        for part in &ctx.parts {
            let hws: BTreeMap<u32, Option<u64>> = bins
                .iter_mut()
                .map(|(&n, bin)| (n, high_watermark(bin, part)))
                .collect();
            let first = hws.values().next().copied().flatten();
            if first.is_none() || hws.values().any(|h| *h != first) {
                apart.insert(part_name(part), hws);
            }
        }
        let waited = start.elapsed();
        if (leaderless.is_empty() && apart.is_empty()) || waited >= SETTLE_TIMEOUT {
            return json!({
                "settled": leaderless.is_empty() && apart.is_empty(),
                "waited_s": (waited.as_secs_f64() * 10.0).round() / 10.0,
                "leaderless": leaderless,
                "high_watermarks_apart": apart,
            });
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A replica's own high watermark of `part` (a fetch of nothing).
fn high_watermark(bin: &mut BinConn, (topic, partition): &Part) -> Option<u64> {
    let fetch = Fetch {
        topic: topic.clone(),
        partition: *partition,
        offset: None,
        max_records: 1,
        max_bytes: 1024,
        wait_ms: 0,
    };
    match bin.call(&Request::Fetch(fetch), HW_TIMEOUT) {
        Ok(Response::FetchOk(ok)) => Some(ok.high_watermark),
        _ => None,
    }
}

/// The reference log of a cluster run (node 0 in `final-logs.json`): each
/// partition's log as its leader drained it (the first node's where no
/// leader is known).
pub fn reference(ctx: &Ctx, finals: &[FinalLog]) -> FinalLog {
    let mut out = FinalLog {
        node: 0,
        partitions: BTreeMap::new(),
    };
    for part in &ctx.parts {
        let name = part_name(part);
        let leader = ctx.leaders.get(part);
        let from = finals
            .iter()
            .find(|f| Some(f.node) == leader)
            .or_else(|| finals.first());
        if let Some(log) = from.and_then(|f| f.partitions.get(&name)) {
            out.partitions.insert(name, log.clone());
        }
    }
    out
}
