//! The consume phase: top the topic up to `--prefill-mb` (producing, one
//! producer per partition), then one consumer connection per partition
//! reads its partition through once, unmeasured (the broker writes with
//! direct I/O, so the data is on the disk; this brings it into the page
//! cache), then sweeps it from the start for `duration`: this measures the
//! broker's read path, not the disk.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::Client;

use crate::args::Options;
use crate::consumer::Consumer;
use crate::counters::Counters;
use crate::latency::Latency;
use crate::phase::Phase;
use crate::producer::{self, Shared, Spec};
use crate::progress::Progress;
use crate::topic;
use crate::window::Window;

/// Produces until every partition holds its share of `--prefill-mb`.
pub fn prefill(opts: &Options, addr: &str) -> Result<(), String> {
    let client =
        Client::connect(addr, opts.client_options()?).map_err(|e| format!("connect to {addr}: {e}"))?;
    let marks = topic::high_watermarks(&client, &opts.topic)?;
    drop(client);
    let partitions = opts.partitions as usize;
    let want = (opts.prefill_mb << 20) / opts.partitions as u64 / opts.record_size as u64;
    let budget: Vec<u64> = (0..partitions)
        .map(|p| want.saturating_sub(marks.get(p).copied().unwrap_or(0)))
        .collect();
    if budget.iter().all(|&b| b == 0) {
        return Ok(());
    }
    let spec = Spec {
        addr: addr.to_string(),
        partition_addrs: topic::leader_addrs(addr, &opts.client_options()?, &opts.topic)?,
        topic: opts.topic.clone(),
        partitions: opts.partitions,
        producers: partitions,
        batch: opts.batch,
        record_size: opts.record_size,
        inflight: opts.inflight,
        gzip: opts.gzip,
        stamped: false,
        rate: None,
        budget: Some(budget),
        threads: opts.producer_threads(),
        tls: opts.tls_options()?,
    };
    let counters = Arc::new(Counters::default());
    let stop = AtomicBool::new(false);
    let acked: Vec<AtomicU64> = (0..partitions).map(|_| AtomicU64::new(0)).collect();
    let shared = Shared {
        counters: &counters,
        stop: &stop,
        acked: &acked,
    };
    // A budget, not the window, ends the prefill.
    let window = Window::starting_now(Duration::ZERO, Duration::from_secs(24 * 3600));
    let progress = Progress::start("prefill".into(), counters.clone(), window.from, opts.quiet);
    let results = producer::run_all(&spec, window, &shared);
    progress.finish();
    results.into_iter().try_for_each(|r| r.map(|_| ()))
}

/// Sweeps every partition for `duration`, one connection each.
pub fn run(opts: &Options, addr: &str, duration: Duration, shards: Option<usize>) -> Result<Phase, String> {
    let tls = opts.tls_options()?;
    let consumers = (0..opts.partitions)
        .map(|p| Consumer::connect(addr, &opts.topic, p, opts.fetch_bytes, opts.gzip, tls.clone()))
        .collect::<Result<Vec<_>, String>>()?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handles: Vec<_> = consumers
            .iter()
            .map(|c| s.spawn(|| c.read_through(&stop)))
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err("a consumer thread panicked".into()))
        })
    })?;
    let counters = Arc::new(Counters::default());
    let window = Window::starting_now(Duration::ZERO, duration);
    let progress = Progress::start("consume".into(), counters.clone(), window.from, opts.quiet);
    let results: Vec<Result<Latency, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = consumers
            .iter()
            .map(|c| {
                let (counters, stop) = (&counters, &stop);
                s.spawn(move || {
                    let r = c.sweep(window.until, counters, stop);
                    if r.is_err() {
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a consumer thread panicked".into()))
            })
            .collect()
    });
    let seconds = window.measured_secs();
    progress.finish();
    let latency = Latency::merged(results)?;
    Ok(Phase::new(
        "consume",
        shards,
        counters.totals(),
        seconds,
        &latency,
    ))
}
