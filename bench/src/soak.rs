//! `es-bench soak`: memory per operation under churn (issue 19). Each
//! workload repeats one ordinary request a fixed number of times against
//! a broker (a fresh one per workload with `--start-broker`, or one
//! already running, named by `--pid`), and the broker's resident memory
//! and open descriptors are read from `/proc/<pid>` before, after the
//! warm-up and every `--sample-every` operations. The verdict is growth
//! per operation after the warm-up, never time: "flat" is under
//! [`FLAT_KIB_PER_10K`] per 10,000 operations.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use es_protocol::client::Client;
use es_protocol::requests::produce::ProduceRecord;

use crate::broker::{self, Broker};
use crate::footprint::{self, Footprint};
use crate::scratch::Scratch;
use crate::workload::{Target, Worker, Workload, PRODUCE_VALUE_BYTES};
use crate::{interrupt, soak_report, topic, trend};

/// Growth after warm-up below which a workload is flat: 512 KiB per
/// 10,000 operations, about 52 bytes per operation (issue 19).
pub const FLAT_KIB_PER_10K: f64 = 512.0;

#[derive(Args, Debug, Clone)]
pub struct SoakOptions {
    /// Broker binary-protocol address (ignored with --start-broker).
    #[arg(long, env = "ES_BENCH_BROKER", default_value = "127.0.0.1:9090")]
    pub broker: String,
    /// The broker's HTTP address (ignored with --start-broker).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub http: String,
    /// Process id of the running broker at --broker, whose /proc/PID is
    /// read (needed without --start-broker).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Start a fresh es-broker (from this binary's directory) on a
    /// temporary directory for each workload, and stop it after.
    #[arg(long)]
    pub start_broker: bool,
    /// The es-broker binary for --start-broker (default: next to es-bench).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Shards of a started broker (default: the cores es-bench may use).
    #[arg(long)]
    pub shards: Option<usize>,
    /// Let a started broker's allocator back its heap with transparent
    /// huge pages, as it does by default. Without this flag es-bench
    /// starts it with `MIMALLOC_ALLOW_THP=0`, so that its resident memory
    /// moves by 4 KiB pages rather than 2 MiB ones: a 2 MiB step is 200
    /// bytes per operation over 10,000 operations, more than the growth
    /// the soak has to tell from none.
    #[arg(long)]
    pub huge_pages: bool,
    /// The `--groups-max` of a broker es-bench starts. group-commit-new
    /// makes a new group with every operation: once the broker holds this
    /// many, its commits are refused (`too_many_groups`), and what the
    /// workload measures from then on is that a broker at its limit keeps
    /// nothing more. The default is the default --warmup: the warm-up fills
    /// the broker, the measured operations are all refused.
    #[arg(long, default_value_t = 10_000)]
    pub groups_max: u64,
    /// Where the temporary directory goes. Default: the system temp directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Workloads to run, comma separated (default: all, in this order).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workload: Vec<Workload>,
    /// Operations per workload measured after the warm-up.
    #[arg(long, default_value_t = 100_000)]
    pub ops: u64,
    /// Operations per workload before the measurement starts: buffers,
    /// caches and the allocator's pools filled.
    #[arg(long, default_value_t = 10_000)]
    pub warmup: u64,
    /// Operations between two readings of the broker.
    #[arg(long, default_value_t = 10_000)]
    pub sample_every: u64,
    /// Client connections (one thread each) a workload runs at once.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Topic the workloads use (partition 0), created if missing.
    #[arg(long, default_value = "soak")]
    pub topic: String,
    /// Records partition 0 must hold before a workload: binary-fetch reads
    /// them, and 10,000 fill the broker's memory of recent writes (1 MiB
    /// a partition), which would otherwise grow during the first
    /// produces.
    #[arg(long, default_value_t = 10_000)]
    pub prefill: u64,
    /// Print one JSON object with every reading instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl SoakOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.ops == 0 || self.sample_every == 0 || self.connections == 0 {
            return Err("--ops, --sample-every and --connections must be at least 1".into());
        }
        if !self.start_broker && self.pid.is_none() {
            return Err("soak reads the broker's memory from /proc: give the running broker's --pid, or --start-broker".into());
        }
        if self.shards == Some(0) {
            return Err("--shards must be at least 1".into());
        }
        Ok(())
    }

    /// The workloads to run, in order.
    pub fn workloads(&self) -> Vec<Workload> {
        if self.workload.is_empty() {
            Workload::ALL.to_vec()
        } else {
            self.workload.clone()
        }
    }
}

