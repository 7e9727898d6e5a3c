//! Test fixture for the `es-broker` HTTP integration tests.
//!
//! [`Broker`] runs the real `es-broker` binary on a private temporary data
//! directory and a free loopback port, waits until `GET /ready` answers 200,
//! and talks to it over plain HTTP. The broker's stdout and stderr go to one
//! log file in the temporary directory (appended to across restarts); every
//! failure to start or stop panics with that log, so a broken broker explains
//! itself in the test output.
//!
//! [`Client`] is the HTTP side alone (cheap to clone, `Send`), for tests that
//! talk to the broker from several threads. It keeps no idle connections, so a
//! restarted or killed broker never leaves a stale pooled connection behind.
//! `Broker` derefs to its `Client`.
//!
//! Nothing here asserts on time. Every wait ([`wait_for`], the wait for
//! `/ready`, for an exit, a request's answer) stops early only when the
//! broker has exited, and otherwise gives up only after the hang guard
//! ([`hang_guard`]: 10 minutes, `ES_TEST_WAIT_SECS`).
#![allow(dead_code)]

mod port;
mod wait;

pub use port::free_port;
#[allow(unused_imports)] // each test binary uses part of the harness
pub use wait::{hang_guard, poll_until, wait_for};

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;

/// Shard count used when a test does not choose one.
pub const DEFAULT_SHARDS: usize = 2;
/// How long one probe of `GET /ready` may take before it is tried again
/// (a probe that times out is a "not yet", not a failure).
const READY_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Interval between two polls of `GET /ready` (and of other conditions).
pub const POLL: Duration = wait::POLL;

// ---------------------------------------------------------------------------
// HTTP client
// ---------------------------------------------------------------------------

/// A plain-HTTP JSON client bound to one broker address.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        // The request timeout only guards against a hang.
        let agent = ureq::AgentBuilder::new()
            .timeout(hang_guard())
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .build();
        Client {
            agent,
            base: format!("http://{addr}"),
        }
    }

    /// `http://127.0.0.1:PORT` followed by `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// One request; `Err` only for transport failures (refused, reset,
    /// timeout). Any HTTP status, error statuses included, is `Ok`. A body
    /// that is not JSON comes back as a JSON string.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<(u16, Value), String> {
        let (status, text) = self.try_request_text(method, path, body, timeout)?;
        let value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
        Ok((status, value))
    }

    /// Like [`Client::try_request`], returning the body as text.
    pub fn try_request_text(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<(u16, String), String> {
        let url = self.url(path);
        let mut req = self.agent.request(method, &url);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let result = match body {
            Some(bytes) => req.set("Content-Type", "application/json").send_bytes(bytes),
            None => req.call(),
        };
        let resp = match result {
            Ok(resp) => resp,
            Err(ureq::Error::Status(_, resp)) => resp,
            Err(e) => return Err(format!("{method} {url}: {e}")),
        };
        let status = resp.status();
        let text = resp
            .into_string()
            .map_err(|e| format!("{method} {url}: reading the body: {e}"))?;
        Ok((status, text))
    }

    /// One request that must get an HTTP response (panics on transport errors).
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
        self.try_request(method, path, body, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    /// POST of a body given verbatim (malformed JSON and the like).
    pub fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        self.request("POST", path, Some(body.as_bytes()))
    }

    /// POST of arbitrary bytes (not necessarily UTF-8).
    pub fn post_bytes(&self, path: &str, body: &[u8]) -> (u16, Value) {
        self.request("POST", path, Some(body))
    }

    pub fn patch(&self, path: &str, body: Value) -> (u16, Value) {
        self.request("PATCH", path, Some(body.to_string().as_bytes()))
    }

    pub fn patch_raw(&self, path: &str, body: &str) -> (u16, Value) {
        self.request("PATCH", path, Some(body.as_bytes()))
    }

    pub fn delete(&self, path: &str) -> (u16, Value) {
        self.request("DELETE", path, None)
    }

    pub fn try_get(&self, path: &str) -> Result<(u16, Value), String> {
        self.try_request("GET", path, None, None)
    }

    pub fn try_post(&self, path: &str, body: &Value) -> Result<(u16, Value), String> {
        self.try_request("POST", path, Some(body.to_string().as_bytes()), None)
    }

    /// The `/metrics` text.
    pub fn metrics_text(&self) -> String {
        let (status, text) = self
            .try_request_text("GET", "/metrics", None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status, 200, "GET /metrics: {text}");
        text
    }

    /// The value of one Prometheus series, e.g. `es_fsync_rounds_total` or
    /// `es_partition_high_watermark{topic="orders",partition="0"}`. Labels must
    /// match exactly (in any order); `None` when the series is absent.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let want = parse_series(series);
        let text = self.metrics_text();
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(parse_sample)
            .find(|(s, _)| *s == want)
            .map(|(_, v)| v)
    }

    /// The sum of every series of metric `name`, whatever their labels;
    /// `None` when there is none.
    pub fn metric_sum(&self, name: &str) -> Option<f64> {
        let text = self.metrics_text();
        let values: Vec<f64> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(parse_sample)
            .filter(|(s, _)| s.0 == name)
            .map(|(_, v)| v)
            .collect();
        if values.is_empty() {
            None
        } else {
            Some(values.iter().sum())
        }
    }
}

