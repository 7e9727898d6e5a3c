//! Starting the shards and stopping them: one glommio executor per shard,
//! pinned to a core where there are enough, a full channel mesh between
//! them, recovery, the client listeners (started by the function main.rs
//! hands in, so the core names no listener), and the graceful shutdown
//! sequence.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use glommio::{LocalExecutorPoolBuilder, PoolPlacement};

use crate::limits::{
    IO_MEMORY_BYTES, MESH_CHANNEL_DEPTH, METRICS_UPKEEP_MS, OPEN_PARALLEL_PARTITIONS, SHUTDOWN_DRAIN_MS,
    SHUTDOWN_POLL_MS,
};
use crate::operate::config::Config;
use crate::shard::message::Envelope;
use crate::shard::placement::ShardId;
use crate::shard::state::BrokerState;
use crate::shard::Shard;
use crate::topics::catalog::Catalog;
use crate::topics::controller::by_owner;

/// Binds a shard's client listeners and serves each in a task of its own
/// that ends once shutdown starts (`listen::starter`, handed in by
/// main.rs; it holds what the listeners of every shard share).
pub type Listen = Arc<dyn Fn(&Rc<Shard>) -> Result<Vec<glommio::Task<()>>, String> + Send + Sync>;

/// Set when a shard refused to recover a partition whose data is damaged
/// (without `--accept-data-loss`): the broker then exits with
/// [`EXIT_DATA_LOSS_REFUSED`], so a supervisor can tell "needs an
/// operator" from a crash worth restarting.
pub static DATA_LOSS_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Exit code of a start refused because data on disk is damaged.
pub const EXIT_DATA_LOSS_REFUSED: u8 = 3;

/// Runs the broker until shutdown; returns once every shard has stopped.
pub fn run(
    config: Arc<Config>,
    catalog: Arc<Catalog>,
    state: Arc<BrokerState>,
    metrics: Arc<metrics_exporter_prometheus::PrometheusHandle>,
    groups: crate::groups::load::BrokerGroups,
    listen: Listen,
) -> Result<(), String> {
    let shards = config.shard_count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let placement = if shards <= cores {
        PoolPlacement::MaxSpread(shards, None)
    } else {
        PoolPlacement::Unbound(shards)
    };
    // blocking-ok: on the main thread before the executors run
    let meshes = Arc::new(std::sync::Mutex::new(crate::shard::mesh::build::<Envelope>(
        shards,
        MESH_CHANNEL_DEPTH,
    ))); // taken once per shard at thread start, before its executor runs
    let shards_state = state.clone();
    let groups = Arc::new(groups);
    let handles = LocalExecutorPoolBuilder::new(placement)
        .name("es-shard")
        .io_memory(IO_MEMORY_BYTES)
        .spin_before_park(Duration::from_micros(config.spin_before_park_us))
        .on_all_shards(move || {
            let (config, catalog, state, metrics, groups, listen) = (
                config.clone(),
                catalog.clone(),
                shards_state.clone(),
                metrics.clone(),
                groups.clone(),
                listen.clone(),
            );
            // Taken by move: each shard's ends go to exactly one thread.
            let mesh = meshes.lock().unwrap_or_else(|e| e.into_inner()).pop(); // blocking-ok: start-up, uncontended
            async move { shard_main(config, catalog, state, metrics, mesh, groups, listen).await }
        })
        .map_err(|e| format!("could not start shards: {e}"))?;
    // Shards never return: once every one has closed its partitions (the
    // last fsync is done), the process exits from here, without tearing the
    // shard threads and their io_uring rings down one by one. A shard thread
    // that ends anyway has panicked.
    let joiner_state = state.clone();
    std::thread::Builder::new()
        .name("es-shard-join".into())
        .spawn(move || {
            for (i, r) in handles.join_all().into_iter().enumerate() {
                if let Err(e) = r {
                    tracing::error!(shard = i, error = %e, "shard thread ended");
                }
            }
            joiner_state.shard_failed.store(true, Ordering::Release);
            joiner_state.closed_shards.store(usize::MAX, Ordering::Release);
        })
        .map_err(|e| format!("starting the shard joiner: {e}"))?;
    while state.closed_shards.load(Ordering::Acquire) < shards {
        std::thread::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)); // blocking-ok: the main thread, not a shard
    }
    if let Some(id) = state.shard_thread_ended.load(Ordering::Acquire).checked_sub(1) {
        Err(format!(
            "shard thread ended: shard {id} panicked or failed to start (see the log above); stopping the broker"
        ))
    } else if state.shard_failed.load(Ordering::Acquire) {
        Err("a shard failed; see the log above".into())
    } else if let unclean @ 1.. = state.unclean_partitions.load(Ordering::Acquire) {
        Err(format!(
            "{unclean} partition(s) did not close cleanly (see the log above); the next start recovers them"
        ))
    } else {
        Ok(())
    }
}

