//! `GET /metrics`: the exporter's registry, then the series of partitions,
//! consumer groups and shards, rendered from the shards' state at the
//! moment of the scrape.
//!
//! Those series are named by topics and groups that come and go, and the
//! exporter cannot forget a series: kept in its registry, a deleted topic's
//! gauges would be exported (stale) and held in memory for as long as the
//! broker runs. Rendered from live state, the export is true by
//! construction: a deleted topic or group has nothing to render, and a lag
//! moves as soon as a produce or a commit does, whether or not anyone
//! describes the group.
//!
//! The scraping shard asks every shard for its part (`Op::Series`; each
//! builds it in one pass over its own state, without awaiting), then joins
//! the groups' committed offsets with the partitions' watermarks wherever
//! they live.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::rc::Rc;

use futures::future::join_all;

use crate::groups::assignor::TopicPartition;
use crate::operate::metrics_help;
use crate::shard::message::{Op, Reply};
use crate::shard::placement::ShardId;
use crate::shard::Shard;

/// One shard's part of a scrape, built on that shard.
#[derive(Debug, Default)]
pub struct ShardSeries {
    pub shard: ShardId,
    pub recent_writes_bytes: u64,
    /// Descriptors open for closed segments (`--open-segments-max`).
    pub open_segment_files: u64,
    pub partitions: Vec<PartitionSeries>,
    pub groups: Vec<GroupSeries>,
    /// The shard's raft transport, in cluster mode.
    pub raft: Option<RaftSeries>,
}

