//! Every metric the broker exports, with its kind, labels and help text
//! (docs/api.md lists the same, a test holds them equal), and the start-up
//! that gives them to the Prometheus exporter: help lines, the series that
//! exist from the start (at 0, so a dashboard's `rate()` has a first
//! sample), and `es_build_info`.
//!
//! Two sources: the exporter's registry, fed by `metrics` calls on the
//! request paths ([`RECORDED`], and storage's [`STORAGE_METRICS`]); and the
//! series of topics, partitions, groups and shards, rendered from the
//! shards' live state at each scrape ([`LIVE`], operate/metrics_live.rs), so that a
//! deleted topic or group leaves no series behind.

use es_storage::{MetricHelp, MetricKind, STORAGE_METRICS};
use metrics::Unit;
use MetricKind::{Counter, Gauge, Histogram};

/// This build's version and commit (`es_build_info`; build.rs).
pub const BUILD_VERSION: &str = env!("CARGO_PKG_VERSION");
pub const BUILD_COMMIT: &str = env!("ES_BUILD_COMMIT");

const fn m(
    name: &'static str,
    kind: MetricKind,
    unit: Option<Unit>,
    labels: &'static [&'static str],
    label_values: &'static [&'static str],
    help: &'static str,
) -> MetricHelp {
    MetricHelp {
        name,
        kind,
        unit,
        labels,
        label_values,
        help,
    }
}

const SECONDS: Option<Unit> = Some(Unit::Seconds);
const BYTES: Option<Unit> = Some(Unit::Bytes);
const COUNT: Option<Unit> = Some(Unit::Count);
const LISTENERS: &[&str] = &["http", "binary", "registry"];
const PANIC_LISTENERS: &[&str] = &["http", "binary", "registry", "operation"];