/// Stops the broker when a shard's thread ends. A shard never ends on its
/// own (it waits for the process to exit, see `shard_main`), so its thread
/// ending means a task on it panicked outside a connection or an
/// operation (those are contained: listen/listener.rs, ops/mod.rs), and glommio let
/// the panic take the thread. Without this the other shards would keep
/// serving, the dead shard's partitions would hang, and the broker would
/// never exit (the joiner in `run` waits for every shard). Held in a
/// thread local: its destructor runs when the thread ends, after the
/// panic has unwound (so it only sets atomics: logging uses thread locals
/// that may be gone by then; `run` says which shard ended).
struct ShardThreadGuard {
    id: ShardId,
    state: Arc<BrokerState>,
}

thread_local! {
    static SHARD_THREAD_GUARD: std::cell::RefCell<Option<ShardThreadGuard>> =
        const { std::cell::RefCell::new(None) };
}

impl Drop for ShardThreadGuard {
    fn drop(&mut self) {
        self.state
            .shard_thread_ended
            .store(self.id + 1, Ordering::Release);
        self.state.shard_failed.store(true, Ordering::Release);
        self.state.closed_shards.store(usize::MAX, Ordering::Release);
    }
}

async fn shard_main(
    config: Arc<Config>,
    catalog: Arc<Catalog>,
    state: Arc<BrokerState>,
    metrics: Arc<metrics_exporter_prometheus::PrometheusHandle>,
    mesh: Option<crate::shard::mesh::MeshEnds<Envelope>>,
    groups: Arc<crate::groups::load::BrokerGroups>,
    listen: Listen,
) {
    // Held for the shard's life: a lost wake-up of its executor costs one
    // nudge interval, never a stuck shard (es_storage::Nudge).
    let _nudge = match es_storage::Nudge::install() {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(error = %e, "starting the shard's nudge failed");
            state.shard_failed.store(true, Ordering::Release);
            state.closed_shards.store(usize::MAX, Ordering::Release);
            return;
        }
    };
    let Some(mesh) = mesh else {
        tracing::error!("a shard started without its mesh ends");
        state.shard_failed.store(true, Ordering::Release);
        state.closed_shards.store(usize::MAX, Ordering::Release);
        return;
    };
    let (senders, receivers) = mesh.connect().await;
    let id = senders.peer_id();
    // Every line this shard logs carries `shard`: the thread runs this
    // shard alone, so its span stays entered for the shard's life (entered
    // once; nothing is added per request).
    let _span = tracing::info_span!("shard", shard = id).entered();
    SHARD_THREAD_GUARD.with(|g| {
        *g.borrow_mut() = Some(ShardThreadGuard {
            id,
            state: state.clone(),
        })
    });
    #[cfg(debug_assertions)]
    test_panic_hook(id);
    es_storage::set_recent_writes_shard_bytes(config.recent_writes_shard_bytes);
    es_storage::set_open_segments_max(config.open_segments_per_shard());
    // glommio reads the disk's properties with descriptors of its own on a
    // thread's first direct-I/O open, and panics without them: done now,
    // while descriptors are plentiful (storage's device.rs).
    if let Err(e) = es_storage::read_device_properties(&config.data_dir).await {
        tracing::warn!(shard = id, error = %e, "could not probe the data directory's disk for direct I/O");
    }
    es_storage::set_accept_data_loss(config.accept_data_loss);
    if let Err(e) = es_storage::start_disk_threads(
        config.disk_threads as usize,
        &format!("es-disk-{id}"),
        config.disk_thread_slice_us,
    ) {
        tracing::error!(shard = id, error = %e, "starting the shard's disk threads failed");
        state.shard_failed.store(true, Ordering::Release);
        state.closed_shards.store(usize::MAX, Ordering::Release);
        return;
    }
    let shard = Rc::new(Shard::new(
        id,
        config,
        catalog,
        state.clone(),
        metrics,
        Some(senders),
        groups.take(id),
    ));
    crate::shard::serve_mesh(shard.clone(), receivers);
    glommio::spawn_local(watch_shutdown(shard.clone())).detach();
    let served = serve(&shard, listen).await;
    if let Err(e) = &served {
        // One shard failing stops the broker: a broker missing a shard's
        // partitions must not look healthy.
        tracing::error!(shard = id, error = %e, "shard failed; stopping the broker");
        state.shutting_down.store(true, Ordering::Release);
        shard.shutdown.advance(1);
    }
    // Wait for every other shard to stop serving clients too (their in-flight
    // requests may still be forwarded here), then close partitions cleanly.
    state.drained_shards.fetch_add(1, Ordering::AcqRel);
    while state.drained_shards.load(Ordering::Acquire) < shard.shards {
        glommio::timer::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)).await;
    }
    let unclean = crate::ops::open::close_all(&shard).await;
    crate::cluster::controller::stop(&shard).await;
    if let Some(t) = &shard.raft {
        t.close();
    }
    // Debug builds only, for broker/tests/startup.rs: partitions counted as
    // not closed cleanly, as a failed last fsync would leave them.
    #[cfg(debug_assertions)]
    let unclean = unclean
        + std::env::var("ES_TEST_UNCLEAN_CLOSE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
    state.unclean_partitions.fetch_add(unclean, Ordering::AcqRel);
    tracing::info!(shard = id, "shard stopped");
    if let Err(e) = &served {
        tracing::error!(shard = id, error = %e, "shard failed");
        state.shard_failed.store(true, Ordering::Release);
    }
    state.closed_shards.fetch_add(1, Ordering::AcqRel);
    // Wait for the process to exit (see `run`).
    loop {
        glommio::timer::sleep(Duration::from_secs(3600)).await;
    }
}