/// A shard's raft transport counters (es_raft's `TransportStats`).
#[derive(Debug, Default)]
pub struct RaftSeries {
    pub connects: u64,
    pub connect_failures: u64,
    pub connections_lost: u64,
    pub accepted: u64,
    /// Accepted connections refused, by reason.
    pub refused: Vec<(&'static str, u64)>,
    pub frames_sent: u64,
    pub frames_received: u64,
    pub heartbeats_sent: u64,
    /// Raft groups registered on the shard.
    pub groups: u64,
    /// The controller group and the peers' liveness, on shard 0 once the
    /// controller is open (cluster/health.rs).
    pub controller: Option<ControllerSeries>,
    /// Terms begun that the shard's replicas saw (those removed included).
    pub elections: u64,
    /// Pre-vote rounds the shard's groups started, and those won (each
    /// then campaigned): es_raft's `PreVoteStats`.
    pub pre_vote_rounds: u64,
    pub pre_vote_won: u64,
    /// Bytes of stored batches the shard's replicas sent and received in
    /// snapshot transfers (those removed included).
    pub snapshot_bytes_sent: u64,
    pub snapshot_bytes_received: u64,
    /// Times the shard's replicas' groups stopped on a storage error, and
    /// started again after one (those removed included).
    pub storage_failures: u64,
    pub storage_restarts: u64,
    /// The partitions the shard owns, counted (cluster/leaders.rs).
    pub counts: crate::cluster::leaders::PartitionCounts,
}

/// What shard 0 knows of the controller group and of its peers.
#[derive(Debug, Default)]
pub struct ControllerSeries {
    /// The leader's node id, 0 while none.
    pub leader: u64,
    pub term: u64,
    pub elections: u64,
    /// The last controller log index this node applied.
    pub applied: u64,
    /// Each peer, and whether it answered within the election timeout.
    pub peers: Vec<(u64, bool)>,
}

/// A partition this shard owns.
#[derive(Debug)]
pub struct PartitionSeries {
    pub topic: String,
    pub partition: u32,
    pub log_start_offset: u64,
    pub high_watermark: u64,
    /// Cluster mode: the replica's leader (0 while none) and term.
    pub raft: Option<(u64, u64)>,
}

/// A group this shard coordinates.
#[derive(Debug)]
pub struct GroupSeries {
    pub name: String,
    pub members: usize,
    pub rebalances: u64,
    /// The topics its members consume.
    pub topics: Vec<String>,
    pub committed: Vec<(TopicPartition, u64)>,
}

/// This shard's part of a scrape (`Op::Series`).
pub fn snapshot(shard: &Shard) -> ShardSeries {
    let partitions = shard
        .partitions
        .borrow()
        .iter()
        .map(|(topic, partition, owned)| PartitionSeries {
            topic: topic.to_string(),
            partition,
            log_start_offset: owned.log.log_start_offset().0,
            high_watermark: owned.log.committed_offset().0,
            raft: owned.raft.as_ref().map(|r| (r.leader().unwrap_or(0), r.term())),
        })
        .collect();
    let groups = shard
        .groups
        .groups()
        .values()
        .map(|g| GroupSeries {
            name: g.name.to_string(),
            members: g.members.len(),
            rebalances: g.rebalances,
            topics: g.topics.clone(),
            committed: g
                .committed
                .iter()
                .map(|(t, p, o)| ((t.to_string(), p), o))
                .collect(),
        })
        .collect();
    let raft = shard.raft.as_ref().map(|t| {
        let s = &t.stats;
        let (mut elections, mut sent, mut received) = (
            t.retired.elections.get(),
            t.retired.snapshot_bytes_sent.get(),
            t.retired.snapshot_bytes_received.get(),
        );
        let (mut storage_failures, mut storage_restarts) =
            (t.retired.storage_failures.get(), t.retired.storage_restarts.get());
        for (_, _, owned) in shard.partitions.borrow().iter() {
            if let Some(r) = &owned.raft {
                let st = r.stats();
                elections += st.elections.get();
                sent += st.snapshot_bytes_sent.get();
                received += st.snapshot_bytes_received.get();
                storage_failures += st.storage_failures.get();
                storage_restarts += st.storage_restarts.get();
            }
        }
        let pv = t.registry.elections().stats();
        RaftSeries {
            elections,
            storage_failures,
            storage_restarts,
            pre_vote_rounds: pv.rounds.get(),
            pre_vote_won: pv.elections.get(),
            snapshot_bytes_sent: sent,
            snapshot_bytes_received: received,
            counts: crate::cluster::leaders::counts(shard),
            connects: s.connects.get(),
            connect_failures: s.connect_failures.get(),
            connections_lost: s.connections_lost.get(),
            accepted: s.accepted.get(),
            refused: t.refused().into_iter().collect(),
            frames_sent: s.frames_sent.borrow().values().sum(),
            frames_received: s.frames_received.borrow().values().sum(),
            heartbeats_sent: s.heartbeats_sent.get(),
            groups: t.registry.len() as u64,
            controller: t.controller.borrow().as_ref().map(|c| ControllerSeries {
                leader: c.leader().unwrap_or(0),
                term: c.term(),
                elections: t.health.elections(),
                applied: c.applied_index(),
                peers: shard
                    .config
                    .cluster
                    .node_ids()
                    .into_iter()
                    .filter(|&n| n != shard.config.node_id)
                    .map(|n| (n, t.health.is_up(n)))
                    .collect(),
            }),
        }
    });
    ShardSeries {
        shard: shard.id,
        recent_writes_bytes: es_storage::recent_writes_shard_held_bytes() as u64,
        open_segment_files: es_storage::open_segment_files() as u64,
        partitions,
        groups,
        raft,
    }
}

/// The whole `/metrics` text.
pub async fn render(shard: &Rc<Shard>) -> String {
    let mut out = shard.metrics.render();
    let replies = join_all((0..shard.shards).map(|s| shard.call(s, Op::Series))).await;
    let mut parts = Vec::with_capacity(replies.len());
    for reply in replies {
        match reply {
            Reply::Series(part) => parts.push(*part),
            // A shard shutting down answers no more; its series are left out.
            other => tracing::debug!(?other, "a shard's metrics were not gathered"),
        }
    }
    let topics = shard.catalog.snapshot();
    render_live(&mut out, &parts, &|t| topics.get(t).map(|m| m.partitions));
    render_quotas(&mut out, &shard.state.keys.table());
    out
}

/// Each key's quota counters (auth/quota.rs), kept with the key: key ids
/// are public and bounded (`KEYS_MAX`). None with `--auth disabled`.
fn render_quotas(out: &mut String, table: &crate::auth::table::KeyTable) {
    use crate::auth::quota::Direction;
    use std::sync::atomic::Ordering::Relaxed;
    const DIRECTIONS: [Direction; 2] = [Direction::Produce, Direction::Fetch];
    {
        let mut f = Family::new(out, "es_quota_bytes_total");
        for (id, key) in &table.keys {
            for d in DIRECTIONS {
                let bytes = key.runtime.accounts(d).bytes.load(Relaxed);
                f.sample(&[("key", id), ("direction", d.as_str())], bytes);
            }
        }
    }
    let mut f = Family::new(out, "es_quota_throttle_seconds_total");
    for (id, key) in &table.keys {
        for d in DIRECTIONS {
            let ns = key.runtime.accounts(d).throttle_ns.load(Relaxed);
            f.sample(&[("key", id), ("direction", d.as_str())], ns as f64 / 1e9);
        }
    }
}

/// A family: its help and type lines, then its samples; nothing without
/// samples.
struct Family<'a> {
    out: &'a mut String,
    help: &'static es_storage::MetricHelp,
    started: bool,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &str) -> Family<'a> {
        Family {
            out,
            help: metrics_help::live(name),
            started: false,
        }
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        let h = self.help;
        if !self.started {
            self.started = true;
            let _ = writeln!(self.out, "# HELP {} {}", h.name, h.help);
            let _ = writeln!(self.out, "# TYPE {} {}", h.name, h.kind.as_str());
        }
        debug_assert_eq!(labels.len(), h.labels.len(), "{}'s labels", h.name);
        self.out.push_str(h.name);
        for (i, (k, v)) in labels.iter().enumerate() {
            self.out.push(if i == 0 { '{' } else { ',' });
            let _ = write!(self.out, "{k}=\"{}\"", escape(v));
        }
        if !labels.is_empty() {
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

impl Drop for Family<'_> {
    fn drop(&mut self) {
        if self.started {
            self.out.push('\n');
        }
    }
}

