//! A run from start to end: the scratch directory, the disk phase when
//! asked, then for each shard count a broker (started or given), the topic,
//! and the load's phases; finally the ratios between them.

use std::path::Path;
use std::time::Duration;

use es_protocol::client::Client;

use crate::args::{DiskIo, Mode, Options, Rate};
use crate::broker::{self, Broker};
use crate::phase::Phase;
use crate::producer::Spec;
use crate::rounds::{Measured, Rounds};
use crate::scratch::Scratch;
use crate::{compare, consume, disk, e2e, interrupt, produce, topic};

/// Runs `mode` as `opts` says; every phase measured, in order.
pub fn execute(mode: Mode, opts: &Options) -> Result<Vec<Phase>, String> {
    let duration = Duration::from_secs_f64(opts.duration);
    let warmup = Duration::from_secs_f64(opts.warmup);
    let scratch = Scratch::create(opts.data_dir.as_deref())?;
    let mut phases = Vec::new();
    // In rounds the disk runs between the broker's slices (load below).
    if mode == Mode::Disk || (opts.compare_disk && !interleaved(mode, opts)) {
        // `es-bench disk --rate N` paces the disk alone; as the baseline
        // of a broker run it goes flat out.
        let rate = match (mode, opts.rate) {
            (Mode::Disk, Some(Rate::PerSecond(r))) => Some(r),
            _ => None,
        };
        phases.push(disk::run(
            &disk_pattern(opts, rate),
            "disk",
            &scratch.path().join("disk"),
            warmup,
            duration,
            opts.quiet,
        )?);
    }
    if mode != Mode::Disk {
        // A started broker always gets an explicit --shards (default: the
        // cores es-bench may use), so every phase names its shard count.
        let shard_counts: Vec<Option<usize>> = if !opts.start_broker {
            vec![None]
        } else if opts.shards.is_empty() {
            vec![Some(std::thread::available_parallelism().map_or(1, |n| n.get()))]
        } else {
            opts.shards.iter().copied().map(Some).collect()
        };
        for shards in shard_counts {
            if interrupt::requested() {
                break;
            }
            against_broker(mode, opts, shards, scratch.path(), duration, &mut phases)?;
        }
    }
    compare::fill(&mut phases);
    Ok(phases)
}

/// One broker (started on `dir`, or the one at `--broker`) and the load's
/// phases against it.
fn against_broker(
    mode: Mode,
    opts: &Options,
    shards: Option<usize>,
    dir: &Path,
    duration: Duration,
    phases: &mut Vec<Phase>,
) -> Result<(), String> {
    let started = match shards {
        Some(n) => {
            let bin = match &opts.broker_bin {
                Some(b) => b.clone(),
                None => broker::default_binary()?,
            };
            Some(Broker::start(&bin, dir, n)?)
        }
        None => None,
    };
    let addr = match &started {
        Some(b) => b.addr.clone(),
        None => crate::connect::first_reachable(&opts.brokers(), &opts.client_options()?)?,
    };
    let result = load(mode, opts, &addr, shards, dir, duration, phases);
    match (result, &started) {
        (Err(e), Some(b)) => Err(format!("{e}\nbroker log (last lines):\n{}", b.log_tail())),
        (r, _) => r,
    }
}

fn load(
    mode: Mode,
    opts: &Options,
    addr: &str,
    shards: Option<usize>,
    dir: &Path,
    duration: Duration,
    phases: &mut Vec<Phase>,
) -> Result<(), String> {
    {
        let client =
            Client::connect(addr, opts.client_options()?).map_err(|e| format!("connect to {addr}: {e}"))?;
        topic::ensure(&client, &opts.topic, opts.partitions, opts.replication_factor)?;
    }
    let warmup = Duration::from_secs_f64(opts.warmup);
    let mut spec = spec(opts, addr)?;
    match mode {
        Mode::Produce => produce_phases(opts, &mut spec, shards, dir, phases)?,
        Mode::Consume => {
            consume::prefill(opts, addr)?;
            phases.push(consume::run(opts, addr, duration, shards)?);
        }
        Mode::E2e => {
            spec.stamped = true;
            spec.rate = match opts.rate {
                Some(Rate::PerSecond(r)) => Some(r),
                _ => None,
            };
            phases.push(e2e::run(
                &spec,
                opts.fetch_bytes,
                warmup,
                duration,
                shards,
                opts.quiet,
            )?);
        }
        Mode::Disk => {}
    }
    Ok(())
}

/// Whether the disk baseline runs in rounds with the broker (rounds.rs).
fn interleaved(mode: Mode, opts: &Options) -> bool {
    mode == Mode::Produce && opts.compare_disk && opts.rounds > 1
}

/// The disk's write pattern for this run's producers, paced at `rate`.
fn disk_pattern(opts: &Options, rate: Option<f64>) -> disk::Pattern {
    disk::Pattern {
        writers: opts.producers,
        batch: opts.batch,
        record_size: opts.record_size,
        direct: opts.disk_io == DiskIo::Direct,
        rate,
    }
}

