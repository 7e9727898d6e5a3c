//! Broker flags. Every flag also reads an `ES_`-prefixed environment
//! variable; docs/cli.md lists them all.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// Default HTTP request body limit: 16 MiB holds a produce of thousands of
/// 1 KiB records while bounding what one request can make a shard buffer.
pub const HTTP_BODY_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// Default fetch response limit: 16 MiB per request.
pub const FETCH_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// Default requests in flight per binary connection: deep enough for a
/// pipelining producer to keep group commit busy, small enough to bound a
/// connection's memory (in-flight x frame size).
pub const INFLIGHT_REQUESTS_MAX_DEFAULT: usize = 256;
/// Default connection limit for the whole broker (split evenly over shards).
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Default `--request-shard-bytes`: 16 requests of the largest default
/// frame (16 MiB) per shard at once.
pub const REQUEST_SHARD_BYTES_DEFAULT: usize = 256 << 20;
/// Default `--frame-stall-ms`: 30 s.
pub const FRAME_STALL_MS_DEFAULT: u64 = 30_000;

#[derive(Parser, Debug, Clone)]
#[command(name = "es-broker", version, about = "es event-streaming broker")]
pub struct Config {
    /// Directory holding topics and all other state.
    #[arg(long, env = "ES_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Address of the HTTP + JSON API.
    #[arg(long, env = "ES_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    pub http_addr: SocketAddr,
    /// Address of the binary protocol (docs/protocol.md).
    #[arg(long, env = "ES_BINARY_ADDR", default_value = "127.0.0.1:9090")]
    pub binary_addr: SocketAddr,
    /// Largest binary frame, header included, and largest decompressed
    /// payload; a larger frame gets an error frame and the connection closes.
    #[arg(long, env = "ES_FRAME_BYTES_MAX", default_value_t = es_protocol::FRAME_BYTES_MAX_DEFAULT)]
    pub frame_bytes_max: usize,
    /// Requests in flight per binary connection; the broker stops reading a
    /// connection that has this many unanswered.
    #[arg(long, env = "ES_INFLIGHT_REQUESTS_MAX", default_value_t = INFLIGHT_REQUESTS_MAX_DEFAULT)]
    pub inflight_requests_max: usize,
    /// Number of shards (one thread and io_uring each). Default: the cores
    /// available to the process.
    #[arg(long, env = "ES_SHARDS")]
    pub shards: Option<usize>,
    /// This broker's node id (reported as partition leader).
    #[arg(long, env = "ES_NODE_ID", default_value_t = 1)]
    pub node_id: u64,
    /// Bytes of large binary requests (frames of 64 KiB or more after the
    /// handshake, `CHARGED_FRAME_BYTES_MIN`) each shard holds at once, from
    /// the moment a frame's header arrives until its request is handled: a
    /// connection whose next such frame does not fit waits, unread, until
    /// the large frames that asked before it are handled (in turn). At
    /// least `--frame-bytes-max`.
    #[arg(long, env = "ES_REQUEST_SHARD_BYTES", default_value_t = REQUEST_SHARD_BYTES_DEFAULT)]
    pub request_shard_bytes: usize,
    /// Milliseconds a binary connection in the middle of a frame of 64 KiB
    /// or more may send nothing before it is closed with `frame_stalled`
    /// (such a frame holds room in `--request-shard-bytes`).
    #[arg(long, env = "ES_FRAME_STALL_MS", default_value_t = FRAME_STALL_MS_DEFAULT)]
    pub frame_stall_ms: u64,
    /// Largest HTTP request body accepted; larger gets 413.
    #[arg(long, env = "ES_HTTP_BODY_BYTES_MAX", default_value_t = HTTP_BODY_BYTES_MAX_DEFAULT)]
    pub http_body_bytes_max: usize,
    /// Largest fetch response (`max_bytes` is capped at this).
    #[arg(long, env = "ES_FETCH_BYTES_MAX", default_value_t = FETCH_BYTES_MAX_DEFAULT)]
    pub fetch_bytes_max: usize,
    /// Most client connections open at once, over all shards; more are
    /// closed at once.
    #[arg(long, env = "ES_CONNECTIONS_MAX", default_value_t = CONNECTIONS_MAX_DEFAULT)]
    pub connections_max: usize,
    /// Segment size for new topics that do not set `segment_bytes`.
    #[arg(long, env = "ES_SEGMENT_BYTES", default_value_t = es_storage::SEGMENT_BYTES_DEFAULT)]
    pub segment_bytes: u64,
    /// Bytes of newly written records each shard keeps in memory for
    /// consumers that tail its partitions, over all of them together
    /// (segments are written past the page cache); beyond it, the least
    /// recently written partitions are read back from disk.
    #[arg(long, env = "ES_RECENT_WRITES_SHARD_BYTES", default_value_t = es_storage::RECENT_WRITES_SHARD_BYTES_DEFAULT)]
    pub recent_writes_shard_bytes: usize,
    /// Microseconds an idle shard keeps polling for work before it parks its
    /// thread. Spinning answers a forwarded request or an fsync completion
    /// sooner, but takes the core from anything else that runs there;
    /// `0` parks at once.
    #[arg(long, env = "ES_SPIN_BEFORE_PARK_US", default_value_t = SPIN_BEFORE_PARK_US_DEFAULT,
          value_parser = clap::value_parser!(u64).range(0..=SPIN_BEFORE_PARK_US_MAX))]
    pub spin_before_park_us: u64,
    /// Most threads per shard that make the segment writer's direct writes
    /// and fdatasyncs as blocking calls (docs/storage.md, "Disk threads"):
    /// they finish sooner and steadier there than through io_uring's
    /// kernel workers. One starts with the shard, more as jobs find them
    /// all busy; at most this many writes and fsyncs of a shard run at
    /// once. `0` keeps them on io_uring.
    #[arg(long, env = "ES_DISK_THREADS", default_value_t = es_storage::DISK_THREADS_DEFAULT as u64,
          value_parser = clap::value_parser!(u64).range(0..=es_storage::DISK_THREADS_MAX as u64))]
    pub disk_threads: u64,
    /// The time slice, in microseconds, each disk thread asks the kernel's
    /// scheduler for (Linux 6.12+; older kernels keep their own): woken for
    /// a write, a thread with a short slice gets a CPU at once instead of
    /// waiting for a spinning shard's slice (1.4 ms here) to end
    /// (docs/storage.md, "Disk threads"). `100`-`100000`, or `0` for the
    /// kernel's default.
    #[arg(long, env = "ES_DISK_THREAD_SLICE_US", default_value_t = es_storage::DISK_THREAD_SLICE_US_DEFAULT)]
    pub disk_thread_slice_us: u64,
    /// Directory of the cold tier, where tiered topics move segments that
    /// retention removes. Default: `<data-dir>/cold`.
    #[arg(long, env = "ES_COLD_DIR")]
    pub cold_dir: Option<PathBuf>,
    /// How often each shard runs cleanup (retention, compaction, tiering)
    /// over its partitions.
    #[arg(long, env = "ES_CLEANUP_INTERVAL_MS", default_value_t = CLEANUP_INTERVAL_MS_DEFAULT)]
    pub cleanup_interval_ms: u64,
    /// Write a large ProduceBatch (64 KiB or more, no producer id) to its
    /// partition's segment while it still arrives, when this shard owns the
    /// partition (docs/storage.md, "Early writes"): receiving and writing
    /// overlap instead of adding up. `false` writes a batch once it is whole.
    #[arg(long, env = "ES_EARLY_WRITES", default_value_t = true, action = clap::ArgAction::Set)]
    pub early_writes: bool,
    /// Move a binary connection to the shard that owns the partitions its
    /// requests go to, once its last several produce batches and fetches
    /// all went to that one other shard (docs/protocol.md, "Connections
    /// move to their partition's shard"). `false` keeps every connection
    /// on the shard that accepted it.
    #[arg(long, env = "ES_MOVE_CONNECTIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub move_connections: bool,
}