/// A label value as the text format wants it. Topic and group names never
/// need it (their rule allows `[A-Za-z0-9._-]` only); kept for safety.
fn escape(v: &str) -> std::borrow::Cow<'_, str> {
    if v.contains(['\\', '"', '\n']) {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
            .into()
    } else {
        v.into()
    }
}

/// Appends the live families to `out`. `partitions_of(topic)` is the
/// partition count of an existing topic: a partition or committed offset
/// of a topic that no longer exists is left out.
fn render_live(out: &mut String, parts: &[ShardSeries], partitions_of: &dyn Fn(&str) -> Option<u32>) {
    let exists = |t: &str, p: u32| partitions_of(t).is_some_and(|n| p < n);
    let mut bounds: BTreeMap<(&str, u32), (u64, u64)> = BTreeMap::new();
    for s in parts {
        for p in s.partitions.iter().filter(|p| exists(&p.topic, p.partition)) {
            bounds.insert((&p.topic, p.partition), (p.log_start_offset, p.high_watermark));
        }
    }
    let mut groups: Vec<&GroupSeries> = parts.iter().flat_map(|s| &s.groups).collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));

    {
        let mut f = Family::new(out, "es_partition_high_watermark");
        for (&(t, p), &(_, hw)) in &bounds {
            f.sample(&[("topic", t), ("partition", &p.to_string())], hw);
        }
    }
    {
        let mut replicas: Vec<(&str, u32, (u64, u64))> = parts
            .iter()
            .flat_map(|s| &s.partitions)
            .filter(|p| exists(&p.topic, p.partition))
            .filter_map(|p| p.raft.map(|r| (p.topic.as_str(), p.partition, r)))
            .collect();
        replicas.sort();
        let mut f = Family::new(out, "es_raft_leader");
        for (t, p, (leader, _)) in &replicas {
            f.sample(&[("topic", t), ("partition", &p.to_string())], leader);
        }
        drop(f);
        let mut f = Family::new(out, "es_raft_term");
        for (t, p, (_, term)) in &replicas {
            f.sample(&[("topic", t), ("partition", &p.to_string())], term);
        }
    }
    {
        let mut shards: Vec<&ShardSeries> = parts.iter().collect();
        shards.sort_by_key(|s| s.shard);
        let mut f = Family::new(out, "es_recent_writes_bytes");
        for s in &shards {
            f.sample(&[("shard", &s.shard.to_string())], s.recent_writes_bytes);
        }
        drop(f);
        let mut f = Family::new(out, "es_open_segment_files");
        for s in &shards {
            f.sample(&[("shard", &s.shard.to_string())], s.open_segment_files);
        }
    }
    render_raft(out, parts);
    {
        let mut f = Family::new(out, "es_groups");
        f.sample(&[], groups.len() as u64);
    }
    {
        let mut f = Family::new(out, "es_group_members");
        for g in &groups {
            f.sample(&[("group", &g.name)], g.members as u64);
        }
    }
    {
        let mut f = Family::new(out, "es_group_rebalances_total");
        for g in &groups {
            f.sample(&[("group", &g.name)], g.rebalances);
        }
    }
    {
        let mut f = Family::new(out, "es_group_committed_offset");
        for g in &groups {
            for ((t, p), o) in g.committed.iter().filter(|((t, p), _)| exists(t, *p)) {
                f.sample(
                    &[("group", &g.name), ("topic", t), ("partition", &p.to_string())],
                    *o,
                );
            }
        }
    }
    // As describe: every partition of the topics the group consumes or has
    // commits for.
    let mut f = Family::new(out, "es_group_lag");
    for g in &groups {
        let committed: BTreeMap<(&str, u32), u64> = g
            .committed
            .iter()
            .map(|((t, p), o)| ((t.as_str(), *p), *o))
            .collect();
        let topics: BTreeSet<&str> = g
            .topics
            .iter()
            .map(String::as_str)
            .chain(committed.keys().map(|(t, _)| *t))
            .collect();
        for t in topics {
            for (&(_, p), &(start, hw)) in bounds.range((t, 0)..=(t, u32::MAX)) {
                let lag = crate::groups::coordinator::lag(start, hw, committed.get(&(t, p)).copied());
                f.sample(
                    &[("group", &g.name), ("topic", t), ("partition", &p.to_string())],
                    lag,
                );
            }
        }
    }
}