/// The broker's metrics kept in the exporter's registry.
#[rustfmt::skip]
pub const RECORDED: &[MetricHelp] = &[
    m("es_build_info", Gauge, None, &["version", "commit"], &[],
        "Always 1; its labels are the broker's version and the git commit it was built from (unknown when built without git)."),
    m("es_http_requests_total", Counter, COUNT, &["endpoint", "status"], &[],
        "HTTP requests served, by endpoint and response status code."),
    m("es_http_errors_total", Counter, COUNT, &["endpoint"], &[],
        "HTTP requests answered with an error status, by endpoint."),
    m("es_http_request_duration_seconds", Histogram, SECONDS, &["endpoint"], &[],
        "HTTP request latency from routing to response, in seconds, by endpoint."),
    m("es_http_bytes_in_total", Counter, BYTES, &[], &[],
        "Bytes of HTTP produce request bodies read."),
    m("es_http_bytes_out_total", Counter, BYTES, &[], &[],
        "Bytes of HTTP response bodies sent."),
    m("es_produce_duration_seconds", Histogram, SECONDS, &[], &[],
        "HTTP produce latency, body read to acknowledgement (after fsync), in seconds."),
    m("es_fetch_duration_seconds", Histogram, SECONDS, &[], &[],
        "HTTP fetch latency, including any long-poll wait, in seconds."),
    m("es_binary_requests_total", Counter, COUNT, &["endpoint", "status"], &[],
        "Binary protocol requests handled, by endpoint and status (ok or error)."),
    m("es_binary_request_duration_seconds", Histogram, SECONDS, &["endpoint"], &[],
        "Binary protocol request latency, in seconds, by endpoint."),
    m("es_binary_protocol_errors_total", Counter, COUNT, &[], &[],
        "Binary connections closed after a malformed or refused frame."),
    m("es_request_budget_bytes_held", Gauge, BYTES, &["shard"], &[],
        "Bytes of the shard's --request-shard-bytes budget held: large binary requests and HTTP bodies being received or handled, fetch responses being read or waiting to be written."),
    m("es_binary_stalled_frames_total", Counter, COUNT, &[], &[],
        "Binary connections closed with frame_stalled: a large frame stopped arriving for --frame-stall-ms."),
    m("es_request_budget_waits_total", Counter, COUNT, &["listener"], LISTENERS,
        "Large requests and fetch responses that waited for room in their connection's or shard's budget, by listener."),
    m("es_http_body_stalled_total", Counter, COUNT, &[], &[],
        "HTTP request bodies that stopped arriving for --frame-stall-ms: answered 408 and closed."),
    m("es_connections_idle_closed_total", Counter, COUNT, &["listener"], LISTENERS,
        "Client connections closed after --connection-idle-ms with nothing in flight (HTTP: waiting for a request's headers past their timeout), by listener."),
    m("es_connections_write_stalled_total", Counter, COUNT, &["listener"], LISTENERS,
        "Client connections closed because their responses waited --frame-stall-ms for the client to read any of them, by listener."),
    m("es_binary_batch_receive_duration_seconds", Histogram, SECONDS, &[], &[],
        "Time from a large ProduceBatch frame's header to its last byte, in seconds."),
    m("es_binary_connections_moved_total", Counter, COUNT, &[], &[],
        "Binary connections handed to the shard that owns their partition."),
    m("es_append_duration_seconds", Histogram, SECONDS, &[], &[],
        "Per-partition append latency, from the append to its fsync, in seconds."),
    m("es_records_appended_total", Counter, COUNT, &[], &[],
        "Records appended to partitions."),
    m("es_produce_duplicates_total", Counter, COUNT, &[], &[],
        "Idempotent retries answered with their original offsets, not written again."),
    m("es_producer_ids_expired_total", Counter, COUNT, &[], &[],
        "Producer ids forgotten by every partition and the registry after writing nothing for --producer-id-expiry-ms."),
    m("es_producer_snapshots_total", Counter, COUNT, &["reason"], &["open", "roll", "expiry", "close"],
        "Producer state snapshots written, by reason: open (after a partition's start-up rebuild), roll (a segment rolled), expiry (the sweep forgot producers of the partition), close (clean shutdown)."),
    m("es_connections_open", Gauge, COUNT, &["listener"], LISTENERS,
        "Client connections open, by listener (http or binary)."),
    m("es_connections_refused_total", Counter, COUNT, &["listener"], LISTENERS,
        "Client connections closed at once because their listener's share of --connections-max was open, by listener."),
    m("es_auth_unauthenticated_total", Counter, COUNT, &["listener"], LISTENERS,
        "Requests refused 401 unauthenticated with --auth required (no key, malformed, unknown, wrong or revoked), by listener; a binary connection closes after each."),
    m("es_descriptors_limit", Gauge, COUNT, &[], &[],
        "The open-files limit (RLIMIT_NOFILE, soft) the broker runs with, after raising it at start."),
    m("es_descriptors_budget", Gauge, COUNT, &[], &[],
        "File descriptors the broker may need at once: partitions x 3 + --open-segments-max + --connections-max + a reserve; above es_descriptors_limit, operations may fail with 503."),
    m("es_request_panics_total", Counter, COUNT, &["listener"], PANIC_LISTENERS,
        "Requests whose handling panicked (a bug), answered internal while the shard kept serving, by where: http or binary (the listener's handling; its connection closed) or operation (on the shard owning the partition, group or topic change)."),
    m("es_recovery_segments_scanned_total", Counter, COUNT, &[], &[],
        "Segments whose log was scanned at start-up (0 after a clean shutdown)."),
    m("es_recovery_producer_batches_scanned_total", Counter, COUNT, &[], &[],
        "Batches read at start-up to rebuild producer state, after each partition's last producer snapshot (0 after a clean shutdown)."),
    m("es_cleanup_bytes_reclaimed_total", Counter, BYTES, &["kind"], &["retention", "compaction", "cold_retention"],
        "Disk bytes freed by cleanup, by kind (retention, compaction, cold_retention)."),
    m("es_retention_segments_deleted_total", Counter, COUNT, &[], &[],
        "Hot segments deleted by retention."),
    m("es_tiered_segments_moved_total", Counter, COUNT, &[], &[],
        "Segments moved to the cold tier."),
    m("es_tiered_bytes_moved_total", Counter, BYTES, &[], &[],
        "Bytes moved to the cold tier."),
    m("es_cold_segments_deleted_total", Counter, COUNT, &[], &[],
        "Cold-tier segments deleted by cold retention."),
    m("es_compaction_runs_total", Counter, COUNT, &[], &[],
        "Compaction passes that ran (a pass with nothing due is not counted)."),
    m("es_compaction_segments_rewritten_total", Counter, COUNT, &[], &[],
        "Segments rewritten by compaction."),
    m("es_compaction_records_dropped_total", Counter, COUNT, &[], &[],
        "Records dropped by compaction."),
    m("es_cleanup_errors_total", Counter, COUNT, &[], &[],
        "Cleanup passes that stopped on an error (logged; the log stays consistent)."),
    m("es_group_offsets_expired_total", Counter, COUNT, &[], &[],
        "Consumer groups deleted because they had no members for --group-offsets-retention-ms."),
    m("es_group_log_compactions_total", Counter, COUNT, &[], &[],
        "Groups logs rewritten as one snapshot per group because they had grown past twice their last snapshot."),
    m("es_registry_requests_total", Counter, COUNT, &["endpoint", "status"], &[],
        "Schema registry requests served, by endpoint and response status code."),
    m("es_registry_request_duration_seconds", Histogram, SECONDS, &["endpoint"], &[],
        "Schema registry request latency from routing to response, in seconds, by endpoint."),
    m("es_registry_schemas", Gauge, COUNT, &[], &[],
        "Schemas the registry holds (one per id, however many subjects use it)."),
    m("es_registry_subjects", Gauge, COUNT, &[], &[],
        "Subjects the registry holds with at least one version not soft-deleted."),
    m("es_registry_registrations_total", Counter, COUNT, &[], &[],
        "Schema versions registered (a registration of a schema the subject already has is not counted)."),
    m("es_registry_incompatible_total", Counter, COUNT, &[], &[],
        "Registrations refused 409 because the schema is incompatible with the subject's earlier versions at its compatibility level."),
    m("es_registry_damaged_records_total", Counter, COUNT, &[], &[],
        "Records of _schemas that were not registry records, or contradicted earlier ones, when the registry was loaded: logged with their offset and skipped."),
];