/// Default of `--spin-before-park-us`: waking a parked thread costs far
/// more than a forwarded request or an fsync completion takes (~200 us
/// against ~35 us per forwarded request, measured here).
pub const SPIN_BEFORE_PARK_US_DEFAULT: u64 = 200;
/// Longest spin allowed: past a second, a shard might as well never park.
pub const SPIN_BEFORE_PARK_US_MAX: u64 = 1_000_000;

/// Default cleanup interval: 30 s keeps retention within half a minute of
/// its limits while a pass over partitions with nothing due costs nothing
/// but a look at each one's segments.
pub const CLEANUP_INTERVAL_MS_DEFAULT: u64 = 30_000;
/// Longest cleanup interval (one day): past it, retention would lag its
/// limits by more than most limits are long.
pub const CLEANUP_INTERVAL_MS_MAX: u64 = 24 * 60 * 60 * 1000;

impl Config {
    /// The cold tier's directory: `--cold-dir`, or `<data-dir>/cold`.
    pub fn cold_dir(&self) -> PathBuf {
        self.cold_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("cold"))
    }

    /// The shard count to run with.
    pub fn shard_count(&self) -> usize {
        self.shards
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    /// Checks the flags' bounds before anything starts.
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

    pub fn validate(&self) -> Result<(), String> {
        if self.shards == Some(0) {
            return Err("--shards must be at least 1".into());
        }
        if self.shard_count() > SHARDS_MAX {
            return Err(format!("--shards must be at most {SHARDS_MAX}"));
        }
        if self.http_body_bytes_max == 0 || self.fetch_bytes_max == 0 || self.connections_max == 0 {
            return Err(
                "--http-body-bytes-max, --fetch-bytes-max and --connections-max must be positive".into(),
            );
        }
        if self.frame_bytes_max < es_protocol::HEADER_BYTES + 64
            || self.frame_bytes_max > es_storage::batch::BATCH_BYTES_MAX
        {
            return Err(format!(
                "--frame-bytes-max must be in {}..={}",
                es_protocol::HEADER_BYTES + 64,
                es_storage::batch::BATCH_BYTES_MAX
            ));
        }
        if self.frame_stall_ms == 0 {
            return Err("--frame-stall-ms must be positive".into());
        }
        if self.request_shard_bytes < self.frame_bytes_max {
            return Err(format!(
                "--request-shard-bytes ({}) must be at least --frame-bytes-max ({}): a largest frame must fit",
                self.request_shard_bytes, self.frame_bytes_max
            ));
        }
        if self.inflight_requests_max == 0 || self.inflight_requests_max > INFLIGHT_REQUESTS_MAX_LIMIT {
            return Err(format!(
                "--inflight-requests-max must be in 1..={INFLIGHT_REQUESTS_MAX_LIMIT}"
            ));
        }
        if self.http_body_bytes_max > es_storage::batch::BATCH_BYTES_MAX {
            return Err(format!(
                "--http-body-bytes-max must be at most {} (the largest record batch)",
                es_storage::batch::BATCH_BYTES_MAX
            ));
        }
        if self.segment_bytes == 0 || self.segment_bytes > es_storage::SEGMENT_BYTES_MAX {
            return Err(format!(
                "--segment-bytes must be in 1..={}",
                es_storage::SEGMENT_BYTES_MAX
            ));
        }
        if self.cleanup_interval_ms == 0 || self.cleanup_interval_ms > CLEANUP_INTERVAL_MS_MAX {
            return Err(format!(
                "--cleanup-interval-ms must be in 1..={CLEANUP_INTERVAL_MS_MAX}"
            ));
        }
        let slices = es_storage::THREAD_SLICE_US_MIN..=es_storage::THREAD_SLICE_US_MAX;
        if self.disk_thread_slice_us != 0 && !slices.contains(&self.disk_thread_slice_us) {
            return Err(format!(
                "--disk-thread-slice-us must be 0 (the kernel's default) or in {}..={}",
                slices.start(),
                slices.end()
            ));
        }
        if self.cold_dir().starts_with(self.data_dir.join("topics")) {
            return Err("--cold-dir must not be inside <data-dir>/topics".into());
        }
        Ok(())
    }
}

