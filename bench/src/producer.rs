//! The producers of a phase. Each has a connection of its own and sends
//! Produce requests of `batch` records to partition `index % partitions`,
//! `inflight` of them in flight. Latency is per request, from send to the
//! fsynced ack.
//!
//! Plain producers are lanes of the lean loop (pipeline.rs), several to a
//! thread. Gzipped and stamped (e2e) ones go through the client library,
//! a thread each: unpaced, the thread sends until the window is full and then waits for
//! the oldest ack (acks on one partition come back in order). Paced
//! (`rate`), a collector thread waits for the acks so they are timed as they
//! arrive, and latency runs from each request's scheduled send time, so a
//! late send counts against the broker rather than hiding (no coordinated
//! omission).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use es_protocol::client::{Client, Options, PendingResponse};
use es_protocol::Response;

use crate::batch::Batch;
use crate::counters::Counters;
use crate::latency::Latency;
use crate::pipeline::LaneSpec;
use crate::window::Window;

/// What every producer of a phase does.
#[derive(Clone, Debug)]
pub struct Spec {
    pub addr: String,
    /// Each partition's leader (binary address) in a cluster, in partition
    /// order: a producer connects to its partition's; empty (standalone)
    /// or missing, `addr`.
    pub partition_addrs: Vec<String>,
    pub topic: String,
    pub partitions: u32,
    pub producers: usize,
    pub batch: usize,
    pub record_size: usize,
    pub inflight: usize,
    pub gzip: bool,
    /// Embed the send time in each value (e2e).
    pub stamped: bool,
    /// Records/s over all producers; None: as fast as acks allow.
    pub rate: Option<f64>,
    /// Records producer i sends before it stops (prefill); None: until the
    /// end of the window.
    pub budget: Option<Vec<u64>>,
    /// Threads the lean producers' connections are spread over.
    pub threads: usize,
    /// Speak TLS (through the client library, as with gzip).
    pub tls: Option<es_protocol::client::tls::TlsOptions>,
}

impl Spec {
    /// Where producer `index` (of partition `index % partitions`) connects.
    pub fn addr_of(&self, index: usize) -> &str {
        let partition = index % self.partitions.max(1) as usize;
        self.partition_addrs
            .get(partition)
            .map_or(self.addr.as_str(), String::as_str)
    }

    /// Producer `index`'s request: a batch for partition `index % partitions`.
    fn batch(&self, index: usize) -> Batch {
        Batch::new(
            &self.topic,
            index as u32 % self.partitions,
            self.batch,
            self.record_size,
            self.stamped,
            index as u64,
        )
    }

    /// Records producer `index` sends before it stops, if it has a budget.
    fn budget(&self, index: usize) -> Option<u64> {
        self.budget.as_ref().map(|b| b.get(index).copied().unwrap_or(0))
    }

    /// Paced: how often each producer sends a request of `records` records.
    fn interval(&self, records: u64) -> Option<Duration> {
        self.rate.map(|rate| {
            let per_producer = rate / self.producers as f64;
            Duration::from_secs_f64(records as f64 / per_producer)
        })
    }
}

/// Producer `index`'s name, its thread's and its connection's client id.
fn producer_name(index: usize) -> String {
    format!("es-bench-producer-{index}")
}

/// What the producers of a phase share.
pub struct Shared<'a> {
    pub counters: &'a Counters,
    /// Set on the first error, or to end a phase early.
    pub stop: &'a AtomicBool,
    /// Per partition: one past the highest offset acknowledged.
    pub acked: &'a [AtomicU64],
}

struct InFlight {
    t0: Instant,
    records: u64,
    bytes: u64,
    pending: PendingResponse,
}

/// Runs every producer of `spec` through `window` (or until its budget is
/// sent); the latencies of the requests sent after the warm-up, one entry
/// per thread. Uncompressed, unstamped plaintext producers are lanes of the
/// lean loop (pipeline.rs), spread over `spec.threads` threads; the others
/// use the client library, a thread each.
pub fn run_all(spec: &Spec, window: Window, shared: &Shared) -> Vec<Result<Latency, String>> {
    if spec.gzip || spec.stamped || spec.tls.is_some() {
        return spawn_each(
            (0..spec.producers).map(|i| (producer_name(i), i)),
            |i| run_one(i, spec, window, shared),
            shared,
        );
    }
    let threads = spec.threads.clamp(1, spec.producers.max(1));
    spawn_each(
        (0..threads).map(|t| (format!("es-bench-producers-{t}"), t)),
        |t| {
            let lanes = (t..spec.producers)
                .step_by(threads)
                .map(|i| lane(i, spec))
                .collect();
            crate::pipeline::run(lanes, window, shared)
        },
        shared,
    )
}

/// Runs `work(k)` on a thread of its own for each `(name, k)`, and
/// collects what each returned; the first error stops the others.
fn spawn_each<I, F>(jobs: I, work: F, shared: &Shared) -> Vec<Result<Latency, String>>
where
    I: Iterator<Item = (String, usize)>,
    F: Fn(usize) -> Result<Latency, String> + Sync,
{
    let work = |k| {
        let result = work(k);
        if result.is_err() {
            shared.stop.store(true, Ordering::Relaxed);
        }
        result
    };
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = jobs
            .map(|(name, k)| {
                std::thread::Builder::new()
                    .name(name)
                    .spawn_scoped(s, move || work(k))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err("a producer thread panicked".into())),
                Err(e) => Err(format!("cannot start a producer thread: {e}")),
            })
            .collect()
    })
}