/// The raft transport's counters of each shard (cluster mode only).
fn render_raft(out: &mut String, parts: &[ShardSeries]) {
    let mut shards: Vec<(String, &RaftSeries)> = parts
        .iter()
        .filter_map(|s| s.raft.as_ref().map(|r| (s.shard.to_string(), r)))
        .collect();
    shards.sort_by(|a, b| a.0.cmp(&b.0));
    type Read = fn(&RaftSeries) -> u64;
    let counters: [(&str, Read); 13] = [
        ("es_raft_connects_total", |r| r.connects),
        ("es_raft_connect_failures_total", |r| r.connect_failures),
        ("es_raft_connections_lost_total", |r| r.connections_lost),
        ("es_raft_connections_accepted_total", |r| r.accepted),
        ("es_raft_frames_sent_total", |r| r.frames_sent),
        ("es_raft_frames_received_total", |r| r.frames_received),
        ("es_raft_heartbeats_coalesced_total", |r| r.heartbeats_sent),
        ("es_raft_groups", |r| r.groups),
        ("es_raft_elections_total", |r| r.elections),
        ("es_raft_replica_storage_failures_total", |r| r.storage_failures),
        ("es_raft_replica_storage_restarts_total", |r| r.storage_restarts),
        ("es_raft_pre_vote_rounds_total", |r| r.pre_vote_rounds),
        ("es_raft_pre_vote_won_total", |r| r.pre_vote_won),
    ];
    for (name, value) in counters {
        let mut f = Family::new(out, name);
        for (shard, r) in &shards {
            f.sample(&[("shard", shard)], value(r));
        }
    }
    {
        let mut f = Family::new(out, "es_raft_connections_refused_total");
        for (shard, r) in &shards {
            for (reason, n) in &r.refused {
                f.sample(&[("shard", shard), ("reason", reason)], n);
            }
        }
    }
    if !shards.is_empty() {
        let sum = |read: fn(&RaftSeries) -> u64| shards.iter().map(|(_, r)| read(r)).sum::<u64>();
        let mut f = Family::new(out, "es_raft_snapshot_bytes_total");
        f.sample(&[("dir", "sent")], sum(|r| r.snapshot_bytes_sent));
        f.sample(&[("dir", "received")], sum(|r| r.snapshot_bytes_received));
        drop(f);
        Family::new(out, "es_under_replicated_partitions").sample(&[], sum(|r| r.counts.under_replicated));
        Family::new(out, "es_leaderless_partitions").sample(&[], sum(|r| r.counts.leaderless));
    }
    let Some(c) = shards.iter().find_map(|(_, r)| r.controller.as_ref()) else {
        return;
    };
    {
        let mut f = Family::new(out, "es_raft_peer_connected");
        for (node, up) in &c.peers {
            f.sample(&[("node", &node.to_string())], u8::from(*up));
        }
    }
    type ReadC = fn(&ControllerSeries) -> u64;
    let gauges: [(&str, ReadC); 4] = [
        ("es_raft_controller_leader", |c| c.leader),
        ("es_raft_controller_term", |c| c.term),
        ("es_raft_controller_elections_total", |c| c.elections),
        ("es_raft_controller_applied_index", |c| c.applied),
    ];
    for (name, value) in gauges {
        Family::new(out, name).sample(&[], value(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, partition: u32, start: u64, hw: u64) -> PartitionSeries {
        PartitionSeries {
            topic: topic.into(),
            partition,
            log_start_offset: start,
            high_watermark: hw,
            raft: None,
        }
    }

    fn rendered(parts: &[ShardSeries], topics: &[(&str, u32)]) -> String {
        let mut out = String::new();
        render_live(&mut out, parts, &|t| {
            topics.iter().find(|(n, _)| *n == t).map(|(_, p)| *p)
        });
        out
    }

    #[test]
    fn lag_joins_commits_on_one_shard_with_watermarks_on_others() {
        let parts = vec![
            ShardSeries {
                shard: 0,
                recent_writes_bytes: 7,
                open_segment_files: 2,
                partitions: vec![partition("orders", 0, 0, 10)],
                groups: vec![GroupSeries {
                    name: "billing".into(),
                    members: 1,
                    rebalances: 3,
                    topics: vec!["orders".into()],
                    committed: vec![(("orders".into(), 0), 4), (("gone".into(), 0), 2)],
                }],
                raft: Some(RaftSeries {
                    accepted: 3,
                    refused: vec![("tls", 1)],
                    ..RaftSeries::default()
                }),
            },
            ShardSeries {
                shard: 1,
                recent_writes_bytes: 0,
                open_segment_files: 0,
                partitions: vec![partition("orders", 1, 5, 8), partition("gone", 0, 0, 3)],
                groups: vec![],
                raft: None,
            },
        ];
        let text = rendered(&parts, &[("orders", 2)]);
        for line in [
            r#"es_partition_high_watermark{topic="orders",partition="0"} 10"#,
            r#"es_partition_high_watermark{topic="orders",partition="1"} 8"#,
            r#"es_recent_writes_bytes{shard="0"} 7"#,
            r#"es_recent_writes_bytes{shard="1"} 0"#,
            "es_groups 1",
            r#"es_open_segment_files{shard="0"} 2"#,
            r#"es_group_members{group="billing"} 1"#,
            r#"es_group_rebalances_total{group="billing"} 3"#,
            r#"es_group_committed_offset{group="billing",topic="orders",partition="0"} 4"#,
            r#"es_group_lag{group="billing",topic="orders",partition="0"} 6"#,
            // No commit: from the log start.
            r#"es_group_lag{group="billing",topic="orders",partition="1"} 3"#,
            r#"es_raft_connections_accepted_total{shard="0"} 3"#,
            r#"es_raft_connections_refused_total{shard="0",reason="tls"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        assert!(
            !text.contains("gone"),
            "a deleted topic leaves no series:\n{text}"
        );
        for family in [
            "es_partition_high_watermark",
            "es_recent_writes_bytes",
            "es_groups",
            "es_open_segment_files",
            "es_group_members",
            "es_group_rebalances_total",
            "es_group_committed_offset",
            "es_group_lag",
        ] {
            assert_eq!(text.matches(&format!("# TYPE {family} ")).count(), 1, "{family}");
            assert_eq!(text.matches(&format!("# HELP {family} ")).count(), 1, "{family}");
        }
    }

    #[test]
    fn nothing_to_render_renders_no_family() {
        let parts = vec![ShardSeries::default()];
        let text = rendered(&parts, &[]);
        assert!(!text.contains("es_group_"), "{text}");
        assert!(text.lines().any(|l| l == "es_groups 0"), "{text}");
        assert!(!text.contains("es_partition"), "{text}");
        assert!(text.contains(r#"es_recent_writes_bytes{shard="0"} 0"#), "{text}");
        assert!(!text.contains("es_raft_"), "standalone: no raft series\n{text}");
    }

    #[test]
    fn shard_0_renders_the_controller_and_its_peers() {
        let parts = vec![ShardSeries {
            raft: Some(RaftSeries {
                controller: Some(ControllerSeries {
                    leader: 2,
                    term: 3,
                    elections: 1,
                    applied: 7,
                    peers: vec![(2, true), (3, false)],
                }),
                ..RaftSeries::default()
            }),
            ..ShardSeries::default()
        }];
        let text = rendered(&parts, &[]);
        for line in [
            r#"es_raft_peer_connected{node="2"} 1"#,
            r#"es_raft_peer_connected{node="3"} 0"#,
            "es_raft_controller_leader 2",
            "es_raft_controller_term 3",
            "es_raft_controller_elections_total 1",
            "es_raft_controller_applied_index 7",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }

    #[test]
    fn replicas_render_their_leader_and_term_and_shards_sum_their_counts() {
        use crate::cluster::leaders::PartitionCounts;
        let replica = |p: u32, leader: u64, term: u64| PartitionSeries {
            raft: Some((leader, term)),
            ..partition("r3", p, 0, 5)
        };
        let shard = |id: usize, partitions: Vec<PartitionSeries>, under: u64, leaderless: u64, sent: u64| {
            ShardSeries {
                shard: id,
                partitions,
                raft: Some(RaftSeries {
                    elections: 2,
                    snapshot_bytes_sent: sent,
                    snapshot_bytes_received: 1,
                    counts: PartitionCounts {
                        total: 2,
                        leaderless,
                        under_replicated: under,
                    },
                    ..RaftSeries::default()
                }),
                ..ShardSeries::default()
            }
        };
        let parts = vec![
            shard(0, vec![replica(0, 2, 7), replica(2, 0, 9)], 1, 0, 100),
            shard(1, vec![replica(1, 3, 4)], 2, 1, 20),
        ];
        let text = rendered(&parts, &[("r3", 3)]);
        for line in [
            r#"es_raft_leader{topic="r3",partition="0"} 2"#,
            r#"es_raft_leader{topic="r3",partition="1"} 3"#,
            r#"es_raft_leader{topic="r3",partition="2"} 0"#,
            r#"es_raft_term{topic="r3",partition="2"} 9"#,
            r#"es_raft_elections_total{shard="1"} 2"#,
            r#"es_raft_snapshot_bytes_total{dir="sent"} 120"#,
            r#"es_raft_snapshot_bytes_total{dir="received"} 2"#,
            "es_under_replicated_partitions 3",
            "es_leaderless_partitions 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        let gone = rendered(&parts, &[]);
        assert!(
            !gone.contains("es_raft_leader{"),
            "a deleted topic's replicas: no series\n{gone}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("plain.name-1"), "plain.name-1");
    }
}
