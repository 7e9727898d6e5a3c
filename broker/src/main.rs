//! es-broker: the es event-streaming broker.
//!
//! Thread-per-core: one glommio shard per core owns its partitions; a small
//! router forwards requests between shards; the HTTP + JSON API runs on
//! every shard. See docs/api.md and docs/cli.md.
//!
//! This file is the table of contents: one `mod` per room, each room's
//! `mod.rs` says what it owns. `main` parses the flags, checks the process
//! limits and loads what the shards start from; `shard::runtime` runs them.

// The core: what runs a request, whichever listener received it. The
// Raft glue that replicates a shard's partitions joins `shard/`.
mod error; // the one error shape
mod limits; // every bound, its reason, and the relations between them
mod ops; // operations a shard runs on the partitions it owns
mod shard; // shards, the router between them, placement, start and stop

// What the broker keeps.
mod auth; // API keys, grants, who a request runs as
mod cluster; // cluster mode: identity, the raft transport and listener
mod groups; // consumer groups, their coordinator and groups log
mod producers; // idempotent producers: ids, windows, snapshots, expiry
mod registry; // the schema registry: Confluent's API, kept in `_schemas`
mod topics; // topics: metadata, catalog, controller, clean-up

// The edges. Listeners depend on the core, never the core on them; the
// Kafka wire protocol comes in as a listener beside HTTP and binary.
mod listen; // client listeners: HTTP, binary, TLS, and what they share
mod operate; // flags, logging, process limits, allocator, metrics, signals

#[cfg(test)]
mod test_executor;

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use groups::load as group_load;
use limits::START_RETRY_MS;
use operate::{clock, config, config_file, logging, memlock, metrics_help, nofile, signals};
use producers::ids as producer_ids;
use shard::{lock, runtime, state};
use topics::{catalog, topic, trash};

/// Histogram buckets (seconds) for every latency histogram: 50 us to 10 s,
/// closest from 0.5 to 10 ms, where a write and an fdatasync of a disk
/// lie, so that a p99 read from the buckets says which of 2, 3 or 4 ms.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01,
    0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Buckets for appends per fsync round, and produced batches per Raft
/// entry.
const PER_ROUND_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

