//! Broker flags. Every flag also reads an `ES_`-prefixed environment
//! variable; docs/cli.md lists them all.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::auth::AuthMode;
use crate::limits::{
    CLEANUP_INTERVAL_MS_DEFAULT, CONNECTIONS_MAX_DEFAULT, CONNECTION_IDLE_MS_DEFAULT,
    FETCH_BYTES_MAX_DEFAULT, FRAME_STALL_MS_DEFAULT, GROUPS_MAX_DEFAULT, GROUP_OFFSETS_RETENTION_MS_DEFAULT,
    HTTP_BODY_BYTES_MAX_DEFAULT, INFLIGHT_REQUESTS_MAX_DEFAULT, PARTITIONS_MAX_DEFAULT,
    PRODUCER_ID_EXPIRY_MS_DEFAULT, QUOTA_BURST_MS_DEFAULT, QUOTA_THROTTLE_MAX_MS_DEFAULT,
    REQUEST_SHARD_BYTES_DEFAULT, SPIN_BEFORE_PARK_US_DEFAULT, SPIN_BEFORE_PARK_US_MAX,
    TLS_HANDSHAKE_TIMEOUT_MS_DEFAULT,
};

/// `--help` headings: what every operator sets first, then limits a
/// client cannot pass, then storage defaults, then performance tuning.
pub(crate) const ESSENTIALS: &str = "Essentials";
pub(crate) const LIMITS: &str = "Limits";
const STORAGE: &str = "Storage";
const TUNING: &str = "Tuning";
const SECURITY: &str = "Security";

/// Appended to `--help`.
const AFTER_HELP: &str = "\
Every flag also reads an ES_ environment variable (--data-dir: ES_DATA_DIR). \
A flag on the command line wins over the environment, which wins over the \
--config file, which wins over the built-in default.

Logging: ES_LOG sets what is logged (default info): a level (error, warn, info, \
debug, trace, off) or comma-separated target=level directives, for example \
ES_LOG=es_storage=debug,info. Log lines go to stderr, as text or, with \
--log-format json, one JSON object per line.

Reference: docs/cli.md (every flag), docs/operations.md (running in production).";