/// One reading of the broker.
#[derive(Copy, Clone, Debug)]
pub struct Sample {
    /// Operations done by then, warm-up included.
    pub ops: u64,
    pub at: Footprint,
}

/// One workload's run.
pub struct Outcome {
    pub workload: Workload,
    pub connections: usize,
    /// Before the first operation.
    pub before: Footprint,
    /// Operations of the warm-up (the last warm-up sample is at this count).
    pub warmup: u64,
    /// Every reading after `before`, in order.
    pub samples: Vec<Sample>,
    pub seconds: f64,
    /// The broker that ran it, when es-bench started one.
    pub pid: u32,
    /// Operations the broker refused as its limit allows (group-commit-new
    /// at `--groups-max`), counted as done.
    pub refused: u64,
}

impl Outcome {
    /// Readings from the end of the warm-up on, as (operations since the
    /// warm-up, bytes).
    fn measured(&self, of: impl Fn(&Footprint) -> u64) -> Vec<(f64, f64)> {
        let start = (self.warmup == 0).then_some((0.0, of(&self.before) as f64));
        start
            .into_iter()
            .chain(
                self.samples
                    .iter()
                    .filter(|s| s.ops >= self.warmup)
                    .map(|s| ((s.ops - self.warmup) as f64, of(&s.at) as f64)),
            )
            .collect()
    }

    /// Operations measured after the warm-up.
    pub fn measured_ops(&self) -> u64 {
        self.samples
            .last()
            .map_or(0, |s| s.ops.saturating_sub(self.warmup))
    }

    /// The reading at the end of the warm-up.
    pub fn warm(&self) -> Option<Footprint> {
        if self.warmup == 0 {
            return Some(self.before);
        }
        self.samples.iter().find(|s| s.ops == self.warmup).map(|s| s.at)
    }

    /// Resident bytes gained per operation after the warm-up, the
    /// verdict's figure: the difference of the medians of the first and
    /// last thirds of the readings over the operations between them. A
    /// reading caught high or low (memory just freed that the allocator
    /// has not yet given back, a buffer in use at that instant) cannot
    /// move a median; a leak moves every reading after it.
    pub fn bytes_per_op(&self) -> Option<f64> {
        trend::median_slope(&self.measured(|f| f.rss_bytes))
    }

    /// The slope of the least-squares line through the same readings
    /// (uses every reading, so one odd reading tilts it by its share).
    pub fn fit_bytes_per_op(&self) -> Option<f64> {
        trend::slope(&self.measured(|f| f.rss_bytes))
    }

    /// Descriptors gained per operation after the warm-up (as
    /// [`Self::bytes_per_op`]).
    pub fn fds_per_op(&self) -> Option<f64> {
        trend::median_slope(&self.measured(|f| f.fds))
    }

    pub fn kib_per_10k(&self) -> Option<f64> {
        self.bytes_per_op().map(|b| b * 10_000.0 / 1024.0)
    }

    pub fn flat(&self) -> Option<bool> {
        self.kib_per_10k().map(|k| k < FLAT_KIB_PER_10K)
    }
}

/// `es-bench soak`: runs, prints, and returns the exit code.
pub fn main(opts: &SoakOptions) -> i32 {
    if let Err(e) = opts.validate() {
        eprintln!("es-bench: {e}");
        return 2;
    }
    interrupt::install();
    let outcomes = match run(opts) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("es-bench: {e}");
            return 1;
        }
    };
    if opts.json {
        println!("{}", soak_report::json(opts, &outcomes));
    } else {
        print!("{}", soak_report::table(opts, &outcomes));
    }
    if interrupt::requested() {
        eprintln!("es-bench: interrupted; the figures cover what ran");
        return 130;
    }
    0
}