/// A series: metric name and its labels, sorted.
type Series = (String, Vec<(String, String)>);

fn parse_series(s: &str) -> Series {
    let s = s.trim();
    match s.find('{') {
        None => (s.to_string(), Vec::new()),
        Some(open) => {
            let close = s.rfind('}').unwrap_or(s.len());
            let mut labels = Vec::new();
            let inner = &s[open + 1..close.max(open + 1)];
            // Label values in these tests never contain `,` or `"`.
            for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                if let Some((k, v)) = part.split_once('=') {
                    labels.push((k.trim().to_string(), v.trim().trim_matches('"').to_string()));
                }
            }
            labels.sort();
            (s[..open].to_string(), labels)
        }
    }
}

fn parse_sample(line: &str) -> Option<(Series, f64)> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    // The value follows the closing brace (or the name), then an optional timestamp.
    let split_at = match line.rfind('}') {
        Some(close) => close + 1,
        None => line.find(char::is_whitespace)?,
    };
    let (series, rest) = line.split_at(split_at);
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((parse_series(series), value))
}

// ---------------------------------------------------------------------------
// The broker process
// ---------------------------------------------------------------------------

/// A running (or stopped) `es-broker` with its own data directory and port.
pub struct Broker {
    dir: TempDir,
    addr: SocketAddr,
    binary_addr: SocketAddr,
    /// The schema registry's address (`--registry-addr`): a port of its
    /// own, so that brokers of tests running at once never share 8081.
    registry_addr: SocketAddr,
    shards: usize,
    extra: Vec<String>,
    child: Option<Child>,
    client: Client,
    log_path: PathBuf,
    runs: usize,
    /// `RLIMIT_NOFILE` (soft and hard) of the broker process, when set.
    open_files_limit: Option<u64>,
    /// Bytes of address space the process may map (`RLIMIT_AS`), if
    /// limited: an allocation past it fails as it would under
    /// `vm.overcommit_memory=2` or a container's limit.
    address_space_limit: Option<u64>,
    /// Environment variables set for the broker process, kept across restarts.
    env: Vec<(String, String)>,
}

impl Deref for Broker {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Broker {
    /// The binary protocol address (`host:port`).
    pub fn binary_addr(&self) -> String {
        self.binary_addr.to_string()
    }

    /// The schema registry's address (`--registry-addr`).
    pub fn registry_addr(&self) -> SocketAddr {
        self.registry_addr
    }

    /// Starts a broker with `--shards shards` and default limits.
    pub fn start(shards: usize) -> Broker {
        Broker::start_opts(shards, &[])
    }

    /// Starts a broker with extra flags (e.g. `["--connections-max", "500"]`).
    /// A `--shards N` among them sets the shard count; otherwise it is
    /// [`DEFAULT_SHARDS`].
    pub fn start_with(args: &[&str]) -> Broker {
        let mut shards = DEFAULT_SHARDS;
        let mut extra = Vec::new();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if *arg == "--shards" {
                let n = it.next().expect("--shards needs a value");
                shards = n.parse().expect("--shards needs a number");
            } else if let Some(n) = arg.strip_prefix("--shards=") {
                shards = n.parse().expect("--shards needs a number");
            } else {
                extra.push(*arg);
            }
        }
        Broker::start_opts(shards, &extra)
    }