/// Debug builds only, for broker/tests/shard_panic.rs: with
/// `ES_TEST_PANIC_AFTER_MS` set, shard 0 panics in a detached task that
/// long after it starts, as a bug in a storage task would.
#[cfg(debug_assertions)]
fn test_panic_hook(id: ShardId) {
    let Some(ms) = std::env::var("ES_TEST_PANIC_AFTER_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    if id == 0 {
        glommio::spawn_local(async move {
            glommio::timer::sleep(Duration::from_millis(ms)).await;
            panic!("ES_TEST_PANIC_AFTER_MS: a test's panic in a detached task");
        })
        .detach();
    }
}

/// Recovers this shard's partitions and serves clients until shutdown
/// starts and open connections have finished.
async fn serve(shard: &Rc<Shard>, listen: Listen) -> Result<(), String> {
    let mut listeners = listen(shard)?;
    listeners.extend(crate::cluster::listener::start(shard)?);
    if shard.id == 0 {
        glommio::spawn_local(metrics_upkeep(shard.clone())).detach();
    }
    glommio::spawn_local(crate::operate::allocator::purge_loop(shard.clone())).detach();
    crate::topics::cleanup::spawn(shard.clone());
    crate::cluster::controller::start(shard).await?;
    crate::cluster::reports::start(shard);
    let (recovered, complete) = match recover(shard).await {
        Ok(true) => (Ok(()), true),
        // Shutdown came first: a clean stop, never ready.
        Ok(false) => (Ok(()), false),
        Err(e) => (Err(e), false),
    };
    glommio::spawn_local(crate::groups::coordinator::expire_loop(shard.clone())).detach();
    if recovered.is_ok() && complete {
        shard.state.ready_shards.fetch_add(1, Ordering::AcqRel);
        tracing::info!(
            shard = shard.id,
            partitions = shard.partitions.borrow().len(),
            "shard ready"
        );
    } else {
        shard.shutdown.advance(1);
    }
    // The listeners stop once `shutdown` reaches 1 (see watch_shutdown).
    for listener in listeners {
        listener.await;
    }
    drain_connections(shard).await;
    recovered
}

