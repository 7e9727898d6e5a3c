//! The real `es-broker` binary, for the es-tools tests that need a data dir
//! a broker wrote, or a broker holding the lock. Never built here: it is the
//! binary `cargo test --workspace` builds beside these tests (or
//! `$ES_BROKER_BIN`). Every wait polls (wait.rs); nothing asserts on time.

#![allow(dead_code)]

#[path = "../../../broker/tests/common/broker_bin.rs"]
mod broker_bin;
#[path = "../../../broker/tests/common/port.rs"]
mod port;
#[path = "../../../broker/tests/common/wait.rs"]
mod wait;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// A running `es-broker` on `data` (one shard, HTTP and the binary
/// listener on free ports).
pub struct Broker {
    child: Option<Child>,
    pub data: PathBuf,
    pub cold: Option<PathBuf>,
    pub http_port: u16,
    binary_port: u16,
    log: PathBuf,
    args: Vec<String>,
}

impl Broker {
    pub fn start(data: &Path, cold: Option<&Path>) -> Broker {
        Broker::start_with(data, cold, &[])
    }

    /// [`Broker::start`] with more flags.
    pub fn start_with(data: &Path, cold: Option<&Path>, args: &[&str]) -> Broker {
        let log = data.with_extension("broker.log");
        let mut b = Broker {
            child: None,
            data: data.to_path_buf(),
            cold: cold.map(Path::to_path_buf),
            http_port: port::free_port(),
            binary_port: port::free_port(),
            log,
            args: args.iter().map(|a| a.to_string()).collect(),
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("broker log");
        let mut cmd = Command::new(broker_bin::broker_bin());
        // No registry unless asked for: brokers of tests running at once
        // would all listen on 8081.
        if !self.args.iter().any(|a| a == "--registry-addr") {
            cmd.args(["--registry-addr", "disabled"]);
        }
        // Nor a Kafka listener: its default port is one per machine.
        if !self.args.iter().any(|a| a == "--kafka-addr") {
            cmd.args(["--kafka-addr", "disabled"]);
        }
        cmd.arg("--data-dir")
            .arg(&self.data)
            .args(["--http-addr", &format!("127.0.0.1:{}", self.http_port)])
            .args(["--binary-addr", &format!("127.0.0.1:{}", self.binary_port)])
            .args(["--shards", "1"]);
        if let Some(c) = &self.cold {
            cmd.arg("--cold-dir").arg(c);
        }
        cmd.args(&self.args);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start es-broker");
        wait::watch(child.id(), &self.log);
        let port = self.http_port;
        let log_path = self.log.clone();
        let mut child = child;
        wait::poll_until(
            "es-broker to answer GET /ready 200",
            || {
                let status = child.try_wait().ok()??;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                Some(format!("es-broker exited before it was ready ({status}):\n{log}"))
            },
            || (http(port, "GET", "/ready", None).0 == 200).then_some(()),
        );
        self.child = Some(child);
    }

    /// The broker's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM (a clean stop) and wait for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            wait::unwatch(child.id());
            // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let status = child.wait().expect("wait for es-broker");
            assert!(
                status.success(),
                "es-broker stopped with {status}: {}",
                self.log()
            );
        }
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            wait::unwatch(child.id());
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// An HTTP request; panics unless the status is 2xx.
    pub fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = http(self.http_port, method, path, body.as_ref());
        assert!((200..300).contains(&status), "{method} {path}: {status} {v}");
        v
    }

    /// An HTTP request: its status and JSON body (`Null` when not JSON).
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http(self.http_port, method, path, body.as_ref())
    }

    /// [`Broker::call`] with an API key.
    pub fn call_as(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        http_as(self.http_port, Some(key), method, path, body.as_ref())
    }

    /// [`Broker::ok`] with an API key.
    pub fn ok_as(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call_as(key, method, path, body);
        assert!((200..300).contains(&status), "{method} {path}: {status} {v}");
        v
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One HTTP/1.1 request with `Connection: close`.
pub fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    http_as(port, None, method, path, body)
}

/// [`http`] with `Authorization: Bearer KEY` when a key is given.
pub fn http_as(port: u16, key: Option<&str>, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, Value::Null);
    };
    let _ = s.set_read_timeout(Some(wait::hang_guard().min(Duration::from_secs(60))));
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).is_err() {
        return (0, Value::Null);
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let body = if text.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// Polls `f` until it gives a value (never a verdict on time: the hang
/// guard turns a hang into a failure).
pub fn wait_until<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait::poll_until(what, || None, f)
}

/// Every record of `topic`/`p` from its log start to its high watermark.
pub fn all_records(b: &Broker, topic: &str, p: u32) -> Vec<Value> {
    all_records_as(b, None, topic, p)
}

/// [`all_records`] with an API key.
pub fn all_records_as(b: &Broker, key: Option<&str>, topic: &str, p: u32) -> Vec<Value> {
    let get = |path: &str| {
        let (status, v) = http_as(b.http_port, key, "GET", path, None);
        assert!((200..300).contains(&status), "GET {path}: {status} {v}");
        v
    };
    let d = get(&format!("/v1/topics/{topic}"));
    let part = &d["partitions"][p as usize];
    let mut offset = part["log_start_offset"].as_u64().unwrap();
    let hw = part["high_watermark"].as_u64().unwrap();
    let mut out = Vec::new();
    while offset < hw {
        let v = get(&format!(
            "/v1/topics/{topic}/partitions/{p}/records?offset={offset}&max_records=1000"
        ));
        out.extend(v["records"].as_array().unwrap().iter().cloned());
        let next = v["next_offset"].as_u64().unwrap();
        assert!(next > offset, "a read moves forward: {v}");
        offset = next;
    }
    out
}
