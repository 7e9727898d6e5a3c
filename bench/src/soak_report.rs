//! The soak's report: per workload its readings, then one table and the
//! verdicts; or with `--json` one JSON object holding every reading.

use serde_json::{json, Value};

use crate::soak::{Outcome, SoakOptions, FLAT_KIB_PER_10K};

const MIB: f64 = (1 << 20) as f64;

/// The header line: what ran, against what.
fn describe(opts: &SoakOptions) -> String {
    let broker = if opts.start_broker {
        format!(
            "a fresh broker per workload, started by es-bench with --groups-max {}{}",
            opts.groups_max,
            if opts.huge_pages {
                ""
            } else {
                " (MIMALLOC_ALLOW_THP=0)"
            }
        )
    } else {
        format!("the broker at {} (pid {})", opts.broker, opts.pid.unwrap_or(0))
    };
    format!(
        "es-bench soak: {broker}, {} connections per workload, {} operations of warm-up then {} measured, \
         a reading every {}",
        opts.connections, opts.warmup, opts.ops, opts.sample_every
    )
}

/// Per workload: each reading and what it added; then the summary table.
pub fn table(opts: &SoakOptions, outcomes: &[Outcome]) -> String {
    let mut out = describe(opts);
    out.push_str("\n\n");
    for o in outcomes {
        out.push_str(&readings(o));
        out.push('\n');
    }
    out.push_str(&summary(outcomes));
    out
}

/// One workload's readings: RSS, its change since the previous reading
/// scaled to KiB per 10k operations, and descriptors.
fn readings(o: &Outcome) -> String {
    let mut out = format!("{} ({} connections):\n", o.workload.name(), o.connections);
    out.push_str(&format!(
        "{:>12} {:>10} {:>15} {:>6}\n",
        "operations", "RSS MiB", "KiB per 10k op", "fds"
    ));
    out.push_str(&format!(
        "{:>12} {:>10.2} {:>15} {:>6}\n",
        "before",
        o.before.rss_bytes as f64 / MIB,
        "-",
        o.before.fds
    ));
    let mut prev = (0u64, o.before);
    for s in &o.samples {
        let ops = s.ops - prev.0;
        let per_10k =
            (s.at.rss_bytes as f64 - prev.1.rss_bytes as f64) / 1024.0 * 10_000.0 / ops.max(1) as f64;
        let note = if s.ops <= o.warmup { "  (warm-up)" } else { "" };
        out.push_str(&format!(
            "{:>12} {:>10.2} {:>+15.0} {:>6}{note}\n",
            s.ops,
            s.at.rss_bytes as f64 / MIB,
            per_10k,
            s.at.fds
        ));
        prev = (s.ops, s.at);
    }
    out
}

fn summary(outcomes: &[Outcome]) -> String {
    let mut out = format!(
        "{:<26} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>11} {:>9}  verdict\n",
        "workload", "measured", "MiB start", "MiB warm", "MiB end", "B/op", "KiB/10k", "fit B/op", "fds/10k"
    );
    for o in outcomes {
        let warm = o
            .warm()
            .map_or("-".into(), |f| format!("{:.1}", f.rss_bytes as f64 / MIB));
        let end = o
            .samples
            .last()
            .map_or("-".into(), |s| format!("{:.1}", s.at.rss_bytes as f64 / MIB));
        out.push_str(&format!(
            "{:<26} {:>9} {:>9.1} {:>9} {:>9} {:>8} {:>9} {:>11} {:>9}  {}\n",
            o.workload.name(),
            o.measured_ops(),
            o.before.rss_bytes as f64 / MIB,
            warm,
            end,
            cell(o.bytes_per_op(), 1.0, 0),
            cell(o.kib_per_10k(), 1.0, 0),
            cell(o.fit_bytes_per_op(), 1.0, 0),
            cell(o.fds_per_op(), 10_000.0, 1),
            verdict(o)
        ));
    }
    let named = |flat: bool| -> String {
        let names: Vec<&str> = outcomes
            .iter()
            .filter(|o| o.flat() == Some(flat))
            .map(|o| o.workload.name())
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    };
    out.push_str(&format!(
        "\nflat (under {FLAT_KIB_PER_10K:.0} KiB per 10k operations after warm-up, about {:.0} B/op): {}\n",
        FLAT_KIB_PER_10K * 1024.0 / 10_000.0,
        named(true)
    ));
    out.push_str(&format!("not flat: {}\n", named(false)));
    for o in outcomes.iter().filter(|o| o.refused > 0) {
        out.push_str(&format!(
            "{}: {} operations refused by the broker's limit (too_many_groups: --groups-max reached)\n",
            o.workload.name(),
            o.refused
        ));
    }
    out
}

fn verdict(o: &Outcome) -> &'static str {
    match o.flat() {
        Some(true) => "flat",
        Some(false) => "GROWS",
        None => "too few readings",
    }
}

fn cell(v: Option<f64>, scale: f64, decimals: usize) -> String {
    v.map_or("-".into(), |v| format!("{:.*}", decimals, v * scale))
}

/// Every reading and figure as one JSON object.
pub fn json(opts: &SoakOptions, outcomes: &[Outcome]) -> Value {
    let workloads: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let reading = |ops: u64, f: &crate::footprint::Footprint| {
                json!({"ops": ops, "rss_bytes": f.rss_bytes, "anon_bytes": f.anon_bytes, "fds": f.fds})
            };
            json!({
                "name": o.workload.name(),
                "connections": o.connections,
                "warmup_ops": o.warmup,
                "measured_ops": o.measured_ops(),
                "seconds": o.seconds,
                "pid": o.pid,
                "before": reading(0, &o.before),
                "warm": o.warm().map(|f| reading(o.warmup, &f)),
                "samples": o.samples.iter().map(|s| reading(s.ops, &s.at)).collect::<Vec<_>>(),
                "bytes_per_op": o.bytes_per_op(),
                "least_squares_bytes_per_op": o.fit_bytes_per_op(),
                "kib_per_10k_ops": o.kib_per_10k(),
                "fds_per_op": o.fds_per_op(),
                "refused_ops": o.refused,
                "flat": o.flat(),
            })
        })
        .collect();
    json!({
        "command": "soak",
        "config": {
            "start_broker": opts.start_broker,
            "broker": if opts.start_broker { Value::Null } else { json!(opts.broker) },
            "shards": opts.shards,
            "huge_pages": opts.huge_pages,
            "connections": opts.connections,
            "warmup_ops": opts.warmup,
            "ops": opts.ops,
            "sample_every": opts.sample_every,
            "topic": opts.topic,
            "prefill": opts.prefill,
            "groups_max": if opts.start_broker { json!(opts.groups_max) } else { Value::Null },
        },
        "flat_kib_per_10k_ops": FLAT_KIB_PER_10K,
        "workloads": workloads,
    })
}