/// The metrics of TLS to clients, exported only with `--tls-cert`
/// (listen/tls/): a plaintext broker has no certificate to report.
#[rustfmt::skip]
pub const TLS: &[MetricHelp] = &[
    m("es_tls_cert_not_after_seconds", Gauge, SECONDS, &[], &[],
        "When the certificate the client listeners present expires (its notAfter), in unix seconds; updated by each reload."),
    m("es_tls_cert_reloads_total", Counter, COUNT, &["outcome"], &["ok", "failed"],
        "Certificate reloads on SIGHUP, by outcome: ok (new handshakes get the new certificate) or failed (the one before stays; the log says why)."),
    m("es_tls_handshake_failures_total", Counter, COUNT, &["listener"], LISTENERS,
        "Client connections closed because their TLS handshake failed (not TLS, no common protocol, a refused certificate), by listener."),
    m("es_tls_handshake_timeouts_total", Counter, COUNT, &["listener"], LISTENERS,
        "Client connections closed because their TLS handshake did not finish within --tls-handshake-timeout-ms, by listener."),
];

/// The metrics of a cluster node's replicas kept in the exporter's
/// registry, exported only with `--peers` (cluster/replica_observer.rs).
#[rustfmt::skip]
pub const CLUSTER: &[MetricHelp] = &[
    m("es_raft_commit_latency_seconds", Histogram, SECONDS, &[], &[],
        "Produce latency on a partition's leader, from the batch's submission to the Raft group to its entry committed on a majority and applied, in seconds."),
    m("es_raft_entry_batches", Histogram, COUNT, &[], &[],
        "Produced batches per Raft entry a leader proposed (concurrent produces coalesced into one entry per round)."),
];