fn main() -> ExitCode {
    let mut config = match config_file::parse(std::env::args_os().collect()) {
        Ok(config) => config,
        Err(config_file::ParseError::Clap(e)) => e.exit(),
        Err(config_file::ParseError::File(e)) => {
            eprintln!("es-broker: {e}");
            return ExitCode::from(2);
        }
    };
    let es_log = std::env::var("ES_LOG").ok();
    // Held until main returns: dropping it flushes the lines still queued.
    let log_guard = match logging::init(config.log_format, es_log.as_deref()) {
        Ok((guard, warnings)) => {
            // Written past the filter: a directive that matches nothing
            // would hide its own warning.
            for w in warnings {
                logging::unfiltered(config.log_format, tracing::Level::WARN, &w);
            }
            guard
        }
        Err(e) => {
            eprintln!("es-broker: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &config.config {
        tracing::info!(config = %path.display(), "settings read from the config file");
    }
    let format = config.log_format;
    if let Err(e) = config.validate() {
        logging::unfiltered(format, tracing::Level::ERROR, &e);
        return ExitCode::from(2);
    }
    // glommio opens paths with openat(-1, ...): a relative path fails with
    // EBADF. Resolve the directories against the working directory once.
    if let Err(e) = config.absolutize() {
        logging::unfiltered(format, tracing::Level::ERROR, &e);
        return ExitCode::from(2);
    }
    // Count the cores here, on the main thread: inside a pinned shard the
    // process sees one core, and every shard must agree on the count.
    config.shards = Some(config.shard_count());
    match start(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // After the queued lines, so the reason comes last.
            drop(log_guard);
            logging::unfiltered(format, tracing::Level::ERROR, &e);
            if runtime::DATA_LOSS_REFUSED.load(Ordering::Acquire) {
                ExitCode::from(runtime::EXIT_DATA_LOSS_REFUSED)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn retry_at_start<T>(mut attempt: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(START_RETRY_MS);
    let mut logged = false;
    loop {
        match attempt() {
            Ok(v) => return Ok(v),
            Err(e) if std::time::Instant::now() < deadline => {
                if !logged {
                    tracing::warn!("{e}; retrying for up to {START_RETRY_MS} ms");
                    logged = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50)); // blocking-ok: main thread, before the shards run
            }
            Err(e) => return Err(e),
        }
    }
}

/// Why `addr` (given by `flag`) cannot be listened on, and what to do.
fn listen_error(addr: std::net::SocketAddr, flag: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "cannot listen on {addr} ({flag}): another process is listening there; stop it or choose another address with {flag}"
        ),
        std::io::ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {addr} ({flag}): no interface of this machine has that address; choose another with {flag}"
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot listen on {addr} ({flag}): permission denied (ports below 1024 need privileges); choose another with {flag}"
        ),
        _ => format!("cannot listen on {addr} ({flag}): {e}"),
    }
}

fn start(mut config: config::Config) -> Result<(), String> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS_S)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full("es_fsync_appends_per_round".into()),
                PER_ROUND_BUCKETS,
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(Matcher::Full("es_raft_entry_batches".into()), PER_ROUND_BUCKETS)
        })
        .map_err(|e| format!("metrics: {e}"))?
        .install_recorder()
        .map_err(|e| format!("metrics: {e}"))?;
    metrics_help::install();
    if config.cluster.enabled() {
        metrics_help::install_cluster();
    }
    // A broker killed a moment ago can hold its lock and port a little
    // longer while the kernel tears its io_uring rings down: retry briefly.
    let _lock = retry_at_start(|| lock::lock(&config.data_dir))?;
    // Shards bind with SO_REUSEPORT, which would let a second broker share the
    // port silently; a plain bind first fails if anyone is listening there.
    let registry = config.registry.registry_addr.0.map(|a| (a, "--registry-addr"));
    let kafka = config.kafka.kafka_addr.0.map(|a| (a, "--kafka-addr"));
    let raft = config.cluster.raft_addr.map(|a| (a, "--raft-addr"));
    for (addr, flag) in [
        (config.http_addr, "--http-addr"),
        (config.binary_addr, "--binary-addr"),
    ]
    .into_iter()
    .chain(registry)
    .chain(kafka)
    .chain(raft)
    {
        retry_at_start(|| {
            std::net::TcpListener::bind(addr)
                .map(drop)
                .map_err(|e| listen_error(addr, flag, &e))
        })?;
    }
    memlock::ensure()?;
    trash::clear_at_start(&config.data_dir)?;
    let mode = match config.cluster.enabled() {
        false => cluster::identity::Mode::Standalone,
        true => cluster::identity::Mode::Cluster {
            node_id: config.node_id,
            nodes: config.cluster.node_ids(),
        },
    };
    let identity = cluster::identity::load_or_create(&config.data_dir, &mode)?;
    config.kafka.cluster_id = identity.reported_id();
    if config.cluster.enabled() {
        if config.cluster.raft_insecure {
            tracing::warn!(
                "--raft-insecure: the raft transport between brokers is plaintext and unauthenticated; \
                 anyone who reaches --raft-addr can take part (give --peer-cert, --peer-key and --peer-ca)"
            );
        }
        let hash = es_raft::transport::cluster_hash(&identity.roster());
        config.cluster.resolve(config.node_id, hash)?;
        if let (Some(id), Some(t)) = (&identity.cluster_id, &config.cluster.transport) {
            t.cluster_id.set(id);
        }
        config.cluster.cluster_id = identity.cluster_id.clone();
    }
    let topics = topic::load_all(&config.data_dir)
        .map_err(|e| format!("cannot read {}: {e}", config.data_dir.display()))?;
    let groups = group_load::load(&config.data_dir, config.shard_count(), config.accept_data_loss)
        .map_err(|e| format!("loading consumer groups: {e}"))?;
    let groups = group_load::BrokerGroups::new(groups, config.groups_max);
    nofile::ensure(&config, topics.iter().map(|t| t.partitions as u64).sum())?;
    let operator_key = auth::bootstrap::operator_key(
        config.admin_key_file.as_deref(),
        std::env::var("ES_ADMIN_KEY").ok(),
    )?;
    let keys = auth::bootstrap::load(&config.data_dir, config.auth, operator_key)?;
    tracing::info!(
        data_dir = %config.data_dir.display(),
        http = %config.http_addr,
        binary = %config.binary_addr,
        kafka = %config.kafka.kafka_addr,
        shards = config.shard_count(),
        topics = topics.len(),
        "starting"
    );
    let state = Arc::new(state::BrokerState::default());
    state.keys.install(config.auth, keys);
    // Read on this thread: the shards only run handshakes.
    let tls = listen::tls::Tls::from_config(&config)?;
    // What SIGHUP reloads, in order.
    let mut reloads = Vec::new();
    if let Some(tls) = tls.clone() {
        reloads.push(signals::Reload {
            what: "tls",
            run: Box::new(move || tls.reload()),
        });
    }
    if config.auth == auth::AuthMode::Required {
        let (state, data_dir) = (state.clone(), config.data_dir.clone());
        reloads.push(signals::Reload {
            what: "api_keys",
            run: Box::new(move || auth::reload::reload(&state, &data_dir)),
        });
    }
    signals::spawn(state.clone(), reloads)?;
    let config_data_dir = config.data_dir.clone();
    clock::init_test_offset(&config_data_dir);
    runtime::run(
        Arc::new(config),
        Arc::new(catalog::Catalog::new(
            topics,
            producer_ids::load_start_view(&config_data_dir)?,
        )),
        state,
        Arc::new(recorder),
        groups,
        listen::starter(tls),
    )?;
    tracing::info!("stopped cleanly");
    Ok(())
}