/// `label` of slice `round` when there are several.
fn slice_label(label: &str, round: usize, opts: &Options) -> String {
    if opts.rounds > 1 {
        format!("{label} {}/{}", round + 1, opts.rounds)
    } else {
        label.to_string()
    }
}

/// Slice `round` of the disk test for [`Rounds::alternate`], named
/// `label 2/5` while it runs.
fn disk_slices<'a>(
    pattern: &'a disk::Pattern,
    label: &'a str,
    dir: &'a Path,
    opts: &'a Options,
) -> impl FnMut(usize, Duration, Duration) -> Result<Measured, String> + 'a {
    move |round, lead, slice| {
        disk::measure(
            pattern,
            &slice_label(label, round, opts),
            dir,
            lead,
            slice,
            opts.quiet,
        )
    }
}

/// Slice `round` of the producers of `spec`, as [`disk_slices`].
fn produce_slices<'a>(
    spec: &'a Spec,
    label: &'a str,
    opts: &'a Options,
) -> impl FnMut(usize, Duration, Duration) -> Result<Measured, String> + 'a {
    move |round, lead, slice| {
        produce::measure(spec, lead, slice, &slice_label(label, round, opts), opts.quiet)
    }
}

/// The produce phases: at the maximum rate (or `--rate`), then with
/// `--rate half` paced at half of it, each with its disk baseline when it
/// runs in rounds (otherwise the disk ran before the broker started).
fn produce_phases(
    opts: &Options,
    spec: &mut Spec,
    shards: Option<usize>,
    dir: &Path,
    phases: &mut Vec<Phase>,
) -> Result<(), String> {
    let rounds = Rounds {
        count: opts.rounds,
        warmup: Duration::from_secs_f64(opts.warmup),
        duration: Duration::from_secs_f64(opts.duration),
    };
    let disk_dir = dir.join("disk");
    spec.rate = match opts.rate {
        Some(Rate::PerSecond(r)) => Some(r),
        _ => None,
    };
    let max = if interleaved(Mode::Produce, opts) {
        let flat_out = disk_pattern(opts, None);
        let (disk, broker) = rounds.alternate(
            disk_slices(&flat_out, "disk", &disk_dir, opts),
            produce_slices(spec, "produce", opts),
        )?;
        phases.push(disk.phase("disk", None));
        broker.phase("produce", shards)
    } else {
        produce::run(
            spec,
            rounds.warmup,
            rounds.duration,
            "produce",
            shards,
            opts.quiet,
        )?
    };
    let half = max.records_per_s() / 2.0;
    phases.push(max);
    if opts.rate != Some(Rate::HalfOfMax) {
        return Ok(());
    }
    if half <= 0.0 {
        return Err("the maximum-rate phase acknowledged nothing: no half rate to run".into());
    }
    if shards.is_some() {
        // Our own broker: the half-rate phases start from an empty topic,
        // as the first did, and the disk does not fill up with what the
        // maximum rate wrote.
        let client = Client::connect(&spec.addr, crate::connect::options())
            .map_err(|e| format!("connect to {}: {e}", spec.addr))?;
        topic::recreate(&client, &opts.topic, opts.partitions, &dir.join("data"))?;
    }
    spec.rate = Some(half);
    // The disk at the same paced load: its p99 is the one the half-rate
    // p99 compares with (the disk of a long run is not the fresh disk of
    // the first phase), right after the broker's or in rounds with it.
    let paced = disk_pattern(opts, Some(half));
    if interleaved(Mode::Produce, opts) {
        let (broker, disk) = rounds.alternate(
            produce_slices(spec, "produce half-rate", opts),
            disk_slices(&paced, "disk half-rate", &disk_dir, opts),
        )?;
        phases.push(broker.phase("produce half-rate", shards));
        phases.push(disk.phase("disk half-rate", None));
        return Ok(());
    }
    phases.push(produce::run(
        spec,
        rounds.warmup,
        rounds.duration,
        "produce half-rate",
        shards,
        opts.quiet,
    )?);
    if opts.compare_disk {
        phases.push(disk::run(
            &paced,
            "disk half-rate",
            &disk_dir,
            rounds.warmup,
            rounds.duration,
            opts.quiet,
        )?);
    }
    Ok(())
}

fn spec(opts: &Options, addr: &str) -> Result<Spec, String> {
    Ok(Spec {
        addr: addr.to_string(),
        partition_addrs: topic::leader_addrs(addr, &opts.client_options()?, &opts.topic)?,
        topic: opts.topic.clone(),
        partitions: opts.partitions,
        producers: opts.producers,
        batch: opts.batch,
        record_size: opts.record_size,
        inflight: opts.inflight,
        gzip: opts.gzip,
        stamped: false,
        rate: None,
        budget: None,
        threads: opts.producer_threads(),
        tls: opts.tls_options()?,
    })
}