/// Largest --inflight-requests-max.
pub const INFLIGHT_REQUESTS_MAX_LIMIT: usize = 65_536;

/// Most shards: glommio needs locked memory per executor, and beyond this the
/// mesh of cross-shard channels (n^2) stops paying off.
pub const SHARDS_MAX: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn validate(args: &[&str]) -> Result<(), String> {
        let mut argv = vec!["es-broker"];
        argv.extend_from_slice(args);
        Config::try_parse_from(argv).expect("parses").validate()
    }

    #[test]
    fn the_request_budget_holds_a_largest_frame() {
        assert!(validate(&[]).is_ok(), "the defaults");
        let e = validate(&["--frame-bytes-max", "2097152", "--request-shard-bytes", "1048576"]).unwrap_err();
        assert!(
            e.contains("--request-shard-bytes") && e.contains("--frame-bytes-max"),
            "{e}"
        );
        assert!(validate(&["--frame-bytes-max", "1048576", "--request-shard-bytes", "1048576"]).is_ok());
    }

    #[test]
    fn a_disk_thread_slice_is_one_linux_grants_or_none() {
        for ok in ["0", "100", "2000", "100000"] {
            assert!(validate(&["--disk-thread-slice-us", ok]).is_ok(), "{ok}");
        }
        for bad in ["1", "99", "100001"] {
            let e = validate(&["--disk-thread-slice-us", bad]).unwrap_err();
            assert!(e.contains("--disk-thread-slice-us"), "{e}");
        }
    }
}