#[derive(Parser, Debug, Clone)]
#[command(
    name = "es-broker",
    version,
    about = "es event-streaming broker",
    after_help = AFTER_HELP,
    max_term_width = 100
)]
pub struct Config {
    /// A TOML file of settings: each key is a flag's name without `--`
    /// (`data-dir = "/var/lib/es"`); flags and `ES_*` variables override
    /// it.
    #[arg(long, env = "ES_CONFIG", help_heading = ESSENTIALS, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory holding topics and all other state.
    #[arg(long, env = "ES_DATA_DIR", default_value = "./data", help_heading = ESSENTIALS, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Address of the HTTP + JSON API.
    #[arg(long, env = "ES_HTTP_ADDR", default_value = "127.0.0.1:8080", help_heading = ESSENTIALS, value_name = "ADDR")]
    pub http_addr: SocketAddr,
    /// Address of the binary protocol (docs/protocol.md).
    #[arg(long, env = "ES_BINARY_ADDR", default_value = "127.0.0.1:9090", help_heading = ESSENTIALS, value_name = "ADDR")]
    pub binary_addr: SocketAddr,
    /// PEM file of the certificate chain (leaf first) the client listeners
    /// present. With `--tls-key`, every client listener (HTTP and binary)
    /// speaks TLS only; SIGHUP re-reads both files (docs/security.md).
    #[arg(long, env = "ES_TLS_CERT", help_heading = SECURITY, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM file of the private key of `--tls-cert`'s leaf certificate.
    #[arg(long, env = "ES_TLS_KEY", help_heading = SECURITY, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// PEM file of the CA certificates client certificates must be signed
    /// by: with it, a client without such a certificate is refused during
    /// the TLS handshake. Read at start.
    #[arg(long, env = "ES_TLS_CLIENT_CA", help_heading = SECURITY, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// Milliseconds a client connection has, from its accept, to finish
    /// the TLS handshake; then it is closed.
    #[arg(long, env = "ES_TLS_HANDSHAKE_TIMEOUT_MS", default_value_t = TLS_HANDSHAKE_TIMEOUT_MS_DEFAULT, help_heading = SECURITY, value_name = "MS")]
    pub tls_handshake_timeout_ms: u64,
    /// Number of shards (one thread and io_uring ring each). Default: the
    /// cores available to the process.
    #[arg(long, env = "ES_SHARDS", help_heading = ESSENTIALS, value_name = "N")]
    pub shards: Option<usize>,
    /// This broker's node id (reported as partition leader).
    #[arg(long, env = "ES_NODE_ID", default_value_t = 1, help_heading = ESSENTIALS, value_name = "ID")]
    pub node_id: u64,
    /// How log lines are written to stderr: `text` for people, `json` (one
    /// object per line) for log collectors.
    #[arg(long, env = "ES_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, help_heading = ESSENTIALS)]
    pub log_format: LogFormat,
    /// Largest binary frame, header included, and largest decompressed
    /// payload; a larger frame gets an error frame and the connection closes.
    #[arg(long, env = "ES_FRAME_BYTES_MAX", default_value_t = es_protocol::limits::FRAME_BYTES_MAX_DEFAULT, help_heading = LIMITS, value_name = "BYTES")]
    pub frame_bytes_max: usize,
    /// Requests in flight per binary connection; the broker stops reading a
    /// connection that has this many unanswered.
    #[arg(long, env = "ES_INFLIGHT_REQUESTS_MAX", default_value_t = INFLIGHT_REQUESTS_MAX_DEFAULT, help_heading = LIMITS, value_name = "N")]
    pub inflight_requests_max: usize,
    /// Bytes of client requests and responses each shard holds at once,
    /// granted in turn: large binary requests (frames of 64 KiB or more)
    /// from their header until handled, HTTP request bodies of 64 KiB or
    /// more while they arrive and are handled, and fetch responses (binary
    /// and HTTP) from before they are read until they are written. What
    /// does not fit waits, unread. At least `--frame-bytes-max`.
    #[arg(long, env = "ES_REQUEST_SHARD_BYTES", default_value_t = REQUEST_SHARD_BYTES_DEFAULT, help_heading = LIMITS, value_name = "BYTES")]
    pub request_shard_bytes: usize,
    /// Bytes of fetch responses one binary connection holds at once, from
    /// before they are read until they are written (also charged to
    /// `--request-shard-bytes`): a client that pipelines fetches and reads
    /// slowly cannot take its shard's whole budget. Default: twice
    /// `--fetch-bytes-max`; at least `--fetch-bytes-max`.
    #[arg(long, env = "ES_RESPONSE_CONNECTION_BYTES", help_heading = LIMITS, value_name = "BYTES")]
    pub response_connection_bytes: Option<usize>,
    /// Milliseconds a client connection may stop in the middle of a
    /// transfer before it is closed, freeing what it held: a binary frame
    /// of 64 KiB or more that stops arriving (`frame_stalled`), an HTTP
    /// request body that stops arriving (408), or responses the client
    /// stops reading (binary and HTTP).
    #[arg(long, env = "ES_FRAME_STALL_MS", default_value_t = FRAME_STALL_MS_DEFAULT, help_heading = LIMITS, value_name = "MS")]
    pub frame_stall_ms: u64,
    /// Milliseconds a client connection with no request in flight (a
    /// long-poll counts as in flight) and nothing received may stay open:
    /// then it is closed (Kafka's `connections.max.idle.ms`). HTTP
    /// keep-alive connections close after 30 s idle already, or after this
    /// if shorter.
    #[arg(long, env = "ES_CONNECTION_IDLE_MS", default_value_t = CONNECTION_IDLE_MS_DEFAULT, help_heading = LIMITS, value_name = "MS")]
    pub connection_idle_ms: u64,
    /// Largest HTTP request body accepted; larger gets 413.
    #[arg(long, env = "ES_HTTP_BODY_BYTES_MAX", default_value_t = HTTP_BODY_BYTES_MAX_DEFAULT, help_heading = LIMITS, value_name = "BYTES")]
    pub http_body_bytes_max: usize,
    /// Largest fetch response (`max_bytes` is capped at this).
    #[arg(long, env = "ES_FETCH_BYTES_MAX", default_value_t = FETCH_BYTES_MAX_DEFAULT, help_heading = LIMITS, value_name = "BYTES")]
    pub fetch_bytes_max: usize,
    /// Most client connections open at once, HTTP and binary together,
    /// over all shards; more are closed at once.
    #[arg(long, env = "ES_CONNECTIONS_MAX", default_value_t = CONNECTIONS_MAX_DEFAULT, help_heading = LIMITS, value_name = "N")]
    pub connections_max: usize,
    /// HTTP's share of `--connections-max`; the binary listener gets the
    /// rest, so that neither can lock the other out. Default: half.
    #[arg(long, env = "ES_HTTP_CONNECTIONS_MAX", help_heading = LIMITS, value_name = "N")]
    pub http_connections_max: Option<usize>,
    /// Most consumer groups the broker holds at once (a group exists while
    /// it has members or committed offsets); a join or commit that would
    /// create one more is refused with `too_many_groups` and changes
    /// nothing.
    #[arg(long, env = "ES_GROUPS_MAX", default_value_t = GROUPS_MAX_DEFAULT, help_heading = LIMITS, value_name = "N")]
    pub groups_max: usize,
    /// Milliseconds after which a producer id that wrote nothing (and got
    /// no new epoch) is forgotten by every partition and the registry: a
    /// later produce with it is 404 `unknown_producer_id` (Kafka's
    /// `producer.id.expiration.ms`). Producer state grows with the ids
    /// active within this time. Checked every `--cleanup-interval-ms`.
    #[arg(long, env = "ES_PRODUCER_ID_EXPIRY_MS", default_value_t = PRODUCER_ID_EXPIRY_MS_DEFAULT, help_heading = LIMITS, value_name = "MS")]
    pub producer_id_expiry_ms: u64,
    /// Most file descriptors open for closed (non-active) segments, over
    /// all shards (split evenly): a read of a closed segment opens its log
    /// through a cache of this many, the least recently read closed first.
    /// Active segments are not counted (docs/cli.md, "File descriptors").
    #[arg(long, env = "ES_OPEN_SEGMENTS_MAX", default_value_t = es_storage::limits::OPEN_SEGMENTS_MAX_DEFAULT, help_heading = LIMITS, value_name = "N")]
    pub open_segments_max: usize,
    /// Most partitions the broker holds, over all its topics; a topic
    /// create that would pass it is refused with `too_many_partitions` and
    /// changes nothing. Each partition costs up to 3 file descriptors and
    /// its directory and state (docs/cli.md, "File descriptors").
    #[arg(long, env = "ES_PARTITIONS_MAX", default_value_t = PARTITIONS_MAX_DEFAULT, help_heading = LIMITS, value_name = "N")]
    pub partitions_max: usize,
    /// Segment size for new topics that do not set `segment_bytes`.
    #[arg(long, env = "ES_SEGMENT_BYTES", default_value_t = es_storage::limits::SEGMENT_BYTES_DEFAULT, help_heading = STORAGE, value_name = "BYTES")]
    pub segment_bytes: u64,
    /// Directory of the cold tier, where tiered topics move segments that
    /// retention removes. Default: `<data-dir>/cold`.
    #[arg(long, env = "ES_COLD_DIR", help_heading = STORAGE, value_name = "DIR")]
    pub cold_dir: Option<PathBuf>,
    /// How often each shard runs cleanup (retention, compaction, tiering)
    /// over its partitions.
    #[arg(long, env = "ES_CLEANUP_INTERVAL_MS", default_value_t = CLEANUP_INTERVAL_MS_DEFAULT, help_heading = STORAGE, value_name = "MS")]
    pub cleanup_interval_ms: u64,
    /// How long a consumer group without members keeps its committed
    /// offsets, from its last commit or the moment its last member left
    /// (whichever is later); then the cleanup pass deletes the group
    /// (Kafka's `offsets.retention.minutes`).
    #[arg(long, env = "ES_GROUP_OFFSETS_RETENTION_MS", default_value_t = GROUP_OFFSETS_RETENTION_MS_DEFAULT, help_heading = STORAGE, value_name = "MS")]
    pub group_offsets_retention_ms: u64,
    /// Let start-up drop corrupt data and go on: a damaged batch with
    /// intact ones after it (or any in a sealed segment) is copied to
    /// `<base>.log.corrupt-<unix ms>` and cut off, a missing segment's
    /// offsets are left empty, and new records get offsets past those lost.
    /// Without it such damage stops the start and nothing is changed
    /// (docs/storage.md, "Recovery on open").
    #[arg(long, env = "ES_ACCEPT_DATA_LOSS", help_heading = STORAGE)]
    pub accept_data_loss: bool,
    /// Bytes of newly written records each shard keeps in memory for
    /// consumers that tail its partitions, over all of them together
    /// (segments are written past the page cache); beyond it, the least
    /// recently written partitions are read back from disk.
    #[arg(long, env = "ES_RECENT_WRITES_SHARD_BYTES", default_value_t = es_storage::limits::RECENT_WRITES_SHARD_BYTES_DEFAULT, help_heading = TUNING, value_name = "BYTES")]
    pub recent_writes_shard_bytes: usize,
    /// Microseconds an idle shard keeps polling for work before it parks its
    /// thread. Spinning answers a forwarded request or an fsync completion
    /// sooner, but takes the core from anything else that runs there;
    /// `0` parks at once.
    #[arg(long, env = "ES_SPIN_BEFORE_PARK_US", default_value_t = SPIN_BEFORE_PARK_US_DEFAULT,
          value_parser = clap::value_parser!(u64).range(0..=SPIN_BEFORE_PARK_US_MAX), help_heading = TUNING, value_name = "US")]
    pub spin_before_park_us: u64,
    /// Most threads per shard that make the segment writer's direct writes
    /// and fdatasyncs as blocking calls (docs/storage.md, "Disk threads"):
    /// one starts with the shard, more as jobs find them all busy; at most
    /// this many writes and fsyncs of a shard run at once. `0` keeps them
    /// on io_uring.
    #[arg(long, env = "ES_DISK_THREADS", default_value_t = es_storage::limits::DISK_THREADS_DEFAULT as u64,
          value_parser = clap::value_parser!(u64).range(0..=es_storage::limits::DISK_THREADS_MAX as u64), help_heading = TUNING, value_name = "N")]
    pub disk_threads: u64,
    /// The time slice, in microseconds, each disk thread asks the kernel's
    /// scheduler for (Linux 6.12+; older kernels keep their own): woken for
    /// a write, a thread with a short slice gets a CPU at once instead of
    /// waiting for a spinning shard's slice to end (docs/storage.md, "Disk
    /// threads"). `100`-`100000`, or `0` for the kernel's default.
    #[arg(long, env = "ES_DISK_THREAD_SLICE_US", default_value_t = es_storage::limits::DISK_THREAD_SLICE_US_DEFAULT, help_heading = TUNING, value_name = "US")]
    pub disk_thread_slice_us: u64,
    /// Write a large ProduceBatch (64 KiB or more, no producer id) to its
    /// partition's segment while it still arrives, when this shard owns the
    /// partition (docs/storage.md, "Early writes"): receiving and writing
    /// overlap instead of adding up. `false` writes a batch once it is whole.
    #[arg(long, env = "ES_EARLY_WRITES", default_value_t = true, action = clap::ArgAction::Set, help_heading = TUNING, value_name = "BOOL")]
    pub early_writes: bool,
    /// Move a binary connection to the shard that owns the partitions its
    /// requests go to, once its last several produce batches and fetches
    /// all went to that one other shard (docs/protocol.md, "Connections
    /// move to their partition's shard"). `false` keeps every connection
    /// on the shard that accepted it.
    #[arg(long, env = "ES_MOVE_CONNECTIONS", default_value_t = true, action = clap::ArgAction::Set, help_heading = TUNING, value_name = "BOOL")]
    pub move_connections: bool,
    /// `required`: every request but /health, /ready and /metrics needs an
    /// API key (HTTP `Authorization: Bearer`, the binary Hello's api_key),
    /// and keys are checked against their grants (docs/security.md).
    /// `disabled` serves every request as before.
    #[arg(long, env = "ES_AUTH", value_enum, default_value_t = AuthMode::Disabled, help_heading = SECURITY)]
    pub auth: AuthMode,
    /// A file whose first line is an admin API key: with `--auth required`
    /// on a data dir without api_keys.json, it becomes the first admin
    /// key (instead of one generated into <data-dir>/admin.key); on one
    /// whose api_keys.json lacks its id, it is added as an admin key (the
    /// recovery path for lost admin keys). `ES_ADMIN_KEY` may hold the key
    /// itself instead.
    #[arg(long, env = "ES_ADMIN_KEY_FILE", help_heading = SECURITY, value_name = "FILE")]
    pub admin_key_file: Option<PathBuf>,
    /// Let `--auth required` run on a listener address that is not loopback
    /// without TLS, where API keys cross the network in clear text.
    #[arg(long, env = "ES_ALLOW_PLAINTEXT_AUTH", help_heading = SECURITY)]
    pub allow_plaintext_auth: bool,
    /// Bytes per second of es batches a key may produce when it has no
    /// `produce_bytes_per_sec` of its own; past it, answers are delayed
    /// (docs/security.md, "Quotas"). Default: unlimited. Only with
    /// `--auth required`.
    #[arg(long, env = "ES_QUOTA_PRODUCE_DEFAULT", help_heading = SECURITY, value_name = "BYTES_PER_SEC")]
    pub quota_produce_default: Option<u64>,
    /// Bytes per second of es batches a key may fetch when it has no
    /// `fetch_bytes_per_sec` of its own. Default: unlimited.
    #[arg(long, env = "ES_QUOTA_FETCH_DEFAULT", help_heading = SECURITY, value_name = "BYTES_PER_SEC")]
    pub quota_fetch_default: Option<u64>,
    /// Milliseconds of traffic at a key's rate that pass without delay
    /// (the bucket's depth).
    #[arg(long, env = "ES_QUOTA_BURST_MS", default_value_t = QUOTA_BURST_MS_DEFAULT, help_heading = SECURITY, value_name = "MS")]
    pub quota_burst_ms: u64,
    /// The longest delay one request of a key over its quota gets.
    #[arg(long, env = "ES_QUOTA_THROTTLE_MAX_MS", default_value_t = QUOTA_THROTTLE_MAX_MS_DEFAULT, help_heading = SECURITY, value_name = "MS")]
    pub quota_throttle_max_ms: u64,
    #[command(flatten)]
    pub registry: crate::operate::registry_config::RegistryConfig,
    #[command(flatten)]
    pub kafka: crate::operate::kafka_config::KafkaConfig,
    #[command(flatten)]
    pub cluster: crate::operate::cluster_config::ClusterConfig,
}

