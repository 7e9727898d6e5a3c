//! The harness of the CLI tests: the real `es` binary against the real
//! `es-broker` binary.
//!
//! Each test starts its own broker on a temporary data directory and free
//! ports, waits for `GET /ready`, runs `es` as a user would (flags, stdin,
//! stdout, stderr, exit code) and kills the broker at the end. Nothing here
//! asserts on time: every wait polls until its condition holds, stops at
//! once if the broker (or the `es` waited on) has exited, and otherwise
//! gives up only after the hang guard ([`hang_guard`]: 10 minutes,
//! `ES_TEST_WAIT_SECS`), which turns a hang into a failure.
//!
//! Nothing here builds anything either: `es-broker` is the binary that
//! `cargo test --workspace` builds beside these tests (or `ES_BROKER_BIN`).

#![allow(dead_code)] // each test binary uses part of the harness

#[path = "../../../broker/tests/common/broker_bin.rs"]
mod broker_bin;
#[path = "../../../broker/tests/common/port.rs"]
mod port;
#[path = "../../../broker/tests/common/wait.rs"]
mod wait;

pub use port::free_port;
#[allow(unused_imports)] // each test binary uses part of the harness
pub use wait::hang_guard;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

pub fn es_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_es"))
}

/// `target/<profile>/es-broker`, which `cargo test --workspace` builds
/// beside these tests (or `$ES_BROKER_BIN`); never built here. Panics,
/// saying how to build it, when it is missing.
pub fn broker_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(broker_bin::broker_bin)
}

pub fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "es-cli-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}

pub struct Broker {
    child: Child,
    dir: PathBuf,
    http_port: u16,
    pub addr: String,
    /// Extra es-broker flags, kept across restarts.
    extra: Vec<String>,
}

impl Broker {
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// A broker with extra flags (`--auth required`, say).
    pub fn start_with(args: &[&str]) -> Broker {
        let mut b = Broker::start_unready(args);
        b.wait_ready();
        b
    }

    /// Starts a broker with `extra` flags without waiting for plain-HTTP
    /// `GET /ready` (a TLS broker does not answer it): the caller waits
    /// for what it needs (every wait stops if the broker exits).
    pub fn start_unready(extra: &[&str]) -> Broker {
        let dir = temp_dir();
        let http_port = free_port();
        let addr = format!("127.0.0.1:{}", free_port());
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let child = spawn_broker(&dir, http_port, &addr, &extra);
        Broker {
            child,
            dir,
            http_port,
            addr,
            extra,
        }
    }

    /// `kill -9` the broker, then start it again on the same data
    /// directory and ports, and wait until it is ready.
    pub fn kill9_and_restart(&mut self) {
        wait::unwatch(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn_broker(&self.dir, self.http_port, &self.addr, &self.extra);
        self.wait_ready();
    }

    /// Waits until `GET /ready` answers 200; panics with the log if the
    /// broker exits first. (Should the hang guard give up, dropping the
    /// broker kills it.)
    fn wait_ready(&mut self) {
        let (child, dir, http_port) = (&mut self.child, &self.dir, self.http_port);
        wait::poll_until(
            "es-broker to answer GET /ready 200",
            || {
                let status = child.try_wait().ok()??;
                let log = std::fs::read_to_string(dir.join("broker.log")).unwrap_or_default();
                Some(format!("es-broker exited before it was ready ({status}):\n{log}"))
            },
            || ready(http_port).then_some(()),
        );
    }

    /// The broker's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// `es --broker <this broker> ARGS` with an empty stdin.
    pub fn es(&self, args: &[&str]) -> Output {
        self.es_stdin(args, b"")
    }

    /// `es --broker <this broker> ARGS`, feeding `input` on stdin.
    pub fn es_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut all = vec!["--broker", self.addr.as_str()];
        all.extend_from_slice(args);
        run_es(&all, input, &[])
    }
}