    /// Starts a broker with `--shards shards` and extra flags.
    pub fn start_opts(shards: usize, args: &[&str]) -> Broker {
        Broker::start_prepared(shards, args, |_| {})
    }

    /// Like [`Broker::start_opts`], with `prepare` called on the data
    /// directory's path (not there yet) before the broker first starts: a
    /// test that keeps the data on a filesystem of its own links it there.
    pub fn start_prepared(shards: usize, args: &[&str], prepare: impl FnOnce(&Path)) -> Broker {
        let mut broker = Broker::unstarted(shards, args);
        prepare(&broker.data_dir());
        broker.spawn();
        broker
    }

    /// Starts a broker with `--shards shards` and extra flags without
    /// waiting for it to answer plain-HTTP `GET /ready` (a TLS broker does
    /// not): the caller waits for what it needs, checking
    /// [`Broker::assert_running`].
    pub fn start_unready(shards: usize, args: &[&str]) -> Broker {
        let mut broker = Broker::unstarted(shards, args);
        broker.spawn_process();
        broker
    }

    /// A broker with `--shards shards` and extra flags, not started yet.
    fn unstarted(shards: usize, args: &[&str]) -> Broker {
        let dir = tempfile::Builder::new()
            .prefix("es-broker-test-")
            .tempdir()
            .expect("tempdir");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port())
            .parse()
            .expect("socket address");
        let binary_addr: SocketAddr = format!("127.0.0.1:{}", free_port())
            .parse()
            .expect("socket address");
        let registry_addr: SocketAddr = format!("127.0.0.1:{}", free_port())
            .parse()
            .expect("socket address");
        let log_path = dir.path().join("broker.log");
        let broker = Broker {
            dir,
            addr,
            binary_addr,
            registry_addr,
            shards,
            extra: args.iter().map(|s| s.to_string()).collect(),
            child: None,
            client: Client::new(addr),
            log_path,
            runs: 0,
            open_files_limit: None,
            address_space_limit: None,
            env: Vec::new(),
        };
        broker
    }

    /// Starts a broker with extra flags and environment variables, kept
    /// across restarts.
    pub fn start_env(args: &[&str], env: &[(&str, &str)]) -> Broker {
        let mut b = Broker::unstarted(DEFAULT_SHARDS, args);
        b.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        b.spawn();
        b
    }

    /// Starts a broker whose open-files limit (soft and hard, so it cannot
    /// raise it) is `limit`, kept across restarts.
    pub fn start_with_open_files(limit: u64, shards: usize, args: &[&str]) -> Broker {
        let mut b = Broker::unstarted(shards, args);
        b.open_files_limit = Some(limit);
        b.spawn();
        b
    }

    /// Starts a broker that may map at most `bytes` of address space
    /// (`RLIMIT_AS`, soft and hard), kept across restarts.
    pub fn start_with_address_space(bytes: u64, shards: usize, args: &[&str]) -> Broker {
        let mut b = Broker::unstarted(shards, args);
        b.address_space_limit = Some(bytes);
        b.spawn();
        b
    }

    /// Adds flags to those the next starts use.
    pub fn add_args(&mut self, args: &[&str]) {
        self.extra.extend(args.iter().map(|s| s.to_string()));
    }

    /// Starts the stopped broker again on the same data directory, port,
    /// shard count and flags.
    pub fn restart(&mut self) {
        let shards = self.shards;
        self.restart_with_shards(shards);
    }

    /// Starts the stopped broker again with another shard count.
    pub fn restart_with_shards(&mut self, shards: usize) {
        assert!(
            self.child.is_none(),
            "restart: the broker is still running; stop it first"
        );
        self.shards = shards;
        self.client = Client::new(self.addr);
        self.spawn();
    }

    fn spawn(&mut self) {
        self.spawn_process();
        self.wait_ready();
    }

    /// Starts the process, its output appended to the log.
    fn spawn_process(&mut self) {
        self.runs += 1;
        let data_dir = self.data_dir();
        let mut args: Vec<String> = vec![
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--http-addr".into(),
            self.addr.to_string(),
            "--binary-addr".into(),
            self.binary_addr.to_string(),
            "--shards".into(),
            self.shards.to_string(),
        ];
        if !self.extra.iter().any(|a| a.starts_with("--registry-addr")) {
            args.extend(["--registry-addr".into(), self.registry_addr.to_string()]);
        }
        // No Kafka listener unless the test gives one: its default port
        // is one per machine, and tests run at once.
        if !self.extra.iter().any(|a| a.starts_with("--kafka-addr")) {
            args.extend(["--kafka-addr".into(), "disabled".into()]);
        }
        args.extend(self.extra.iter().cloned());

        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open the broker log");
        writeln!(
            log,
            "\n===== es-broker run {}: {} =====",
            self.runs,
            args.join(" ")
        )
        .expect("write the log");
        let stdout = log.try_clone().expect("clone the log handle");

        let mut command = Command::new(env!("CARGO_BIN_EXE_es-broker"));
        let limits: Vec<(libc::__rlimit_resource_t, u64)> = [
            (libc::RLIMIT_NOFILE, self.open_files_limit),
            (libc::RLIMIT_AS, self.address_space_limit),
        ]
        .into_iter()
        .filter_map(|(resource, limit)| Some((resource, limit?)))
        .collect();
        if !limits.is_empty() {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe and touches nothing of
            // this process but the child's own limits.
            unsafe {
                command.pre_exec(move || {
                    for &(resource, limit) in &limits {
                        let l = libc::rlimit {
                            rlim_cur: limit,
                            rlim_max: limit,
                        };
                        if libc::setrlimit(resource, &l) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(log))
            .env("RUST_BACKTRACE", "1")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn es-broker: {e}"));
        wait::watch(child.id(), &self.log_path);
        self.child = Some(child);
    }

    /// Waits until `GET /ready` answers 200, or, for a cluster node, says
    /// it `recovered` and waits for its peers (a node started before the
    /// others of its cluster: the test waits for the cluster it needs);
    /// panics with the log if the broker exits first.
    fn wait_ready(&mut self) {
        let last = std::cell::RefCell::new(String::from("no answer yet"));
        let child = self.child.as_mut().expect("started");
        let (client, log_path) = (&self.client, &self.log_path);
        poll_until(
            "es-broker to answer GET /ready 200",
            || {
                let status = child.try_wait().expect("try_wait")?;
                Some(format!(
                    "es-broker exited with {status} before GET /ready answered 200 ({}); its log:\n{}",
                    last.borrow(),
                    log_text(log_path)
                ))
            },
            || match client.try_request("GET", "/ready", None, Some(READY_PROBE_TIMEOUT)) {
                Ok((200, _)) => Some(()),
                Ok((503, body)) if body["recovered"] == true => Some(()),
                Ok((status, body)) => {
                    *last.borrow_mut() = format!("last answer {status} {body}");
                    None
                }
                Err(e) => {
                    *last.borrow_mut() = e;
                    None
                }
            },
        );
    }

    /// `<tempdir>/data`, the broker's `--data-dir`.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `<data-dir>/topics/<topic>/<partition>`.
    pub fn partition_dir(&self, topic: &str, partition: u32) -> PathBuf {
        self.data_dir()
            .join("topics")
            .join(topic)
            .join(partition.to_string())
    }

    /// The broker's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The HTTP client of the current run.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the broker is not running").id()
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            None => false,
            Some(c) => c.try_wait().expect("try_wait").is_none(),
        }
    }

    /// Panics (with the log) unless the broker process is still alive.
    pub fn assert_running(&mut self) {
        if !self.is_running() {
            panic!("es-broker is no longer running; its log:\n{}", self.stderr_text());
        }
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn sigterm_and_wait(&mut self) -> ExitStatus {
        self.signal_and_wait("TERM")
    }

    /// Sends `SIG<name>` (`"TERM"`, `"INT"`) with `kill` and waits for the
    /// process to exit (however long it takes, up to the hang guard; then
    /// it is killed and the test fails with the log).
    pub fn signal_and_wait(&mut self, name: &str) -> ExitStatus {
        let pid = self.pid();
        wait::unwatch(pid);
        let sent = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .unwrap_or_else(|e| panic!("run kill -{name} {pid}: {e}"));
        assert!(sent.success(), "kill -{name} {pid} failed: {sent}");
        let child = self.child.as_mut().expect("running");
        // On the hang guard's panic, Drop kills the broker and prints its log.
        let status = poll_until(
            &format!("es-broker to exit after SIG{name}"),
            || None,
            || child.try_wait().expect("try_wait"),
        );
        self.child = None;
        status
    }

    /// SIGKILL, then reaps the process.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("the broker is not running");
        wait::unwatch(child.id());
        child.kill().expect("kill -9");
        child.wait().expect("wait after kill -9");
    }

    /// Everything the broker wrote to stdout and stderr, all runs.
    pub fn stderr_text(&self) -> String {
        log_text(&self.log_path)
    }
}

/// The text of a broker log.
fn log_text(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            wait::unwatch(child.id());
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() {
            eprintln!(
                "----- es-broker log ({}) -----\n{}",
                self.log_path.display(),
                self.stderr_text()
            );
        }
    }
}

