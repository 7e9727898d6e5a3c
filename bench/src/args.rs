//! Command line: one subcommand per load, one set of options for all.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand};
use es_protocol::client::tls::TlsOptions;
use es_protocol::client::Options as ClientOptions;

#[derive(Parser, Debug)]
#[command(
    name = "es-bench",
    version,
    about = "es benchmark harness: produce, consume and end-to-end load against a broker, and the raw disk"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// API key (esk_...) every connection sends in its handshake: needed
    /// when the broker runs with --auth required.
    #[arg(long, env = "ES_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Producers only: records/s, MB/s and per-request latency, send to fsynced ack.
    Produce(Options),
    /// Sequential fetches from the start of each partition (pre-filled first).
    Consume(Options),
    /// Producers and consumers at once: latency from send to receipt.
    E2e(Options),
    /// The produce write pattern straight to files: append + fdatasync per write.
    Disk(Options),
    /// The same request many thousand times: the broker's memory and
    /// descriptors per operation, per workload (soak.rs).
    Soak(crate::soak::SoakOptions),
}

/// Which load a run measures.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Produce,
    Consume,
    E2e,
    Disk,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Produce => "produce",
            Mode::Consume => "consume",
            Mode::E2e => "e2e",
            Mode::Disk => "disk",
        }
    }
}

impl Command {
    pub fn split(self) -> (Mode, Options) {
        match self {
            Command::Produce(o) => (Mode::Produce, o),
            Command::Consume(o) => (Mode::Consume, o),
            Command::E2e(o) => (Mode::E2e, o),
            Command::Disk(o) => (Mode::Disk, o),
            Command::Soak(_) => unreachable!("es-bench soak runs on its own (main.rs)"),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct Options {
    /// Broker binary-protocol address (ignored with --start-broker). For a
    /// cluster, several (comma-separated or repeated): the first that takes
    /// a connection is asked for the topic's leaders, and each producer
    /// connects to its partition's leader.
    #[arg(
        long,
        env = "ES_BENCH_BROKER",
        default_value = "127.0.0.1:9090",
        value_delimiter = ','
    )]
    pub broker: Vec<String>,
    /// Replication factor of the topic es-bench creates (a cluster's
    /// --default-replication-factor when not given).
    #[arg(long, env = "ES_BENCH_REPLICATION_FACTOR")]
    pub replication_factor: Option<u32>,
    /// Start an es-broker (from this binary's directory) on a temporary
    /// directory, and stop it at the end.
    #[arg(long)]
    pub start_broker: bool,
    /// The es-broker binary for --start-broker (default: next to es-bench).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// Shard counts for --start-broker, comma separated: each runs the load
    /// on a fresh broker over the same data, and the report compares them
    /// with the first (e.g. `--shards 1,2`). Default: the cores es-bench
    /// may use.
    #[arg(long, value_delimiter = ',')]
    pub shards: Vec<usize>,
    /// Where the temporary directory goes (broker data, disk files): pick
    /// the disk to measure. Default: the system temp directory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Topic, created with --partitions if missing.
    #[arg(long, default_value = "bench")]
    pub topic: String,
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Producer connections; producer i writes partition i % partitions.
    /// For `disk`, the number of writer threads.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Threads the producer connections are spread over, each driving its
    /// connections with ppoll(2) as a client library's network thread
    /// does (default: the cores es-bench may use, at most --producers).
    /// With --gzip, and in e2e, each producer has a thread of its own.
    #[arg(long)]
    pub producer_threads: Option<usize>,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Records per produce request (for `disk`: write size = batch x record-size).
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Produce requests in flight per connection.
    #[arg(long, default_value_t = 4)]
    pub inflight: usize,
    /// Seconds each measured phase runs.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of load before each produce, e2e and disk phase that are
    /// not measured: past a disk's write burst, the steady state (consume
    /// has none).
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Target records/s over all producers (paced sends; latency is measured
    /// from each request's scheduled send time), or `half`: first run at the
    /// maximum rate, then again paced at half of what it reached.
    #[arg(long)]
    pub rate: Option<Rate>,
    /// Gzip every request frame (the broker answers in kind).
    #[arg(long)]
    pub gzip: bool,
    /// Speak TLS to the broker (es-broker --tls-cert), trusting the system's
    /// CA certificates unless --tls-ca is given. Every connection then goes
    /// through the client library, as with --gzip. Not with --start-broker.
    #[arg(long, env = "ES_TLS")]
    pub tls: bool,
    /// PEM file of the CA certificates that signed the broker's
    /// certificate; implies --tls.
    #[arg(long, env = "ES_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Print one JSON object with every figure instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Run `disk` first with the same writers and write size, in the same
    /// directory, and report the broker as a share of it.
    #[arg(long)]
    pub compare_disk: bool,
    /// With --compare-disk (produce): measure the disk and the broker in
    /// this many alternating slices of --duration/N each (disk, broker,
    /// disk, ...; every slice after the first of each side has up to 1 s
    /// of unmeasured lead-in) and add each side's slices up, so both see
    /// the same disk even where its speed wanders from second to second.
    /// 1: the disk's phase, then the broker's.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// How `disk` writes: `direct` (O_DIRECT, page-aligned writes that
    /// rewrite the partial last page, as the broker writes its segments) or
    /// `buffered` (through the page cache).
    #[arg(long, value_enum, default_value_t = DiskIo::Direct)]
    pub disk_io: DiskIo,
    /// consume: MiB the topic must hold before fetching (topped up by
    /// producing if it holds less).
    #[arg(long, default_value_t = 1024)]
    pub prefill_mb: u64,
    /// consume and e2e: max_bytes of each fetch request (1 MiB, as Kafka's
    /// max.partition.fetch.bytes: a reply that fits in the CPU caches is
    /// faster to copy than a larger one).
    #[arg(long, default_value_t = 1 << 20)]
    pub fetch_bytes: u32,
    /// No live progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

/// `--disk-io`: how the disk phase writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DiskIo {
    Direct,
    Buffered,
}

/// `--rate`: records/s, or `half` of the measured maximum.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Rate {
    PerSecond(f64),
    HalfOfMax,
}

impl FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        if s == "half" {
            return Ok(Rate::HalfOfMax);
        }
        match s.parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 => Ok(Rate::PerSecond(r)),
            _ => Err(format!(
                "--rate takes records per second (> 0) or `half`, not {s:?}"
            )),
        }
    }
}

