//! One `es-broker` process the harness runs: its ports (fixed across
//! restarts), its data directory, its log, and the faults done to the
//! process: kill -9, SIGSTOP / SIGCONT, restart. In a cluster run it also
//! has a raft listener and the cluster flags (shared raft spec §4.7).
//! Starting, waiting for and stopping the process is es-bench's
//! `process.rs`, which es-chaos includes.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use crate::process::{self, NotReady};

/// How long a (re)started broker may take to answer `GET /ready`: a hang
/// guard, far above a debug build's start on a loaded machine.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a SIGTERM'd broker may take to exit before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Node {
    pub id: u32,
    pub http: String,
    pub binary: String,
    pub data_dir: PathBuf,
    bin: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// Starts so far (the log marks each).
    starts: u32,
    /// The cluster flags, in a cluster run.
    cluster: Vec<String>,
}

/// What a cluster node is told: its raft listener and its peers' addresses
/// (the proxy's, so every peer link passes through it).
pub struct Membership {
    pub raft: SocketAddr,
    /// `1=host:port,2=...`, every node including this one.
    pub peers: String,
}

impl Node {
    /// A node whose broker is `bin`, with its data in `data_dir` and its log
    /// in `dir/broker-<id>.log`; two free loopback ports are picked now.
    pub fn new(id: u32, bin: &Path, dir: &Path, data_dir: PathBuf) -> Result<Node, String> {
        let (http, binary) = process::free_ports()?;
        Ok(Node {
            id,
            http: http.to_string(),
            binary: binary.to_string(),
            data_dir,
            bin: bin.to_path_buf(),
            log: dir.join(format!("broker-{id}.log")),
            child: None,
            paused: false,
            starts: 0,
            cluster: Vec::new(),
        })
    }

    /// Makes this node a cluster member: the flags of shared raft spec
    /// §4.7, with the short timeouts of the cluster tests, and a cleanup
    /// pass every second, so retention (`workload::CLUSTER_RETENTION_BYTES`)
    /// deletes behind a node that is down and it catches up by snapshot.
    pub fn join(&mut self, m: &Membership) {
        self.cluster = [
            "--cleanup-interval-ms",
            "1000",
            "--raft-addr",
            &m.raft.to_string(),
            "--peers",
            &m.peers,
            "--raft-insecure",
            "--raft-heartbeat-ms",
            "100",
            "--raft-election-timeout-ms",
            "800",
            "--advertised-http-addr",
            &self.http,
            "--advertised-binary-addr",
            &self.binary,
        ]
        .map(str::to_string)
        .to_vec();
    }

    /// Starts the broker and waits until it is ready.
    pub fn start(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        self.spawn()?;
        self.wait_ready()
    }

    /// Starts the broker (if it is not running) without waiting: a
    /// cluster's nodes are ready only once a majority runs.
    pub fn spawn(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        self.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let _ = writeln!(log, "---- es-chaos: start {} of node {}", self.starts, self.id);
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--http-addr", &self.http, "--binary-addr", &self.binary])
            .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
            .args(&self.cluster)
            .args(["--node-id", &self.id.to_string()])
            // One shard, no spinning, few disk threads: brokers and the
            // workload share a small machine.
            .args([
                "--shards",
                "1",
                "--spin-before-park-us",
                "0",
                "--disk-threads",
                "2",
            ]);
        self.child = Some(process::spawn(&mut cmd, log, &self.log)?);
        self.paused = false;
        Ok(())
    }

    /// Waits until the running broker answers `GET /ready`.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let addr: SocketAddr = self.http.parse().map_err(|e| format!("{}: {e}", self.http))?;
        let Some(child) = self.child.as_mut() else {
            return Err(format!("node {}: not running", self.id));
        };
        match process::wait_ready(child, addr, READY_TIMEOUT) {
            Ok(()) => Ok(()),
            Err(NotReady::Exited(status)) => {
                self.child = None;
                let tail = self.log_tail();
                if !self.cluster.is_empty() && refused_flags(&tail) {
                    return Err(format!(
                        "node {}: this es-broker refuses the cluster flags (--raft-addr, --peers, ...: it has no cluster mode yet), so a run of several nodes cannot start; es-broker said:\n{tail}",
                        self.id
                    ));
                }
                Err(format!(
                    "node {}: es-broker exited ({status}) before it was ready; see {}:\n{tail}",
                    self.id,
                    self.log.display(),
                ))
            }
            Err(NotReady::TimedOut) => Err(format!(
                "node {}: not ready after {}s",
                self.id,
                READY_TIMEOUT.as_secs()
            )),
        }
    }

    /// kill -9, and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP: the process stays, its sockets stay open, nothing answers.
    pub fn pause(&mut self) {
        if !self.paused && self.signal(libc::SIGSTOP) {
            self.paused = true;
        }
    }

    /// SIGCONT after [`pause`](Node::pause).
    pub fn resume(&mut self) {
        if self.paused {
            self.signal(libc::SIGCONT);
            self.paused = false;
        }
    }

    fn signal(&self, sig: i32) -> bool {
        self.child.as_ref().is_some_and(|c| process::signal(c, sig))
    }

    /// SIGTERM, waiting for the exit (SIGKILL after a long hang guard).
    pub fn stop(&mut self) -> Option<ExitStatus> {
        self.resume();
        let mut child: Child = self.child.take()?;
        process::terminate(&mut child, STOP_TIMEOUT)
    }

    /// How many times the broker's log says it installed a snapshot from
    /// its leader's transfer, across all its starts.
    pub fn snapshot_installs(&self) -> usize {
        std::fs::read(&self.log).map_or(0, |b| count_lines_with(&b, SNAPSHOT_INSTALLED))
    }

    /// The end of the broker's log, for error messages.
    pub fn log_tail(&self) -> String {
        process::log_tail(&self.log)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a broker logs when it installed a snapshot (`raft/src/snapshot_recv.rs`).
const SNAPSHOT_INSTALLED: &str = "installed a snapshot";

/// Lines of `log` that contain `what`.
fn count_lines_with(log: &[u8], what: &str) -> usize {
    String::from_utf8_lossy(log)
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

/// Clap's words for a flag it does not know.
fn refused_flags(log: &str) -> bool {
    log.contains("unexpected argument") || log.contains("unrecognized") || log.contains("Found argument")
}

/// A free loopback port for a raft listener.
pub fn free_port() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))
}
