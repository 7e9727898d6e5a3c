//! The nemesis: faults on a seeded schedule, each healed before the next,
//! every kind once (in a seeded order) before any repeats.
//!
//! | fault | what |
//! |---|---|
//! | `kill` | kill -9 a node, restart it 1-4 s later |
//! | `restart` | SIGTERM a node (it must exit 0), restart it |
//! | `pause` | SIGSTOP a node for 2-6 s, then SIGCONT |
//! | `torn-tail` | kill -9 a node; while it is down, tear the active segment of some partitions beyond what any client saw (torn.rs); restart it |
//! | `disk-full` | fill the node's data filesystem (a loop mount, loopfs.rs) for 3-8 s, half the time kill -9 the node then, free it (and restart the node) |
//!
//! With several nodes (cluster runs), through the proxy on every peer link
//! (proxy/; the splits are drawn in split.rs), each healed after 5-15 s:
//!
//! | fault | what |
//! |---|---|
//! | `partition` | random halves, a majority and a minority: every link between them blackholed |
//! | `bridge` | two halves that cannot hear each other, both hearing a middle node |
//! | `one-way` | random halves; the links from one half to the other blackholed one way only |
//! | `isolate-leader` | the leader of a partition drawn from the workload's, cut from every other node |
//! | `leader-kill` | kill -9 the leader of a drawn partition (`GET /v1/topics/{t}`), restart it 5-15 s later |
//! | `delay` | every link delayed by 20-300 ms (drawn once) |
//!
//! Every fault is written to `nemesis.jsonl` as it starts and ends; a
//! network fault also when its links are cut (`phase: cut`, with the
//! links), and its end names them again.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::checker::{part_name, Fault};
use crate::cluster;
use crate::http::{escape, HttpConn};
use crate::interrupt;
use crate::loopfs::LoopFs;
use crate::node::Node;
use crate::proxy::{Proxy, Rule};
use crate::rng::Rng;
use crate::split::{self, Split};
use crate::torn;
use crate::workload::Ctx;

/// Attempts to read the high watermarks of a restarted broker, half a
/// second apart.
const DESCRIBE_ATTEMPTS_MAX: u32 = 20;

/// How long a network fault or a killed leader lasts (ms, drawn).
const CLUSTER_FAULT_MS: (u64, u64) = (5000, 15000);
/// The latency the `delay` fault adds to every link (ms, drawn): up to
/// past the brokers' heartbeat, short of their election timeout.
const DELAY_MS: (u64, u64) = (20, 300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Kill,
    Restart,
    Pause,
    TornTail,
    DiskFull,
    Partition,
    Bridge,
    OneWay,
    IsolateLeader,
    LeaderKill,
    Delay,
}

impl Kind {
    /// The faults of a single node (`all` with `--nodes 1`).
    pub const SINGLE: [Kind; 5] = [
        Kind::Kill,
        Kind::Restart,
        Kind::Pause,
        Kind::TornTail,
        Kind::DiskFull,
    ];
    /// The faults that need a cluster.
    pub const CLUSTER: [Kind; 6] = [
        Kind::Partition,
        Kind::Bridge,
        Kind::OneWay,
        Kind::IsolateLeader,
        Kind::LeaderKill,
        Kind::Delay,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Kill => "kill",
            Kind::Restart => "restart",
            Kind::Pause => "pause",
            Kind::TornTail => "torn-tail",
            Kind::DiskFull => "disk-full",
            Kind::Partition => "partition",
            Kind::Bridge => "bridge",
            Kind::OneWay => "one-way",
            Kind::IsolateLeader => "isolate-leader",
            Kind::LeaderKill => "leader-kill",
            Kind::Delay => "delay",
        }
    }

    fn network(self) -> bool {
        matches!(
            self,
            Kind::Partition | Kind::Bridge | Kind::OneWay | Kind::IsolateLeader | Kind::Delay
        )
    }

    /// `kill,pause,...` (or `all`: every fault that applies to `nodes`
    /// nodes).
    pub fn parse_list(s: &str, nodes: u32) -> Result<Vec<Kind>, String> {
        let every: Vec<Kind> = Kind::SINGLE.into_iter().chain(Kind::CLUSTER).collect();
        if s == "all" {
            return Ok(if nodes > 1 { every } else { Kind::SINGLE.to_vec() });
        }
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let kind = every.iter().copied().find(|k| k.name() == name).ok_or_else(|| {
                format!(
                    "unknown nemesis {name:?}: one of {} or all",
                    every.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                )
            })?;
            if nodes < 3 && Kind::CLUSTER.contains(&kind) {
                return Err(format!("nemesis {name} needs a cluster: --nodes 3"));
            }
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
        Ok(out)
    }
}