impl Options {
    /// Checks bounds before anything starts.
    /// Threads for the lean producers: --producer-threads, or the cores
    /// es-bench may use.
    pub fn producer_threads(&self) -> usize {
        self.producer_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    pub fn validate(&self, mode: Mode) -> Result<(), String> {
        if self.partitions == 0 || self.producers == 0 || self.batch == 0 || self.inflight == 0 {
            return Err("--partitions, --producers, --batch and --inflight must be at least 1".into());
        }
        if self.producer_threads == Some(0) {
            return Err("--producer-threads must be at least 1".into());
        }
        if self.record_size == 0 {
            return Err("--record-size must be at least 1".into());
        }
        if mode == Mode::E2e && self.record_size < crate::payload::STAMP_BYTES {
            return Err(format!(
                "e2e embeds the send time in each value: --record-size must be at least {}",
                crate::payload::STAMP_BYTES
            ));
        }
        if !(self.duration.is_finite() && self.duration > 0.0) {
            return Err("--duration must be a positive number of seconds".into());
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            return Err("--warmup must be zero or a positive number of seconds".into());
        }
        if self.shards.contains(&0) {
            return Err("--shards must be at least 1".into());
        }
        if self.shards.len() > 1 && !self.start_broker {
            return Err("several --shards need --start-broker".into());
        }
        if self.rate == Some(Rate::HalfOfMax) && mode != Mode::Produce {
            return Err("--rate half is for `produce`; give e2e a number of records/s".into());
        }
        if self.rounds == 0 {
            return Err("--rounds must be at least 1".into());
        }
        if self.rounds > 1 && !(mode == Mode::Produce && self.compare_disk) {
            return Err(
                "--rounds alternates the disk with the broker: it is for `produce --compare-disk`".into(),
            );
        }
        if self.fetch_bytes == 0 {
            return Err("--fetch-bytes must be positive".into());
        }
        if self.start_broker && (self.tls || self.tls_ca.is_some()) {
            return Err(
                "--start-broker starts a plaintext broker: for --tls, start es-broker with --tls-cert \
                 and --tls-key yourself and give its address with --broker"
                    .into(),
            );
        }
        Ok(())
    }

    /// How to speak TLS to the broker (`--tls`, `--tls-ca`), or `None`:
    /// its certificate must carry the host of `--broker`.
    pub fn tls_options(&self) -> Result<Option<TlsOptions>, String> {
        if !self.tls && self.tls_ca.is_none() {
            return Ok(None);
        }
        let mut tls = TlsOptions::new(self.tls_ca.as_deref()).map_err(|e| match &self.tls_ca {
            Some(_) => format!("--tls-ca {e}"),
            None => format!("--tls: {e}; give the broker's CA with --tls-ca FILE"),
        })?;
        // Checked against the host of each address connected to.
        tls.server_name = None;
        Ok(Some(tls))
    }

    /// The broker addresses given, each once, in order.
    pub fn brokers(&self) -> Vec<String> {
        es_protocol::client::brokers::parse_list(&self.broker)
    }

    /// The broker addresses, for reports.
    pub fn broker_list(&self) -> String {
        self.brokers().join(",")
    }

    /// Options of a client-library connection: TLS as asked.
    pub fn client_options(&self) -> Result<ClientOptions, String> {
        Ok(ClientOptions {
            tls: self.tls_options()?,
            ..crate::connect::options()
        })
    }
}