/// Opens every partition this shard owns, recovering each, up to
/// [`OPEN_PARALLEL_PARTITIONS`] at once; `Ok(false)` when it stopped
/// early. No partition starts opening once shutdown starts (a SIGTERM
/// during a long recovery stops the broker instead of waiting for every
/// partition): what is open is closed cleanly, the rest was never touched.
async fn recover(shard: &Rc<Shard>) -> Result<bool, String> {
    if shard.config.cluster.enabled() {
        // A cluster node's replicas are opened by the reconciler
        // (cluster/reconciler.rs), from the controller's state.
        return Ok(true);
    }
    let topics = shard.catalog.snapshot();
    let mine: Vec<(&crate::topics::topic::TopicMeta, u32)> = topics
        .values()
        .flat_map(|meta| {
            let ps = by_owner(shard, &meta.name, meta.partitions).remove(&shard.id);
            ps.into_iter().flatten().map(move |p| (&**meta, p))
        })
        .collect();
    let total = mine.len();
    let skipped = std::cell::Cell::new(0usize);
    let opened: Vec<Result<(), String>> = futures::stream::iter(mine)
        .map(|(meta, p)| {
            let skipped = &skipped;
            async move {
                #[cfg(debug_assertions)]
                test_hold_recovery(shard).await;
                if shard.state.is_shutting_down() {
                    skipped.set(skipped.get() + 1);
                    return Ok(());
                }
                crate::ops::open::open_partition(shard, meta, p)
                    .await
                    .map_err(|e| {
                        if e.code == crate::error::ErrorCode::CorruptData {
                            DATA_LOSS_REFUSED.store(true, Ordering::Release);
                        }
                        format!("recovering topic {}: {e}", meta.name)
                    })
            }
        })
        .buffer_unordered(OPEN_PARALLEL_PARTITIONS)
        .collect()
        .await;
    opened.into_iter().collect::<Result<(), String>>()?;
    if skipped.get() > 0 {
        tracing::info!(
            shard = shard.id,
            partitions_opened = total - skipped.get(),
            partitions = total,
            "shutdown during recovery: the remaining topics stay as they are"
        );
        return Ok(false);
    }
    Ok(true)
}

/// Debug builds only, for broker/tests/startup.rs: with
/// `ES_TEST_HOLD_RECOVERY` set, every shard (only shard N with
/// `shard=N`) waits before opening each topic until shutdown starts, as a
/// recovery of many partitions on a slow disk would keep it busy.
#[cfg(debug_assertions)]
async fn test_hold_recovery(shard: &Shard) {
    let Some(hold) = std::env::var_os("ES_TEST_HOLD_RECOVERY") else {
        return;
    };
    let only = hold
        .to_str()
        .and_then(|v| v.strip_prefix("shard="))
        .and_then(|n| n.parse::<ShardId>().ok());
    if only.is_some_and(|n| n != shard.id) {
        return;
    }
    tracing::info!(
        shard = shard.id,
        "ES_TEST_HOLD_RECOVERY: recovery waits for shutdown"
    );
    while !shard.state.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)).await;
    }
}

async fn watch_shutdown(shard: Rc<Shard>) {
    while !shard.state.is_shutting_down() && !shard.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)).await;
    }
    if !shard.is_shutting_down() {
        shard.shutdown.advance(1);
    }
}

async fn drain_connections(shard: &Shard) {
    let mut waited = 0;
    while shard.connections.total() > 0 && waited < SHUTDOWN_DRAIN_MS {
        glommio::timer::sleep(Duration::from_millis(SHUTDOWN_POLL_MS)).await;
        waited += SHUTDOWN_POLL_MS;
    }
    if shard.connections.total() > 0 {
        tracing::warn!(
            shard = shard.id,
            open = shard.connections.total(),
            "connections still open at shutdown"
        );
    }
}

/// Every `METRICS_UPKEEP_MS`: the exporter's upkeep. (The shards' own
/// gauges are read at each scrape: operate/metrics_live.rs.)
async fn metrics_upkeep(shard: Rc<Shard>) {
    while !shard.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(METRICS_UPKEEP_MS)).await;
        shard.metrics.run_upkeep();
    }
}