/// The schedule's knobs.
pub struct Plan {
    pub kinds: Vec<Kind>,
    /// Seconds between the end of one fault and the start of the next.
    pub quiet_s: (u64, u64),
}

pub struct Nemesis<'a> {
    ctx: &'a Ctx,
    rng: Rng,
    log: BufWriter<File>,
    faults: Vec<Fault>,
    /// The data filesystem of each node, where disk-full runs.
    disks: &'a [Option<LoopFs>],
    /// The proxy on every peer link (cluster runs).
    proxy: Option<&'a Proxy>,
}

impl<'a> Nemesis<'a> {
    pub fn new(
        ctx: &'a Ctx,
        dir: &Path,
        disks: &'a [Option<LoopFs>],
        proxy: Option<&'a Proxy>,
    ) -> Result<Nemesis<'a>, String> {
        let path = dir.join("nemesis.jsonl");
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Nemesis {
            ctx,
            rng: Rng::fork(ctx.seed, 1),
            log: BufWriter::new(file),
            faults: Vec::new(),
            disks,
            proxy,
        })
    }

    fn note(&mut self, line: serde_json::Value) {
        println!("[{:7.1}s] {}", self.ctx.rec.now() as f64 / 1e9, line);
        let _ = writeln!(self.log, "{line}");
        let _ = self.log.flush();
    }

    /// Injects faults until `until`, then leaves every node healed and
    /// running. The faults, in order.
    pub fn run(mut self, nodes: &mut [Node], plan: &Plan, until: Instant) -> Result<Vec<Fault>, String> {
        let kinds: Vec<Kind> = plan.kinds.clone();
        let mut bag: Vec<Kind> = Vec::new();
        loop {
            let quiet = self.rng.range(plan.quiet_s.0, plan.quiet_s.1);
            let next = Instant::now() + Duration::from_secs(quiet);
            if kinds.is_empty() || next >= until {
                sleep_until(until);
                break;
            }
            sleep_until(next);
            if interrupt::requested() {
                break;
            }
            // Every kind once, in a seeded order, before any repeats: a
            // short run still meets most of them.
            if bag.is_empty() {
                bag = kinds.clone();
                for i in (1..bag.len()).rev() {
                    let j = self.rng.range(0, i as u64) as usize;
                    bag.swap(i, j);
                }
            }
            let Some(kind) = bag.pop() else { break };
            let i = self.rng.range(0, nodes.len() as u64 - 1) as usize;
            let result = self.inject(kind, i, nodes);
            if let Err(e) = result {
                self.heal(nodes)?;
                return Err(format!("{}: {e}", kind.name()));
            }
        }
        self.heal(nodes)?;
        Ok(self.faults)
    }

    fn inject(&mut self, kind: Kind, i: usize, nodes: &mut [Node]) -> Result<(), String> {
        let start = self.ctx.rec.now();
        let mut detail = Vec::new();
        // Faults on the network or on a leader choose their own targets.
        let on_node = !kind.network() && kind != Kind::LeaderKill;
        let id = if on_node {
            Value::from(nodes[i].id)
        } else {
            Value::Null
        };
        self.note(json!({"time": start, "fault": kind.name(), "phase": "start", "node": id}));
        if kind.network() {
            self.split(kind, nodes, &mut detail)?;
        } else if kind == Kind::LeaderKill {
            self.leader_kill(nodes, &mut detail)?;
        }
        let node = &mut nodes[i];
        match kind {
            Kind::Partition
            | Kind::Bridge
            | Kind::OneWay
            | Kind::IsolateLeader
            | Kind::LeaderKill
            | Kind::Delay => {}
            Kind::Kill => {
                node.kill();
                std::thread::sleep(Duration::from_millis(self.rng.range(1000, 4000)));
                node.start()?;
                self.recovered(node)?;
            }
            Kind::Restart => {
                match node.stop() {
                    Some(status) if status.success() => {}
                    other => return Err(format!("node {id}: SIGTERM: es-broker exited {other:?}, not 0")),
                }
                node.start()?;
                self.recovered(node)?;
            }
            Kind::Pause => {
                node.pause();
                std::thread::sleep(Duration::from_millis(self.rng.range(2000, 6000)));
                node.resume();
            }
            Kind::TornTail => {
                node.kill();
                let parts = self.ctx.parts.clone();
                let mut torn_any = false;
                for (k, part) in parts.iter().enumerate() {
                    // At least one partition (the last, if the draws chose none).
                    if !self.rng.chance(40) && (torn_any || k + 1 < parts.len()) {
                        continue;
                    }
                    let seen = self.ctx.observed.settled(part);
                    let dir = node
                        .data_dir
                        .join("topics")
                        .join(&part.0)
                        .join(part.1.to_string());
                    match torn::tear(&dir, seen, !self.ctx.cluster(), &mut self.rng) {
                        Ok(t) => {
                            torn_any = true;
                            detail.push(json!({"partition": part_name(part), "seen": seen,
                                "segment": t.segment.file_name().map(|n| n.to_string_lossy().into_owned()),
                                "action": t.action, "bytes_before": t.from, "bytes_after": t.to}));
                        }
                        Err(e) => detail.push(json!({"partition": part_name(part), "skipped": e})),
                    }
                }
                node.start()?;
                self.recovered(node)?;
            }
            Kind::DiskFull => {
                let Some(disk) = self.disks.get(i).and_then(Option::as_ref) else {
                    return Ok(());
                };
                let bytes = disk.fill()?;
                std::thread::sleep(Duration::from_millis(self.rng.range(3000, 8000)));
                // Half the time the broker also crashes while the disk is
                // full: refused writes must not come back with recovery.
                let crash = self.rng.chance(50);
                if crash {
                    node.kill();
                }
                detail.push(json!({"ballast_bytes": bytes, "killed_while_full": crash}));
                disk.free();
                node.start()?;
                self.recovered(node)?;
            }
        }
        let end = self.ctx.rec.now();
        self.note(
            json!({"time": end, "fault": kind.name(), "phase": "end", "node": id,
                         "start": start, "detail": detail}),
        );
        self.faults.push(Fault {
            name: kind.name().to_string(),
            start,
            end,
        });
        Ok(())
    }

    /// A network fault: cuts the links of a drawn split for 5-15 s, then
    /// heals them.
    fn split(&mut self, kind: Kind, nodes: &[Node], detail: &mut Vec<Value>) -> Result<(), String> {
        let proxy = self.proxy.ok_or("a network fault needs the proxy (--nodes 3)")?;
        let ids: Vec<u64> = nodes.iter().map(|n| u64::from(n.id)).collect();
        let mut rule = Rule::Blackhole;
        let split = match kind {
            Kind::Delay => {
                rule = Rule::Delay(self.rng.range(DELAY_MS.0, DELAY_MS.1));
                split::every_link(&ids)
            }
            Kind::Partition => split::partition(&mut self.rng, &ids),
            Kind::Bridge => split::bridge(&mut self.rng, &ids).ok_or("a bridge needs 3 nodes")?,
            Kind::OneWay => split::one_way(&mut self.rng, &ids),
            _ => {
                let part = self.rng.pick(&self.ctx.parts).clone();
                match cluster::leader_of(self.ctx, &part) {
                    Some(leader) => {
                        detail.push(json!({"partition": part_name(&part), "leader": leader}));
                        split::isolate(u64::from(leader), &ids)
                    }
                    None => {
                        detail.push(json!({"partition": part_name(&part), "skipped": "no leader known"}));
                        Split {
                            sides: Vec::new(),
                            cut: Vec::new(),
                        }
                    }
                }
            }
        };
        let links: Vec<String> = split.cut.iter().map(|(a, b)| format!("{a}->{b}")).collect();
        for &link in &split.cut {
            proxy.set(link, rule);
        }
        let now = self.ctx.rec.now();
        self.note(json!({"time": now, "fault": kind.name(), "phase": "cut",
                         "sides": split.sides, "links": links, "rule": rule.name()}));
        std::thread::sleep(Duration::from_millis(
            self.rng.range(CLUSTER_FAULT_MS.0, CLUSTER_FAULT_MS.1),
        ));
        // What the proxy held when the fault ended: delivered by the heal.
        let held: serde_json::Map<String, Value> = split
            .cut
            .iter()
            .map(|&(a, b)| (format!("{a}->{b}"), Value::from(proxy.held((a, b)))))
            .collect();
        for &link in &split.cut {
            proxy.set(link, Rule::Ok);
        }
        detail.push(json!({"sides": split.sides, "links": links, "rule": rule.name(),
                           "healed": Rule::Ok.name(), "held_bytes": held}));
        Ok(())
    }

    /// kill -9 the leader of a drawn partition; restart it 5-15 s later.
    fn leader_kill(&mut self, nodes: &mut [Node], detail: &mut Vec<Value>) -> Result<(), String> {
        let part = self.rng.pick(&self.ctx.parts).clone();
        let wait = self.rng.range(CLUSTER_FAULT_MS.0, CLUSTER_FAULT_MS.1);
        let leader = cluster::leader_of(self.ctx, &part);
        let Some(node) = nodes.iter_mut().find(|n| Some(n.id) == leader) else {
            detail.push(json!({"partition": part_name(&part), "skipped": "no leader known"}));
            return Ok(());
        };
        detail.push(json!({"partition": part_name(&part), "leader": node.id, "down_ms": wait}));
        node.kill();
        std::thread::sleep(Duration::from_millis(wait));
        node.start()?;
        self.recovered(node)
    }

    /// Every link healed, every node resumed, its disk freed, and running.
    fn heal(&mut self, nodes: &mut [Node]) -> Result<(), String> {
        if let Some(proxy) = self.proxy {
            proxy.heal();
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            node.resume();
            if let Some(disk) = self.disks.get(i).and_then(Option::as_ref) {
                disk.free();
            }
        }
        cluster::start_all(nodes)?;
        for node in nodes.iter() {
            self.recovered(node)?;
        }
        let now = self.ctx.rec.now();
        self.note(json!({"time": now, "fault": "heal", "phase": "end"}));
        Ok(())
    }
}