/// Starts es-broker (see [`Broker::wait_ready`]); every later wait on this
/// thread stops at once if it exits.
fn spawn_broker(dir: &Path, http_port: u16, addr: &str, extra: &[String]) -> Child {
    let log_path = dir.join("broker.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .expect("broker log");
    // No registry unless asked for: brokers of tests running at once
    // would all listen on 8081.
    let registry: &[&str] = if extra.iter().any(|a| a == "--registry-addr") {
        &[]
    } else {
        &["--registry-addr", "disabled"]
    };
    // Nor a Kafka listener: its default port is one per machine.
    let kafka: &[&str] = if extra.iter().any(|a| a == "--kafka-addr") {
        &[]
    } else {
        &["--kafka-addr", "disabled"]
    };
    let child = Command::new(broker_path())
        .args(registry)
        .args(kafka)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--http-addr", &format!("127.0.0.1:{http_port}")])
        .args(["--binary-addr", addr, "--shards", "2"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start es-broker");
    wait::watch(child.id(), &log_path);
    child
}

impl Drop for Broker {
    fn drop(&mut self) {
        wait::unwatch(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// GET /ready over a raw HTTP/1.0 request: true on 200. (A probe: one
/// that times out after 5 s is a "not yet", tried again.)
pub fn ready(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.split_whitespace().nth(1) == Some("200")
}

pub fn run_es(args: &[&str], input: &[u8], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(es_path());
    cmd.args(args)
        .env_remove("ES_BROKER")
        .env_remove("ES_API_KEY")
        .env_remove("ES_TLS")
        .env_remove("ES_TLS_CA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run es");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("es output");
    let _ = writer.join();
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
pub fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "es failed ({}):\nstdout: {}\nstderr: {}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    o
}

#[track_caller]
pub fn fails(o: &Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    stderr(o)
}

pub fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

pub fn fnv1a_64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The (non-header) rows of a table, split on runs of spaces.
pub fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

/// Whether some line of `text` splits (on runs of spaces) into `cells`.
pub fn has_row(text: &str, cells: &[&str]) -> bool {
    text.lines()
        .any(|l| l.split_whitespace().eq(cells.iter().copied()))
}

/// An `es` running in the background: its stdout lines are collected as
/// they come, stdin stays open until `close_stdin`. Killed when dropped.
pub struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Running {
    /// `es --broker <broker> ARGS` in the background.
    pub fn start(b: &Broker, args: &[&str]) -> Running {
        let mut child = Command::new(es_path())
            .arg("--broker")
            .arg(&b.addr)
            .args(args)
            .env_remove("ES_BROKER")
            .env_remove("ES_API_KEY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start es");
        let stdin = child.stdin.take();
        let out = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                sink.lock().expect("lines").push(line);
            }
        });
        Running {
            child,
            stdin,
            lines,
            reader: Some(reader),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The stdout lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits until `done` holds for the stdout lines so far (see
    /// [`wait_until`]); panics at once if `es` exits before.
    #[track_caller]
    pub fn wait_for_lines(&self, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let pid = self.pid();
        wait::poll_until(
            what,
            || {
                // Exited, and every line it printed read: it never will.
                let over = wait::has_exited(pid) && self.reader.iter().all(|r| r.is_finished());
                (over && !done(&self.lines()))
                    .then(|| format!("es (pid {pid}) exited; its stdout:\n{}", self.lines().join("\n")))
            },
            || {
                let lines = self.lines();
                done(&lines).then_some(lines)
            },
        )
    }

    pub fn write(&mut self, input: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(input).expect("write to es");
        stdin.flush().expect("flush to es");
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {}", self.pid());
    }

    /// Waits for the exit (see [`wait_until`]; should the hang guard give
    /// up, dropping it kills it): the exit status, every stdout line and
    /// stderr.
    pub fn wait(mut self) -> (ExitStatus, Vec<String>, String) {
        let pid = self.pid();
        let status = wait_until(&format!("es (pid {pid}) to exit"), || {
            self.child.try_wait().expect("try_wait")
        });
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status, self.lines(), err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `f` until it returns something: the one wait of these tests. It
/// stops at once, with the broker's log, if a broker started on this
/// thread exits, and otherwise gives up only after [`hang_guard`] (a
/// guard against a hang, not an assertion on speed).
#[track_caller]
pub fn wait_until<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait::poll_until(what, || None, f)
}

/// Parses JSON lines.
pub fn parse_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}
