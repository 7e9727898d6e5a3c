//! es-chaos: a Jepsen-style fault suite for es.
//!
//! Runs `es-broker` processes on loopback, drives them only through their
//! public interfaces (HTTP and the binary protocol) with a recorded
//! workload while a nemesis injects faults, then checks the history
//! against the final logs. docs/reliability.md says how to run it.

mod binary;
mod checker;
mod cluster;
mod conns;
mod consumer;
mod drain;
mod history;
mod http;
// Ctrl-C and SIGTERM, and a broker process: es-bench's files, shared.
#[path = "../../src/interrupt.rs"]
mod interrupt;
mod leaders;
mod loopfs;
mod nemesis;
mod node;
mod observed;
mod outcome;
mod preamble;
#[path = "../../src/process.rs"]
mod process;
mod producer;
mod proxy;
mod reader;
mod rng;
mod run;
mod split;
mod torn;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "es-chaos",
    version,
    about = "Fault injection and a history checker for es brokers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run brokers under faults with a recorded workload, then check it.
    /// Exit 0: no violation; 1: a violation (results.json says which);
    /// 2: the run itself failed.
    Run {
        /// The es-broker binary.
        #[arg(long, default_value = "target/debug/es-broker")]
        broker: PathBuf,
        /// Brokers to run: 1, or a cluster of 3 (each peer link through the
        /// harness's proxy; needs a broker with cluster mode).
        #[arg(long, default_value_t = 1)]
        nodes: u32,
        /// How long faults are injected: `60s`, `2m`, or seconds.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        time: Duration,
        /// Seeds the fault schedule and the workload's choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Partitions of each of the two topics (1 to 1024).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1024))]
        partitions: u32,
        /// Faults to inject: kill, restart, pause, torn-tail, disk-full; with
        /// --nodes 3 also partition, bridge, one-way, isolate-leader,
        /// leader-kill; or all (every fault that applies).
        #[arg(long, default_value = "all")]
        nemesis: String,
        /// Seconds of calm between two faults, drawn in LO-HI.
        #[arg(long, default_value = "8-12", value_parser = parse_range)]
        interval: (u64, u64),
        /// The run's directory (emptied first if it holds an earlier run).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Check a finished run again from its files.
    Check {
        /// The run's directory.
        dir: PathBuf,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (60s, 2m)"))?;
    match unit {
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("not a duration: {s:?} (60s, 2m)")),
    }
}

fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once('-')
        .ok_or_else(|| format!("not a range: {s:?} (8-12)"))?;
    let a: u64 = a.parse().map_err(|_| format!("not a range: {s:?}"))?;
    let b: u64 = b.parse().map_err(|_| format!("not a range: {s:?}"))?;
    if a == 0 || b < a {
        return Err(format!("not a range: {s:?}: LO-HI with 1 <= LO <= HI"));
    }
    Ok((a, b))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    interrupt::install();
    let results = match cli.command {
        Command::Run {
            broker,
            nodes,
            time,
            seed,
            partitions,
            nemesis,
            interval,
            out,
        } => {
            let kinds = match nemesis::Kind::parse_list(&nemesis, nodes) {
                Ok(k) => k,
                Err(e) => {
                    eprintln!("es-chaos: {e}");
                    return ExitCode::from(2);
                }
            };
            let args = run::Args {
                broker,
                nodes,
                time,
                seed,
                partitions,
                kinds,
                quiet_s: interval,
                out: out.unwrap_or_else(|| PathBuf::from(format!("target/chaos/seed-{seed}"))),
            };
            let r = run::run(&args);
            if let Ok(r) = &r {
                run::summarize(r);
                let verdict = if r.valid { "no violation" } else { "VIOLATIONS" };
                println!(
                    "es-chaos: seed {seed}: {verdict}; {}",
                    args.out.join("results.json").display()
                );
                if !r.valid {
                    println!("es-chaos: reproduce with: {}", args.command());
                }
            }
            r
        }
        Command::Check { dir } => {
            let r = run::recheck(&dir);
            if let Ok(r) = &r {
                run::summarize(r);
                println!(
                    "es-chaos: {}",
                    if r.valid { "no violation" } else { "VIOLATIONS" }
                );
            }
            r
        }
    };
    match results {
        Ok(r) if r.valid => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("es-chaos: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ranges_parse() {
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert!(parse_duration("1h").is_err());
        assert_eq!(parse_range("8-12").unwrap(), (8, 12));
        assert!(parse_range("0-3").is_err());
        assert!(parse_range("5-3").is_err());
    }
}