/// `--log-format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

impl Config {
    /// The cold tier's directory: `--cold-dir`, or `<data-dir>/cold`.
    pub fn cold_dir(&self) -> PathBuf {
        self.cold_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("cold"))
    }

    /// `--response-connection-bytes`, or its default.
    pub fn response_connection_bytes(&self) -> usize {
        self.response_connection_bytes
            .unwrap_or(self.fetch_bytes_max.saturating_mul(2))
    }

    /// `--http-connections-max`, or its default (half of
    /// `--connections-max`, at least one).
    pub fn http_connections_max(&self) -> usize {
        self.http_connections_max
            .unwrap_or((self.connections_max / 2).max(1))
    }

    /// The binary listener's share of `--connections-max`: what HTTP's
    /// leaves.
    pub fn binary_connections_max(&self) -> usize {
        self.connections_max.saturating_sub(self.http_connections_max())
    }

    /// This shard's share of `--open-segments-max`.
    pub fn open_segments_per_shard(&self) -> usize {
        self.open_segments_max.div_ceil(self.shard_count()).max(1)
    }

    /// The shard count to run with.
    pub fn shard_count(&self) -> usize {
        self.shards
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    /// Makes `--data-dir` and `--cold-dir` absolute (relative to the
    /// working directory): the shards' file operations need absolute paths.
    pub fn absolutize(&mut self) -> Result<(), String> {
        let abs = |p: &PathBuf, flag: &str| {
            std::path::absolute(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
        };
        self.data_dir = abs(&self.data_dir, "--data-dir")?;
        if let Some(cold) = &self.cold_dir {
            self.cold_dir = Some(abs(cold, "--cold-dir")?);
        }
        Ok(())
    }

    /// The quota settings every charge uses (auth/quota.rs).
    pub fn quotas(&self) -> crate::auth::quota::Settings {
        crate::auth::quota::Settings {
            produce_default: self.quota_produce_default,
            fetch_default: self.quota_fetch_default,
            burst_ms: self.quota_burst_ms,
            throttle_max_ms: self.quota_throttle_max_ms,
        }
    }

    /// Whether the client listeners speak TLS (`--tls-cert` with its key:
    /// `validate_tls` refuses one without the other).
    pub fn client_tls_configured(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }
}
