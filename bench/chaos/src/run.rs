//! One run: brokers up, topics made, the workload and the nemesis for the
//! given time, then heal, stop the workload, drain every partition and
//! check. Everything lands in the run's directory: `history.jsonl`,
//! `nemesis.jsonl`, `final-logs.json`, `results.json`, `broker-<id>.log`.
//!
//! With several nodes (cluster.rs) every peer link passes through the
//! proxy, topics are replicated on every node, and after the final heal
//! the run waits for the replicas to agree before it drains each of them;
//! the reference log (node 0 of `final-logs.json`) is each partition's
//! leader's.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::checker::{self, FinalLog, Results};
use crate::cluster;
use crate::history::{self, Recorder};
use crate::interrupt;
use crate::leaders::Leaders;
use crate::loopfs::LoopFs;
use crate::nemesis::{self, Kind, Nemesis, Plan};
use crate::node::Node;
use crate::observed::Observed;
use crate::workload::{self, Ctx, Target, Workload};

/// Size of a node's data filesystem with the disk-full fault.
const DISK_BYTES: u64 = 96 << 20;
/// Most nodes of a cluster run (a fault suite on one machine).
pub const NODES_MAX: u32 = 9;

pub struct Args {
    pub broker: PathBuf,
    pub nodes: u32,
    pub time: Duration,
    pub seed: u64,
    /// Partitions of each of the workload's topics.
    pub partitions: u32,
    pub kinds: Vec<Kind>,
    pub quiet_s: (u64, u64),
    pub out: PathBuf,
}

impl Args {
    /// The command that runs this again.
    pub fn command(&self) -> String {
        let program = std::env::args().next().unwrap_or_else(|| "es-chaos".into());
        format!(
            "{program} run --broker {} --nodes {} --time {}s --seed {} --partitions {} --nemesis {} --interval {}-{} --out {}",
            self.broker.display(),
            self.nodes,
            self.time.as_secs(),
            self.seed,
            self.partitions,
            self.kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
            self.quiet_s.0,
            self.quiet_s.1,
            self.out.display()
        )
    }
}

/// Empties `out` if it holds an earlier run (or nothing), else refuses.
fn prepare(out: &Path) -> Result<(), String> {
    if out.exists() {
        let earlier = out.join("history.jsonl").exists();
        let empty = std::fs::read_dir(out)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !earlier && !empty {
            return Err(format!(
                "{} holds files that are not an es-chaos run's",
                out.display()
            ));
        }
        std::fs::remove_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))
}

