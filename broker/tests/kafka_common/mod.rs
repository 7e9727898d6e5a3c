//! What the Kafka tests share: a broker with its Kafka listener on a free
//! port, and the real clients (kcat; confluent-kafka and kafka-python
//! through broker/tests/kafka/clients.py), each run with a hang guard.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{free_port, hang_guard, Broker};

/// A broker whose Kafka listener is on a free port: it and that address.
pub fn start(shards: usize, args: &[&str]) -> (Broker, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["--kafka-addr", &addr]);
    (Broker::start_opts(shards, &all), addr)
}

/// [`start`], the broker limited to `bytes` of address space.
pub fn start_with_address_space(bytes: u64, shards: usize, args: &[&str]) -> (Broker, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut all: Vec<&str> = args.to_vec();
    all.extend_from_slice(&["--kafka-addr", &addr]);
    (Broker::start_with_address_space(bytes, shards, &all), addr)
}

/// The virtualenv's python with confluent-kafka and kafka-python:
/// `ES_CLIENTS_PYTHON`, else `target/py-clients/bin/python`.
pub fn python() -> PathBuf {
    let p = std::env::var_os("ES_CLIENTS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py-clients/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run ./scripts/clients.sh (it installs confluent-kafka and kafka-python), \
         or point ES_CLIENTS_PYTHON at a python that has them",
        p.display()
    );
    p
}

pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/clients.py")
}

/// kcat, which must be installed (./scripts/clients.sh).
pub fn kcat_bin() -> &'static str {
    assert!(
        Command::new("kcat").arg("-V").output().is_ok(),
        "kcat is missing: run ./scripts/clients.sh (apt-get install kcat)"
    );
    "kcat"
}

/// Waits for `child`, killing it past the hang guard: its exit success,
/// stdout and stderr.
fn finish(mut child: Child, what: &str) -> (bool, String, String) {
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let deadline = Instant::now() + hang_guard();
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not end within the hang guard");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.success(), t1.join().unwrap(), t2.join().unwrap())
}

/// Runs kcat with `args` and `stdin`: success, stdout, stderr.
pub fn kcat(args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(kcat_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat starts");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write kcat's stdin");
    drop(input);
    finish(child, &format!("kcat {args:?}"))
}

/// Runs a clients.py subcommand to its end: the JSON lines it printed.
pub fn py(args: &[&str]) -> Vec<Value> {
    let child = Command::new(python())
        .arg(script())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    let (ok, out, err) = finish(child, &format!("clients.py {args:?}"));
    assert!(ok, "clients.py {args:?} failed:\n{out}\n{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

/// A clients.py subcommand left running: its JSON lines arrive on `lines`.
pub struct Running {
    pub child: Child,
    pub lines: mpsc::Receiver<Value>,
}

impl Running {
    pub fn start(args: &[&str]) -> Running {
        let mut child = Command::new(python())
            .arg(script())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Running { child, lines: rx }
    }

    /// The next line, waiting at most the hang guard.
    pub fn next(&self) -> Value {
        self.lines
            .recv_timeout(hang_guard())
            .expect("a line from the client within the hang guard")
    }

    /// Lines until one satisfies `done` (returned with those before it).
    pub fn until(&self, mut done: impl FnMut(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let v = self.next();
            let stop = done(&v);
            seen.push(v);
            if stop {
                return seen;
            }
        }
    }

    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
    }

    pub fn wait(mut self) {
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
