//! The e2e phase: producers (as in `produce`, each value carrying its send
//! time) and one following consumer per partition at once. Records/s and
//! MB/s are what the consumers received; `latency` is the producers' send
//! to ack, `e2e` a record's send to its receipt.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use es_protocol::client::{Client, Options as ClientOptions};

use crate::consumer::Consumer;
use crate::counters::Counters;
use crate::latency::Latency;
use crate::phase::Phase;
use crate::producer::{self, Shared, Spec};
use crate::progress::Progress;
use crate::topic;
use crate::window::Window;

pub fn run(
    spec: &Spec,
    fetch_bytes: u32,
    warmup: Duration,
    duration: Duration,
    shards: Option<usize>,
    quiet: bool,
) -> Result<Phase, String> {
    let options = ClientOptions {
        tls: spec.tls.clone(),
        ..crate::connect::options()
    };
    let client =
        Client::connect(&spec.addr, options).map_err(|e| format!("connect to {}: {e}", spec.addr))?;
    let starts = topic::high_watermarks(&client, &spec.topic)?;
    drop(client);
    let consumers = (0..spec.partitions)
        .map(|p| {
            Consumer::connect(
                &spec.addr,
                &spec.topic,
                p,
                fetch_bytes,
                spec.gzip,
                spec.tls.clone(),
            )
        })
        .collect::<Result<Vec<_>, String>>()?;
    let produced = Counters::default();
    let consumed = Arc::new(Counters::default());
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let acked: Vec<AtomicU64> = starts.iter().map(|&s| AtomicU64::new(s)).collect();
    let shared = Shared {
        counters: &produced,
        stop: &stop,
        acked: &acked,
    };
    let window = Window::starting_now(warmup, duration);
    let progress = Progress::start("e2e".into(), consumed.clone(), window.from, quiet);
    let (produce_results, consume_results) = std::thread::scope(|s| {
        let followers: Vec<_> = consumers
            .iter()
            .enumerate()
            .map(|(p, c)| {
                let from = starts.get(p).copied().unwrap_or(0);
                let (done, acked, consumed) = (&done, &acked[p], &consumed);
                s.spawn(move || c.follow(from, done, acked, window, consumed))
            })
            .collect();
        let produce_results = producer::run_all(spec, window, &shared);
        done.store(true, Ordering::Release);
        let consume_results: Vec<Result<Latency, String>> = followers
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a consumer thread panicked".into()))
            })
            .collect();
        (produce_results, consume_results)
    });
    let seconds = window.measured_secs();
    progress.finish();
    let ack_latency = Latency::merged(produce_results)?;
    let e2e_latency = Latency::merged(consume_results)?;
    let mut phase = Phase::new("e2e", shards, consumed.totals(), seconds, &ack_latency);
    phase.totals.requests = produced.totals().requests;
    phase.e2e = e2e_latency.percentiles();
    phase.target_rate = spec.rate;
    Ok(phase)
}