/// The broker's metrics rendered from live state at each scrape.
#[rustfmt::skip]
pub const LIVE: &[MetricHelp] = &[
    m("es_partition_high_watermark", Gauge, COUNT, &["topic", "partition"], &[],
        "High watermark of each partition: the offset after its last durable record."),
    m("es_recent_writes_bytes", Gauge, BYTES, &["shard"], &[],
        "Newly written bytes the shard holds in memory for tailing readers, within --recent-writes-shard-bytes."),
    m("es_groups", Gauge, COUNT, &[], &[],
        "Consumer groups the broker holds (with members or committed offsets), against --groups-max."),
    m("es_open_segment_files", Gauge, COUNT, &["shard"], &[],
        "File descriptors the shard holds open for closed segments, within its share of --open-segments-max."),
    m("es_group_members", Gauge, COUNT, &["group"], &[],
        "Members of each consumer group."),
    m("es_group_rebalances_total", Counter, COUNT, &["group"], &[],
        "Rebalances of each consumer group since the broker started (joins, leaves, expiries)."),
    m("es_group_committed_offset", Gauge, COUNT, &["group", "topic", "partition"], &[],
        "Last committed offset of each group on each partition of an existing topic."),
    m("es_group_lag", Gauge, COUNT, &["group", "topic", "partition"], &[],
        "Records between each group's committed offset (or the log start, without one) and the partition's high watermark."),
    m("es_raft_connects_total", Counter, COUNT, &["shard"], &[],
        "Raft connections this shard opened to its peers (cluster mode)."),
    m("es_raft_connect_failures_total", Counter, COUNT, &["shard"], &[],
        "Connects to a raft peer (TCP, preamble or TLS) that failed; the shard backs off, 50 ms doubling to 2 s."),
    m("es_raft_connections_lost_total", Counter, COUNT, &["shard"], &[],
        "Open raft connections to peers that broke."),
    m("es_raft_connections_accepted_total", Counter, COUNT, &["shard"], &[],
        "Raft connections from peers this shard accepted and serves."),
    m("es_raft_connections_refused_total", Counter, COUNT, &["shard", "reason"], &[],
        "Connections to --raft-addr refused, by reason: preamble, cluster, wrong_shard, tls, peer_name, timeout, handoff."),
    m("es_raft_frames_sent_total", Counter, COUNT, &["shard"], &[],
        "Raft frames this shard sent to peers (requests and answers)."),
    m("es_raft_frames_received_total", Counter, COUNT, &["shard"], &[],
        "Raft frames this shard received from peers (requests and answers)."),
    m("es_raft_heartbeats_coalesced_total", Counter, COUNT, &["shard"], &[],
        "Heartbeats of Raft groups this shard sent inside coalesced Heartbeats frames."),
    m("es_raft_groups", Gauge, COUNT, &["shard"], &[],
        "Raft groups (partition replicas and the controller) registered on the shard."),
    m("es_raft_peer_connected", Gauge, COUNT, &["node"], &[],
        "1 while the peer answered shard 0's ping within --raft-election-timeout-ms (up), else 0 (unreachable)."),
    m("es_raft_elections_total", Counter, COUNT, &["shard"], &[],
        "Terms begun in the partition groups this shard holds replicas of, as its replicas saw them (each is an election in that group; a replica removed keeps its count)."),
    m("es_raft_replica_storage_failures_total", Counter, COUNT, &["shard"], &[],
        "Times a partition group this shard holds a replica of stopped on a storage error here (its log store failed: a full disk); the group starts again once the disk takes writes."),
    m("es_raft_replica_storage_restarts_total", Counter, COUNT, &["shard"], &[],
        "Times a partition replica's group on this shard started again after a storage error, once its disk took writes again (no broker restart)."),
    m("es_raft_pre_vote_rounds_total", Counter, COUNT, &["shard"], &[],
        "Pre-vote rounds the shard's Raft groups started: a replica heard from no leader for an election timeout and asked the other voters whether it could win."),
    m("es_raft_pre_vote_won_total", Counter, COUNT, &["shard"], &[],
        "Pre-vote rounds won by a majority of grants: the replica then stood for election (a new term)."),
    m("es_raft_leader", Gauge, COUNT, &["topic", "partition"], &[],
        "The leader of each partition this node holds a replica of, as the replica knows it (its node id; 0 while none)."),
    m("es_raft_term", Gauge, COUNT, &["topic", "partition"], &[],
        "The current Raft term of each partition replica this node holds."),
    m("es_raft_snapshot_bytes_total", Counter, BYTES, &["dir"], &["sent", "received"],
        "Bytes of stored batches this node's replicas streamed to late followers (sent) or received and staged (received) in snapshot transfers."),
    m("es_under_replicated_partitions", Gauge, COUNT, &[], &[],
        "Partitions of the cluster whose leader, as this node knows it (its own replicas, the leaders' reports), counts fewer replicas in sync than it has."),
    m("es_leaderless_partitions", Gauge, COUNT, &[], &[],
        "Partitions of the cluster without a leader that takes produces, as this node knows them: none known, or one that has not heard from a quorum for twice the election timeout."),
    m("es_raft_controller_leader", Gauge, COUNT, &[], &[],
        "The controller group's leader as this node knows it (its node id; 0 while none)."),
    m("es_raft_controller_term", Gauge, COUNT, &[], &[],
        "The controller group's current term on this node."),
    m("es_raft_controller_elections_total", Counter, COUNT, &[], &[],
        "Controller leaders this node saw elected (a new leader or a new term with one), the first included."),
    m("es_raft_controller_applied_index", Gauge, COUNT, &[], &[],
        "The last controller log index this node applied."),
    m("es_quota_bytes_total", Counter, BYTES, &["key", "direction"], &[],
        "Bytes of es batches each API key produced or fetched on this broker (its quota's count, limited or not), by key id and direction; only with --auth required."),
    m("es_quota_throttle_seconds_total", Counter, SECONDS, &["key", "direction"], &[],
        "Seconds each API key's requests were delayed by its quota on this broker (answers held back, fetches waiting for the debt to be paid), by key id and direction."),
];

