//! The final report: a table on stdout for people, or with `--json` one
//! JSON object holding every figure.

use serde_json::{json, Value};

use crate::args::{Mode, Options, Rate};
use crate::latency::Percentiles;
use crate::phase::Phase;

/// The header line: what was run, with which shape.
pub fn describe(mode: Mode, opts: &Options) -> String {
    let broker = if opts.start_broker {
        "a broker started by es-bench".to_string()
    } else {
        opts.broker_list()
    };
    let rate = match opts.rate {
        None => String::new(),
        Some(Rate::PerSecond(r)) => format!(", paced at {r:.0} records/s"),
        Some(Rate::HalfOfMax) => ", then paced at half the maximum".into(),
    };
    format!(
        "es-bench {}: {broker}, topic {} with {} partitions, {} producers x {} in flight, \
         batches of {} x {} B{}{}, {} s per phase{}{}",
        mode.name(),
        opts.topic,
        opts.partitions,
        opts.producers,
        opts.inflight,
        opts.batch,
        opts.record_size,
        match (opts.gzip, opts.tls || opts.tls_ca.is_some()) {
            (false, false) => "",
            (true, false) => ", gzip",
            (false, true) => ", tls",
            (true, true) => ", gzip, tls",
        },
        rate,
        opts.duration,
        // consume sweeps the page cache from the first fetch: no warm-up.
        if opts.warmup > 0.0 && mode != Mode::Consume {
            format!(" after {} s of warm-up", opts.warmup)
        } else {
            String::new()
        },
        if opts.rounds > 1 {
            format!(", the disk and the broker in {} alternating rounds", opts.rounds)
        } else {
            String::new()
        }
    )
}

/// The table: one row per phase (and one for e2e latency).
pub fn table(mode: Mode, opts: &Options, phases: &[Phase]) -> String {
    let mut out = describe(mode, opts);
    out.push('\n');
    out.push_str(&format!(
        "{:<19} {:>6} {:>11} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
        "phase",
        "shards",
        "records/s",
        "req/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "p999 ms",
        "max ms",
        "vs disk",
        "p99/disk",
        "vs 1st"
    ));
    for p in phases {
        let shards = p.shards.map_or("-".into(), |s| s.to_string());
        out.push_str(&format!(
            "{:<19} {:>6} {:>11.0} {:>10.0} {:>9.1} {} {:>8} {:>8} {:>8}\n",
            p.name,
            shards,
            p.records_per_s(),
            p.requests_per_s(),
            p.mb_per_s(),
            latency_cells(p.latency),
            ratio(p.compare.pct_of_disk, "%", 1),
            ratio(p.compare.p99_vs_disk, "x", 2),
            ratio(p.compare.vs_first_shards, "x", 2),
        ));
        if let Some(e2e) = p.e2e {
            out.push_str(&format!(
                "{:<19} {:>6} {:>11} {:>10} {:>9} {}\n",
                "  send to receipt",
                "",
                "",
                "",
                "",
                latency_cells(Some(e2e))
            ));
        }
    }
    out
}

fn latency_cells(l: Option<Percentiles>) -> String {
    match l {
        Some(l) => format!(
            "{:>8.2} {:>8.2} {:>8.2} {:>8.2}",
            ms(l.p50_us),
            ms(l.p99_us),
            ms(l.p999_us),
            ms(l.max_us)
        ),
        None => format!("{:>8} {:>8} {:>8} {:>8}", "-", "-", "-", "-"),
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn ratio(r: Option<f64>, unit: &str, decimals: usize) -> String {
    r.map_or("-".into(), |r| {
        if unit == "%" {
            format!("{r:.decimals$}%")
        } else {
            format!("{r:.decimals$}x")
        }
    })
}

/// Every figure as one JSON object.
pub fn json(mode: Mode, opts: &Options, phases: &[Phase]) -> Value {
    json!({
        "command": mode.name(),
        "description": describe(mode, opts),
        "config": {
            "broker": if opts.start_broker { Value::Null } else { json!(opts.broker_list()) },
            "start_broker": opts.start_broker,
            "shards": opts.shards,
            "topic": opts.topic,
            "partitions": opts.partitions,
            "producers": opts.producers,
            "producer_threads": opts.producer_threads(),
            "record_size": opts.record_size,
            "batch": opts.batch,
            "inflight": opts.inflight,
            "duration_s": opts.duration,
            "warmup_s": opts.warmup,
            "rate": match opts.rate {
                None => Value::Null,
                Some(Rate::PerSecond(r)) => json!(r),
                Some(Rate::HalfOfMax) => json!("half"),
            },
            "gzip": opts.gzip,
            "tls": opts.tls || opts.tls_ca.is_some(),
            "compare_disk": opts.compare_disk,
            "rounds": opts.rounds,
            "prefill_mb": opts.prefill_mb,
            "fetch_bytes": opts.fetch_bytes,
        },
        "phases": phases.iter().map(phase_json).collect::<Vec<_>>(),
    })
}

fn phase_json(p: &Phase) -> Value {
    json!({
        "name": p.name,
        "shards": p.shards,
        "seconds": p.seconds,
        "records": p.totals.records,
        "bytes": p.totals.bytes,
        "requests": p.totals.requests,
        "records_per_s": p.records_per_s(),
        "requests_per_s": p.requests_per_s(),
        "mb_per_s": p.mb_per_s(),
        "target_rate": p.target_rate,
        "latency_us": p.latency.map(percentiles_json),
        "e2e_latency_us": p.e2e.map(percentiles_json),
        "pct_of_disk": p.compare.pct_of_disk,
        "p99_vs_disk": p.compare.p99_vs_disk,
        "vs_first_shards": p.compare.vs_first_shards,
    })
}

fn percentiles_json(l: Percentiles) -> Value {
    json!({"count": l.count, "p50": l.p50_us, "p99": l.p99_us, "p999": l.p999_us, "max": l.max_us})
}