/// Producer `index` as a lane of the lean loop.
fn lane(index: usize, spec: &Spec) -> LaneSpec {
    let batch = spec.batch(index);
    LaneSpec {
        index,
        addr: spec.addr_of(index).to_string(),
        client_id: producer_name(index),
        inflight: spec.inflight,
        interval: spec.interval(batch.records),
        budget: spec.budget(index),
        batch,
    }
}

/// Runs producer `index` on the client library through `window`.
fn run_one(index: usize, spec: &Spec, window: Window, shared: &Shared) -> Result<Latency, String> {
    let client = connect(index, spec)?;
    let mut batch = spec.batch(index);
    match spec.interval(batch.records) {
        None => unpaced(
            &client,
            &mut batch,
            spec.inflight,
            spec.budget(index),
            window,
            shared,
        ),
        Some(every) => paced(&client, &mut batch, spec.inflight, every, window, shared),
    }
}

fn connect(index: usize, spec: &Spec) -> Result<Client, String> {
    let options = Options {
        client_id: producer_name(index),
        gzip: spec.gzip,
        tls: spec.tls.clone(),
        ..crate::connect::options()
    };
    let addr = spec.addr_of(index);
    Client::connect(addr, options).map_err(|e| format!("producer {index}: connect to {addr}: {e}"))
}

pub fn stopped(shared: &Shared) -> bool {
    shared.stop.load(Ordering::Relaxed) || crate::interrupt::requested()
}

fn unpaced(
    client: &Client,
    batch: &mut Batch,
    inflight: usize,
    budget: Option<u64>,
    window: Window,
    shared: &Shared,
) -> Result<Latency, String> {
    let mut latency = Latency::new();
    let mut queue = VecDeque::with_capacity(inflight);
    let mut sent = 0u64;
    loop {
        while queue.len() >= inflight {
            if let Some(f) = queue.pop_front() {
                settle(f, &mut latency, shared, window)?;
            }
        }
        if stopped(shared) || window.over() || budget.is_some_and(|b| sent >= b) {
            break;
        }
        let t0 = Instant::now();
        let pending = client.send(batch.next()).map_err(|e| format!("produce: {e}"))?;
        sent += batch.records;
        queue.push_back(InFlight {
            t0,
            records: batch.records,
            bytes: batch.bytes,
            pending,
        });
    }
    for f in queue {
        settle(f, &mut latency, shared, window)?;
    }
    Ok(latency)
}

fn paced(
    client: &Client,
    batch: &mut Batch,
    inflight: usize,
    interval: Duration,
    window: Window,
    shared: &Shared,
) -> Result<Latency, String> {
    let (to_collector, from_sender) = mpsc::channel::<InFlight>();
    let (free_slot, slot_freed) = mpsc::channel::<()>();
    for _ in 0..inflight {
        let _ = free_slot.send(());
    }
    std::thread::scope(|s| {
        let collector = std::thread::Builder::new()
            .name("es-bench-acks".into())
            .spawn_scoped(s, move || {
                let mut latency = Latency::new();
                for f in from_sender {
                    settle(f, &mut latency, shared, window)?;
                    let _ = free_slot.send(());
                }
                Ok::<_, String>(latency)
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let start = Instant::now();
        let mut sent = Ok(());
        for k in 0u32.. {
            let at = start + interval.mul_f64(f64::from(k));
            if at >= window.until || stopped(shared) {
                break;
            }
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            // The collector gone means it failed: its error is the one to tell.
            if slot_freed.recv().is_err() {
                break;
            }
            match client.send(batch.next()) {
                Ok(pending) => {
                    let f = InFlight {
                        t0: at,
                        records: batch.records,
                        bytes: batch.bytes,
                        pending,
                    };
                    if to_collector.send(f).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    sent = Err(format!("produce: {e}"));
                    break;
                }
            }
        }
        drop(to_collector);
        let latency = collector
            .join()
            .map_err(|_| "the ack collector panicked".to_string())??;
        sent.map(|_| latency)
    })
}

fn settle(f: InFlight, latency: &mut Latency, shared: &Shared, window: Window) -> Result<(), String> {
    match f.pending.wait() {
        Ok(Response::ProduceBatchOk(ok)) if ok.record_count as u64 == f.records => {
            if window.counts(f.t0) {
                latency.record(f.t0.elapsed());
                shared.counters.add(f.records, f.bytes);
            }
            if let Some(mark) = shared.acked.get(ok.partition as usize) {
                mark.fetch_max(ok.base_offset + f.records, Ordering::Relaxed);
            }
            Ok(())
        }
        Ok(other) => Err(format!("produce: unexpected answer {:?}", other.kind())),
        Err(e) => Err(format!("produce: {e}")),
    }
}