// ---------------------------------------------------------------------------
// API helpers
// ---------------------------------------------------------------------------

/// Asserts an error answer: the status and `{"error":{"code":code,"message":"..."}}`
/// with a non-empty message. Returns the message.
#[track_caller]
pub fn assert_error(got: &(u16, Value), status: u16, code: &str) -> String {
    let (got_status, body) = got;
    assert_eq!(
        (*got_status, body["error"]["code"].as_str()),
        (status, Some(code)),
        "expected {status} {code}, got {got_status} {body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(!message.is_empty(), "error without a message: {body}");
    message.to_string()
}

/// Asserts a 400 whose code is one of `codes` (for inputs where the contract
/// allows either `bad_json` or `invalid_request`).
#[track_caller]
pub fn assert_400_one_of(got: &(u16, Value), codes: &[&str]) {
    let (status, body) = got;
    let code = body["error"]["code"].as_str().unwrap_or("");
    assert!(
        *status == 400 && codes.contains(&code),
        "expected 400 with one of {codes:?}, got {status} {body}"
    );
}

/// Creates a topic with default settings; asserts 201.
#[track_caller]
pub fn create_topic(c: &Client, name: &str, partitions: u32) -> Value {
    let got = c.post("/v1/topics", json!({ "name": name, "partitions": partitions }));
    assert_eq!(got.0, 201, "create topic {name}: {}", got.1);
    got.1
}

/// Produces (`body` is the whole request); asserts 200 and returns the
/// `(partition, offset)` of every record, in input order.
#[track_caller]
pub fn produce(c: &Client, topic: &str, body: Value) -> Vec<(u32, u64)> {
    let n = body["records"].as_array().map(Vec::len).unwrap_or(0);
    let got = c.post(&format!("/v1/topics/{topic}/records"), body);
    assert_eq!(got.0, 200, "produce to {topic}: {}", got.1);
    let offsets = parse_offsets(&got.1);
    assert_eq!(offsets.len(), n, "one offset per record: {}", got.1);
    offsets
}

/// `{"offsets":[{"partition":p,"offset":o},...]}` as pairs.
#[track_caller]
pub fn parse_offsets(body: &Value) -> Vec<(u32, u64)> {
    body["offsets"]
        .as_array()
        .unwrap_or_else(|| panic!("no offsets array in {body}"))
        .iter()
        .map(|o| {
            let p = o["partition"]
                .as_u64()
                .unwrap_or_else(|| panic!("bad partition in {body}"));
            let off = o["offset"]
                .as_u64()
                .unwrap_or_else(|| panic!("bad offset in {body}"));
            (p as u32, off)
        })
        .collect()
}

/// Produces utf8 values to an explicit partition; returns their offsets.
#[track_caller]
pub fn produce_values(c: &Client, topic: &str, partition: u32, values: &[String]) -> Vec<u64> {
    let records: Vec<Value> = values
        .iter()
        .map(|v| json!({ "value": v, "partition": partition }))
        .collect();
    produce(c, topic, json!({ "records": records }))
        .into_iter()
        .map(|(p, o)| {
            assert_eq!(p, partition, "record sent to partition {partition} landed on {p}");
            o
        })
        .collect()
}

/// `GET /v1/topics/{topic}/partitions/{partition}/records?{query}`.
pub fn fetch(c: &Client, topic: &str, partition: u32, query: &str) -> (u16, Value) {
    c.get(&format!(
        "/v1/topics/{topic}/partitions/{partition}/records?{query}"
    ))
}

/// Every record of a partition, from offset 0 to the high watermark, paging
/// with `next_offset`; `encoding` is `utf8` or `base64`.
#[track_caller]
pub fn fetch_all(c: &Client, topic: &str, partition: u32, encoding: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut offset = 0u64;
    loop {
        let (status, body) = fetch(
            c,
            topic,
            partition,
            &format!("offset={offset}&max_records=1000&encoding={encoding}"),
        );
        assert_eq!(status, 200, "fetch {topic}/{partition} at {offset}: {body}");
        let records = body["records"]
            .as_array()
            .unwrap_or_else(|| panic!("no records in {body}"));
        let next = body["next_offset"]
            .as_u64()
            .unwrap_or_else(|| panic!("no next_offset in {body}"));
        let hw = body["high_watermark"]
            .as_u64()
            .unwrap_or_else(|| panic!("no high_watermark in {body}"));
        for r in records {
            let o = r["offset"]
                .as_u64()
                .unwrap_or_else(|| panic!("record without offset: {r}"));
            if let Some(prev) = out.last() {
                assert!(
                    o > prev["offset"].as_u64().unwrap(),
                    "offsets go backwards: {body}"
                );
            }
            out.push(r.clone());
        }
        if next >= hw {
            return out;
        }
        assert!(
            next > offset,
            "fetch at {offset} made no progress below the high watermark {hw}: {body}"
        );
        offset = next;
    }
}

/// The `value` strings of every record of a partition (utf8).
pub fn values_of(c: &Client, topic: &str, partition: u32) -> Vec<String> {
    fetch_all(c, topic, partition, "utf8")
        .iter()
        .map(|r| {
            r["value"]
                .as_str()
                .unwrap_or_else(|| panic!("no value in {r}"))
                .to_string()
        })
        .collect()
}

/// `GET /v1/topics/{topic}`, asserting 200.
#[track_caller]
pub fn describe(c: &Client, topic: &str) -> Value {
    let (status, body) = c.get(&format!("/v1/topics/{topic}"));
    assert_eq!(status, 200, "describe {topic}: {body}");
    body
}

/// The high watermark of every partition of a topic, by partition number.
#[track_caller]
pub fn high_watermarks(c: &Client, topic: &str) -> Vec<u64> {
    let body = describe(c, topic);
    let parts = body["partitions"]
        .as_array()
        .unwrap_or_else(|| panic!("no partitions in {body}"));
    let mut hws = vec![u64::MAX; parts.len()];
    for p in parts {
        let i = p["partition"]
            .as_u64()
            .unwrap_or_else(|| panic!("bad partition in {body}")) as usize;
        hws[i] = p["high_watermark"]
            .as_u64()
            .unwrap_or_else(|| panic!("bad high_watermark in {body}"));
    }
    hws
}

/// FNV-1a 64 over `bytes` (offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3), the documented key hash.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The partition the broker must pick for a record with this key and no partition.
pub fn key_partition(key: &[u8], partitions: u32) -> u32 {
    (fnv1a64(key) % u64::from(partitions)) as u32
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(chunk[0]) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        out.push(char::from(B64[((n >> 18) & 63) as usize]));
        out.push(char::from(B64[((n >> 12) & 63) as usize]));
        out.push(if chunk.len() > 1 {
            char::from(B64[((n >> 6) & 63) as usize])
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            char::from(B64[(n & 63) as usize])
        } else {
            '='
        });
    }
    out
}