impl Nemesis<'_> {
    /// What a restarted broker recovered is durable (recovery fsyncs it
    /// before `/ready`): a later tear must leave it, as if a client had
    /// seen it, so every partition's high watermark now counts as seen.
    fn recovered(&self, node: &Node) -> Result<(), String> {
        let mut http = HttpConn::new(&node.http);
        for topic in self.ctx.topics() {
            let path = format!("/v1/topics/{}", escape(&topic));
            let mut attempts = 0;
            let v = loop {
                match http.call("GET", &path, None, Duration::from_secs(30)) {
                    Ok(v) => break v,
                    Err(e) if attempts >= DESCRIBE_ATTEMPTS_MAX => {
                        return Err(format!(
                            "node {}: GET {path} after a restart: {}",
                            node.id,
                            e.why()
                        ))
                    }
                    Err(_) => {
                        attempts += 1;
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            };
            for p in v["partitions"].as_array().into_iter().flatten() {
                if let (Some(p), Some(hw)) = (p["partition"].as_u64(), p["high_watermark"].as_u64()) {
                    self.ctx.observed.saw_hw(&topic, p as u32, hw);
                }
            }
        }
        Ok(())
    }
}

/// Sleeps until `t`, or until a stop is asked for (Ctrl-C, SIGTERM).
fn sleep_until(t: Instant) {
    while !interrupt::requested() {
        let now = Instant::now();
        if t <= now {
            return;
        }
        std::thread::sleep((t - now).min(Duration::from_millis(100)));
    }
}

/// The faults recorded in a run's `nemesis.jsonl`.
pub fn read_faults(path: &Path) -> Result<Vec<Fault>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: {e}", path.display()))?;
        if v["phase"] == "end" {
            if let (Some(name), Some(start), Some(end)) =
                (v["fault"].as_str(), v["start"].as_u64(), v["time"].as_u64())
            {
                out.push(Fault {
                    name: name.to_string(),
                    start,
                    end,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nemesis_lists_parse() {
        assert_eq!(
            Kind::parse_list("kill,pause", 1).unwrap(),
            [Kind::Kill, Kind::Pause]
        );
        assert_eq!(Kind::parse_list("all", 1).unwrap(), Kind::SINGLE);
        assert_eq!(Kind::parse_list("kill,kill", 1).unwrap(), [Kind::Kill]);
        assert!(Kind::parse_list("kill,partition", 1)
            .unwrap_err()
            .contains("--nodes 3"));
        assert!(Kind::parse_list("kill,split", 3).unwrap_err().contains("split"));
        assert_eq!(
            Kind::parse_list("partition,bridge,one-way,isolate-leader,leader-kill,delay", 3).unwrap(),
            Kind::CLUSTER
        );
        let all = Kind::parse_list("all", 3).unwrap();
        assert_eq!(all.len(), 11);
        assert!(all.iter().all(|k| Kind::parse_list(k.name(), 3).unwrap() == [*k]));
    }
}