pub fn run(args: &Args) -> Result<Results, String> {
    if args.nodes == 0 || args.nodes == 2 || args.nodes > NODES_MAX {
        return Err(format!(
            "--nodes {}: 1 (one broker) or a cluster of 3 to {NODES_MAX} (a majority must survive a fault)",
            args.nodes
        ));
    }
    let clustered = args.nodes > 1;
    if !args.broker.is_file() {
        return Err(format!(
            "{} not found: build it (cargo build -p es-broker)",
            args.broker.display()
        ));
    }
    prepare(&args.out)?;
    let out = args
        .out
        .canonicalize()
        .map_err(|e| format!("{}: {e}", args.out.display()))?;
    println!("es-chaos: seed {}; rerun with: {}", args.seed, args.command());

    let mut kinds = args.kinds.clone();
    let mut disks: Vec<Option<LoopFs>> = Vec::new();
    let mut nodes = Vec::new();
    for id in 1..=args.nodes {
        let mut data_dir = out.join(format!("data-{id}"));
        let mut disk = None;
        if kinds.contains(&Kind::DiskFull) {
            match LoopFs::make(&out, &format!("fs-{id}"), DISK_BYTES) {
                Ok(fs) => {
                    data_dir = fs.mount.join("data");
                    disk = Some(fs);
                }
                Err(why) => {
                    println!("es-chaos: disk-full skipped: {why}");
                    kinds.retain(|k| *k != Kind::DiskFull);
                }
            }
        }
        disks.push(disk);
        nodes.push(Node::new(id, &args.broker, &out, data_dir)?);
    }
    let proxy = if clustered {
        Some(cluster::wire(&mut nodes)?)
    } else {
        None
    };
    cluster::start_all(&mut nodes)?;
    let https: Vec<String> = nodes.iter().map(|n| n.http.clone()).collect();
    workload::create_topics(&https, args.partitions, clustered.then_some(args.nodes))?;

    let start = Instant::now();
    let rec = Arc::new(Recorder::create(&out.join("history.jsonl"), start)?);
    let ctx = Arc::new(Ctx {
        rec: rec.clone(),
        observed: Arc::new(Observed::default()),
        stop: AtomicBool::new(false),
        nodes: nodes
            .iter()
            .map(|n| Target {
                node: n.id,
                http: n.http.clone(),
                binary: n.binary.clone(),
            })
            .collect(),
        leaders: Leaders::default(),
        next_lookup: AtomicUsize::new(0),
        parts: workload::partitions(args.partitions),
        seed: args.seed,
    });
    if clustered {
        let s = cluster::settle(&ctx);
        if s["settled"] != true {
            return Err(format!(
                "the new cluster did not elect a leader for every partition: {s}"
            ));
        }
    }
    let load = Workload::start(ctx.clone())?;
    let plan = Plan {
        kinds,
        quiet_s: args.quiet_s,
    };
    let faults = Nemesis::new(&ctx, &out, &disks, proxy.as_ref())?.run(&mut nodes, &plan, start + args.time);
    // Healed and ready (or the run failed): the workload's last operations
    // complete against a live broker before it stops.
    load.stop();
    let faults = faults?;
    if interrupt::requested() {
        // Dropping the nodes and disks stops the brokers and unmounts.
        return Err(format!("interrupted; what ran is in {}", out.display()));
    }
    let mut extra = serde_json::Map::new();
    if clustered {
        let settled = cluster::settle(&ctx);
        println!("es-chaos: replicas after the heal: {settled}");
        extra.insert("settle".into(), settled);
    }
    rec.flush()?;

    let mut finals: Vec<FinalLog> = Vec::new();
    for node in &nodes {
        finals.push(crate::drain::drain(node, &ctx.parts)?);
    }
    if clustered {
        finals.insert(0, cluster::reference(&ctx, &finals));
    }
    if let Some(p) = &proxy {
        extra.insert("proxy".into(), json!(p.stats()));
    }
    let finals_path = out.join("final-logs.json");
    std::fs::write(
        &finals_path,
        serde_json::to_vec(&finals).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{}: {e}", finals_path.display()))?;
    let mut exits = Vec::new();
    for node in &mut nodes {
        let status = node.stop();
        exits.push(json!({"node": node.id, "exit": status.map(|s| s.to_string())}));
    }
    if clustered {
        let installs: serde_json::Map<String, serde_json::Value> = nodes
            .iter()
            .map(|n| (n.id.to_string(), json!(n.snapshot_installs())))
            .collect();
        println!("es-chaos: snapshots installed, per node: {}", json!(installs));
        extra.insert("snapshot_installs".into(), installs.into());
    }
    let history = history::read(&out.join("history.jsonl"))?;
    let results = checker::check(&history, &finals, &faults);
    write_results(&out, &results, args, &exits, extra)?;
    if !results.valid {
        // A data directory on a loop mount goes with it: keep a copy of
        // what the violation happened to.
        for (node, disk) in nodes.iter().zip(&disks) {
            if disk.is_some() {
                keep_copy(&node.data_dir, &out.join(format!("data-{}", node.id)));
            }
        }
    }
    Ok(results)
}

/// Copies `from` to `to` (`cp -a`), saying so if it cannot.
fn keep_copy(from: &Path, to: &Path) {
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status();
    if !copied.is_ok_and(|s| s.success()) {
        println!(
            "es-chaos: could not keep a copy of {} in {}",
            from.display(),
            to.display()
        );
    }
}

/// Re-checks the run in `dir` from its files.
pub fn recheck(dir: &Path) -> Result<Results, String> {
    let history = history::read(&dir.join("history.jsonl"))?;
    let finals_path = dir.join("final-logs.json");
    let finals: Vec<FinalLog> = serde_json::from_slice(
        &std::fs::read(&finals_path).map_err(|e| format!("{}: {e}", finals_path.display()))?,
    )
    .map_err(|e| format!("{}: {e}", finals_path.display()))?;
    let faults = nemesis::read_faults(&dir.join("nemesis.jsonl"))?;
    Ok(checker::check(&history, &finals, &faults))
}

fn write_results(
    out: &Path,
    results: &Results,
    args: &Args,
    exits: &[serde_json::Value],
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    let mut v = serde_json::to_value(results).map_err(|e| e.to_string())?;
    for (k, x) in extra {
        v[k] = x;
    }
    v["seed"] = json!(args.seed);
    v["time_s"] = json!(args.time.as_secs());
    v["nemesis"] = json!(args.kinds.iter().map(|k| k.name()).collect::<Vec<_>>());
    v["rerun"] = json!(args.command());
    v["shutdown"] = json!(exits);
    let path = out.join("results.json");
    let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// Prints the counts, the violations' first witnesses and the verdict.
pub fn summarize(results: &Results) {
    let s = &results.stats;
    println!(
        "es-chaos: {} faults; sends {} ok, {} failed, {} unknown; {} polls ({} records); {} commits",
        s["faults"],
        s["sends_ok"],
        s["sends_failed"],
        s["sends_info"],
        s["polls_ok"],
        s["records_polled"],
        s["commits_ok"]
    );
    for (name, c) in &results.checks {
        if c.count == 0 {
            continue;
        }
        let verdict = match c.verdict {
            checker::Verdict::Fail => "VIOLATION",
            checker::Verdict::Info => "counted",
        };
        println!("  {name}: {} ({verdict})", c.count);
        if c.verdict == checker::Verdict::Fail {
            for w in c.witnesses.iter().take(3) {
                println!("    {w}");
            }
        }
    }
    for f in &results.availability.after_faults {
        println!(
            "  {} at {}s for {}s: longest time without an ack {}s (on one partition: {}s, {})",
            f["fault"],
            f["start_s"],
            f["duration_s"],
            f["longest_gap_s"],
            f["partition_longest_gap_s"],
            f["partition"]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_dir_is_emptied_only_when_it_holds_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::write(theirs.join("notes.txt"), b"keep me").unwrap();
        assert!(prepare(&theirs).unwrap_err().contains("not an es-chaos run"));
        assert_eq!(std::fs::read(theirs.join("notes.txt")).unwrap(), b"keep me");

        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("history.jsonl"), b"{}").unwrap();
        std::fs::write(run.join("results.json"), b"{}").unwrap();
        prepare(&run).unwrap();
        assert_eq!(std::fs::read_dir(&run).unwrap().count(), 0);

        let fresh = dir.path().join("a/b");
        prepare(&fresh).unwrap();
        assert!(fresh.is_dir());
    }
}