/// Standard base64, padding optional.
#[track_caller]
pub fn b64_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for c in s.bytes() {
        if c == b'=' {
            break;
        }
        let v = B64
            .iter()
            .position(|&x| x == c)
            .unwrap_or_else(|| panic!("not standard base64: {s:?}"));
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// [`wait_for`] for callers that name a limit: the limit is not used (a
/// wait gives up only after [`hang_guard`], never sooner).
#[track_caller]
pub fn wait_until(what: &str, _limit: Duration, cond: impl FnMut() -> bool) {
    wait_for(what, cond)
}

/// Appends `bytes` to the file at `path`.
pub fn append_to_file(path: &Path, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {path:?}: {e}"));
    f.write_all(bytes)
        .unwrap_or_else(|e| panic!("append to {path:?}: {e}"));
    f.sync_all().unwrap_or_else(|e| panic!("fsync {path:?}: {e}"));
}

/// The segment with the highest base offset in a partition directory
/// (`<base:020>.log`).
#[track_caller]
pub fn last_segment(partition_dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .unwrap_or_else(|e| panic!("read_dir {partition_dir:?}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.len() == 24 && name.ends_with(".log") && name[..20].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    logs.sort();
    logs.pop()
        .unwrap_or_else(|| panic!("no segment in {partition_dir:?}"))
}

// ---------------------------------------------------------------------------
// Raw HTTP over TCP (for paths a URL parser would normalise, bodies the
// server may refuse before reading them, and garbage)
// ---------------------------------------------------------------------------

/// One parsed HTTP response.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The body as JSON (a JSON string when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice::<Value>(&self.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.body).into_owned()))
    }

    pub fn pair(&self) -> (u16, Value) {
        (self.status, self.json())
    }
}

/// Sends `request` (complete bytes, head and body) on a fresh connection and
/// reads one response. The bytes are written from another thread while this
/// one reads, so a server that answers before it has read the whole body (a
/// 413) is heard; write errors after that are ignored. `Err` when the
/// connection ends before a complete response.
pub fn raw_exchange(addr: SocketAddr, request: Vec<u8>) -> Result<RawResponse, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    // Only a guard against a broker that never answers nor closes.
    stream
        .set_read_timeout(Some(hang_guard()))
        .map_err(|e| e.to_string())?;
    let mut writer = stream.try_clone().map_err(|e| e.to_string())?;
    let write_thread = thread::spawn(move || {
        let _ = writer.write_all(&request);
        let _ = writer.flush();
    });
    let result = read_response(&mut stream);
    // Unblocks the writer if the server stopped reading.
    let _ = stream.shutdown(Shutdown::Both);
    let _ = write_thread.join();
    result
}