/// Every metric the broker exports.
#[cfg(test)]
fn all() -> impl Iterator<Item = &'static MetricHelp> {
    RECORDED
        .iter()
        .chain(STORAGE_METRICS)
        .chain(TLS)
        .chain(CLUSTER)
        .chain(LIVE)
}

/// The help of a live metric, by name.
pub fn live(name: &str) -> &'static MetricHelp {
    LIVE.iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("{name} is listed in LIVE"))
}

/// Once the exporter is installed: help for every metric, the series that
/// exist from the start, and `es_build_info`.
pub fn install() {
    for m in RECORDED.iter().chain(STORAGE_METRICS) {
        m.describe();
        m.register();
    }
    metrics::gauge!("es_build_info", "version" => BUILD_VERSION, "commit" => BUILD_COMMIT).set(1.0);
}

/// In cluster mode: help for the replicas' metrics, and their series from
/// the start.
pub fn install_cluster() {
    for m in CLUSTER {
        m.describe();
        m.register();
    }
}

/// With TLS to clients: help for its metrics, and their series from the
/// start.
pub fn install_tls() {
    for m in TLS {
        m.describe();
        m.register();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// docs/api.md's metrics table: name -> (type, labels).
    fn documented() -> BTreeMap<String, (String, Vec<String>)> {
        let doc = include_str!("../../../docs/api.md");
        let section = doc
            .split("\n## Health, readiness, metrics")
            .nth(1)
            .expect("docs/api.md has the metrics section");
        let section = section.split("\n## ").next().unwrap_or(section);
        let mut out = BTreeMap::new();
        for row in section.lines().filter(|l| l.starts_with("| `es_")) {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let name = cells[0].trim_matches('`').to_string();
            let labels = cells[2]
                .split(',')
                .map(|l| l.trim().trim_matches('`').to_string())
                .filter(|l| !l.is_empty())
                .collect();
            assert!(
                out.insert(name.clone(), (cells[1].to_string(), labels)).is_none(),
                "{name} is documented twice"
            );
        }
        out
    }

    #[test]
    fn every_metric_is_documented_with_its_type_and_labels() {
        let documented = documented();
        let listed: BTreeMap<String, (String, Vec<String>)> = all()
            .map(|m| {
                let labels = m.labels.iter().map(|l| l.to_string()).collect();
                (m.name.to_string(), (m.kind.as_str().to_string(), labels))
            })
            .collect();
        let (d, l): (BTreeSet<_>, BTreeSet<_>) = (documented.keys().collect(), listed.keys().collect());
        assert_eq!(
            d.difference(&l).collect::<Vec<_>>(),
            Vec::<&&String>::new(),
            "documented in docs/api.md but not exported"
        );
        assert_eq!(
            l.difference(&d).collect::<Vec<_>>(),
            Vec::<&&String>::new(),
            "exported but not documented in docs/api.md"
        );
        assert_eq!(documented, listed, "docs/api.md's type or labels differ");
    }

    #[test]
    fn names_are_unique_and_every_help_says_something() {
        let mut seen = BTreeSet::new();
        for m in all() {
            assert!(seen.insert(m.name), "{} listed twice", m.name);
            assert!(m.help.len() > 10, "{} has no help", m.name);
            assert!(!m.help.contains('\n'), "{}'s help is one line", m.name);
            assert!(
                m.label_values.is_empty() || m.labels.len() == 1,
                "{}: fixed values are for a metric with one label",
                m.name
            );
        }
    }
}