fn run(opts: &SoakOptions) -> Result<Vec<Outcome>, String> {
    let scratch = Scratch::create(opts.data_dir.as_deref())?;
    let mut outcomes = Vec::new();
    for workload in opts.workloads() {
        if interrupt::requested() {
            break;
        }
        let outcome = if opts.start_broker {
            let bin = match &opts.broker_bin {
                Some(b) => b.clone(),
                None => broker::default_binary()?,
            };
            let shards = opts
                .shards
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let dir = scratch.path().join(workload.name());
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let env: &[(&str, &str)] = if opts.huge_pages {
                &[]
            } else {
                &[("MIMALLOC_ALLOW_THP", "0")]
            };
            let args = ["--groups-max".to_string(), opts.groups_max.to_string()];
            let started = Broker::start_with_env(&bin, &dir, shards, env, &args)?;
            soak(workload, opts, &started.addr, &started.http, started.pid()).map_err(|e| {
                format!(
                    "{}: {e}\nbroker log (last lines):\n{}",
                    workload.name(),
                    started.log_tail()
                )
            })?
        } else {
            let pid = opts.pid.expect("validated: --pid without --start-broker");
            soak(workload, opts, &opts.broker, &opts.http, pid)
                .map_err(|e| format!("{}: {e}", workload.name()))?
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// One workload against the broker `pid` at `binary` and `http`.
fn soak(
    workload: Workload,
    opts: &SoakOptions,
    binary: &str,
    http: &str,
    pid: u32,
) -> Result<Outcome, String> {
    let records = prepare(opts, binary)?;
    let target = Target {
        binary: binary.to_string(),
        http: http.to_string(),
        topic: opts.topic.clone(),
        records,
        refused: Default::default(),
    };
    let before = footprint::read(pid)?;
    let mut workers = (0..opts.connections)
        .map(|i| workload.worker(&target, i))
        .collect::<Result<Vec<_>, String>>()?;
    let mut outcome = Outcome {
        workload,
        connections: opts.connections,
        before,
        warmup: opts.warmup,
        samples: Vec::new(),
        seconds: 0.0,
        pid,
        refused: 0,
    };
    let start = Instant::now();
    let total = opts.warmup + opts.ops;
    let mut done = 0;
    // Readings every --sample-every operations, and one where the
    // warm-up ends.
    while done < total && !interrupt::requested() {
        let next_stop = if done < opts.warmup {
            opts.warmup.min(done + opts.sample_every)
        } else {
            total.min(done + opts.sample_every)
        };
        done += run_ops(&mut workers, next_stop - done)?;
        let sample = Sample {
            ops: done,
            at: footprint::read(pid)?,
        };
        if !opts.quiet {
            eprintln!(
                "soak {}: {done}/{total} operations, RSS {:.1} MiB, {} fds",
                workload.name(),
                sample.at.rss_bytes as f64 / (1 << 20) as f64,
                sample.at.fds
            );
        }
        outcome.samples.push(sample);
    }
    outcome.seconds = start.elapsed().as_secs_f64();
    outcome.refused = target.refused.load(std::sync::atomic::Ordering::Relaxed);
    Ok(outcome)
}

/// Creates the topic if missing, tops partition 0 up to --prefill records,
/// and returns how many it holds.
fn prepare(opts: &SoakOptions, binary: &str) -> Result<u64, String> {
    let client = Client::connect(binary, crate::connect::options())
        .map_err(|e| format!("connect to {binary}: {e}"))?;
    topic::ensure(&client, &opts.topic, 1, None)?;
    let mut hw = topic::high_watermarks(&client, &opts.topic)?[0];
    while hw < opts.prefill {
        let n = (opts.prefill - hw).min(100);
        let records = (0..n)
            .map(|_| ProduceRecord {
                partition: Some(0),
                timestamp_ms: None,
                key: None,
                value: vec![b'p'; PRODUCE_VALUE_BYTES],
            })
            .collect();
        client
            .produce(&opts.topic, records)
            .map_err(|e| format!("prefill {}: {e}", opts.topic))?;
        hw += n;
    }
    Ok(hw)
}

/// `n` operations spread over the workers, each on its own thread; how
/// many were done (fewer when interrupted).
fn run_ops(workers: &mut [Box<dyn Worker>], n: u64) -> Result<u64, String> {
    let k = workers.len() as u64;
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(i, w)| {
                let share = n / k + u64::from((i as u64) < n % k);
                s.spawn(move || -> Result<u64, String> {
                    for done in 0..share {
                        if interrupt::requested() {
                            return Ok(done);
                        }
                        w.once()?;
                    }
                    Ok(share)
                })
            })
            .collect();
        let mut done = 0;
        for h in handles {
            done += h.join().map_err(|_| "a soak worker panicked".to_string())??;
        }
        Ok(done)
    })
}