/// Builds a request with `Host`, `Content-Length` (when there is a body) and
/// `Connection: close`.
pub fn raw_request(method: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let mut out =
        format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n").into_bytes();
    if !body.is_empty() || method == "POST" || method == "PATCH" || method == "PUT" {
        out.extend_from_slice(
            format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Reads one HTTP/1.1 response (Content-Length, chunked, or until EOF).
pub fn read_response(stream: &mut TcpStream) -> Result<RawResponse, String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    let mut eof = false;
    // The head.
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(format!(
                    "connection closed before a complete response head ({} bytes: {:?})",
                    buf.len(),
                    String::from_utf8_lossy(&buf)
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(format!(
                    "reading the response head ({} bytes so far): {e}",
                    buf.len()
                ))
            }
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let header = |name: &str| -> Option<String> {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let content_length: Option<usize> = header("content-length").and_then(|v| v.parse().ok());
    let chunked = header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut body = buf.split_off(head_end);

    let mut fill = |body: &mut Vec<u8>, eof: &mut bool| -> Result<(), String> {
        match stream.read(&mut chunk) {
            Ok(0) => {
                *eof = true;
                Ok(())
            }
            Ok(n) => {
                body.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    };

    if status == 204 || status == 304 || (100..200).contains(&status) {
        body.clear();
    } else if let Some(len) = content_length {
        while body.len() < len {
            if eof {
                return Err(format!("body cut short: {} of {len} bytes", body.len()));
            }
            fill(&mut body, &mut eof).map_err(|e| format!("reading the body: {e}"))?;
        }
        body.truncate(len);
    } else if chunked {
        let mut decoded = Vec::new();
        let mut pos = 0usize;
        loop {
            // Chunk-size line.
            let line_end = loop {
                if let Some(i) = find(&body[pos..], b"\r\n") {
                    break pos + i;
                }
                if eof {
                    return Err("chunked body cut short".into());
                }
                fill(&mut body, &mut eof).map_err(|e| format!("reading a chunk: {e}"))?;
            };
            let size_text = String::from_utf8_lossy(&body[pos..line_end]).into_owned();
            let size_hex = size_text.split(';').next().unwrap_or("").trim();
            let size =
                usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {size_text:?}"))?;
            let data_start = line_end + 2;
            while body.len() < data_start + size + 2 {
                if eof {
                    return Err("chunked body cut short".into());
                }
                fill(&mut body, &mut eof).map_err(|e| format!("reading a chunk: {e}"))?;
            }
            if size == 0 {
                break;
            }
            decoded.extend_from_slice(&body[data_start..data_start + size]);
            pos = data_start + size + 2;
        }
        body = decoded;
    } else {
        while !eof {
            if fill(&mut body, &mut eof).is_err() {
                break;
            }
        }
    }
    Ok(RawResponse { status, head, body })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Writes `bytes` on a fresh connection, half-closes it and reads whatever
/// comes back for up to `read_for` (ignoring errors). For garbage input: the
/// point is that the broker survives it.
pub fn send_garbage(addr: SocketAddr, bytes: &[u8], read_for: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return got;
    };
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(read_for));
    let mut chunk = [0u8; 4096];
    let start = Instant::now();
    while start.elapsed() < read_for {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
    got
}

/// Soft `RLIMIT_NOFILE` of this process, from `/proc/self/limits`.
pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line.split_whitespace().nth(3)?;
    if soft == "unlimited" {
        Some(u64::MAX)
    } else {
        soft.parse().ok()
    }
}

/// Raises this process's soft open-files limit to `want` (capped by the hard
/// limit) with `prlimit`, if it is lower; returns the soft limit afterwards.
/// The broker, started afterwards, inherits it.
pub fn raise_open_files_limit(want: u64) -> u64 {
    let current = open_files_limit().unwrap_or(1024);
    if current >= want {
        return current;
    }
    let hard = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("Max open files"))?.to_string();
            line.split_whitespace().nth(4).map(str::to_string)
        })
        .unwrap_or_default();
    let target = match hard.parse::<u64>() {
        Ok(h) => want.min(h),
        Err(_) => want,
    };
    let _ = Command::new("prlimit")
        .arg("--pid")
        .arg(std::process::id().to_string())
        .arg(format!("--nofile={target}:"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    open_files_limit().unwrap_or(current)
}

/// Runs a one-shard broker on `b`'s data directory and addresses until it
/// exits (it must not become ready: damaged data refuses the start);
/// returns its exit code and output. `ES_*` variables are not passed on.
pub fn start_refused(b: &Broker) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.log");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_es-broker"));
    cmd.args(["--registry-addr", "disabled", "--kafka-addr", "disabled"]);
    cmd.args(["--data-dir", b.data_dir().to_str().unwrap()])
        .args(["--http-addr", &b.addr().to_string()])
        .args(["--binary-addr", &b.binary_addr()])
        .args(["--shards", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out));
    for (k, _) in std::env::vars() {
        if k.starts_with("ES_") && k != "ES_TEST_WAIT_SECS" {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("es-broker runs");
    let client = Client::new(b.addr());
    let status = poll_until(
        "es-broker to refuse to start",
        || {
            let ready = matches!(client.try_get("/ready"), Ok((200, _)));
            ready.then(|| "it started on corrupt data (answers /ready 200) instead of refusing".to_string())
        },
        || child.try_wait().expect("try_wait"),
    );
    let _ = child.kill();
    (status.code(), std::fs::read_to_string(&out_path).unwrap())
}
