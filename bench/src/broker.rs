//! A broker es-bench starts itself (`--start-broker`): `es-broker` from this
//! binary's directory on a directory of ours, free ports, ready when
//! `GET /ready` answers 200; stopped (SIGTERM, then SIGKILL) when dropped.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a broker may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopping broker may take to exit before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

pub struct Broker {
    child: Child,
    /// Binary-protocol address.
    pub addr: String,
    /// HTTP address.
    pub http: String,
    log: PathBuf,
}

/// `es-broker` next to the running es-bench.
pub fn default_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find es-bench's own path: {e}"))?;
    let dir = exe.parent().ok_or("es-bench's path has no directory")?;
    Ok(dir.join("es-broker"))
}

impl Broker {
    /// Starts `bin` with `shards` shards, its data in `dir/data` and its log
    /// in `dir/broker-<shards>.log`.
    pub fn start(bin: &Path, dir: &Path, shards: usize) -> Result<Broker, String> {
        Broker::start_with_env(bin, dir, shards, &[], &[])
    }

    /// As [`Broker::start`], with `env` added to the broker's environment
    /// and `args` to its flags.
    pub fn start_with_env(
        bin: &Path,
        dir: &Path,
        shards: usize,
        env: &[(&str, &str)],
        args: &[String],
    ) -> Result<Broker, String> {
        if !bin.is_file() {
            return Err(format!(
                "{} not found: build it (cargo build --release -p es-broker) or pass --broker-bin",
                bin.display()
            ));
        }
        let (http, binary) = free_ports()?;
        let log = dir.join(format!("broker-{shards}.log"));
        let out = File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--registry-addr", "disabled", "--kafka-addr", "disabled"]);
        cmd.arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--http-addr")
            .arg(http.to_string())
            .arg("--binary-addr")
            .arg(binary.to_string())
            .arg("--shards")
            .arg(shards.to_string())
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: Ctrl-C reaches es-bench, which stops it.
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut broker = Broker {
            child,
            addr: binary.to_string(),
            http: http.to_string(),
            log,
        };
        broker.wait_ready(http)?;
        Ok(broker)
    }

    fn wait_ready(&mut self, http: SocketAddr) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < READY_TIMEOUT {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "es-broker exited ({status}) before it was ready:\n{}",
                    self.log_tail()
                ));
            }
            if ready(http) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "es-broker not ready after {}s:\n{}",
            READY_TIMEOUT.as_secs(),
            self.log_tail()
        ))
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The end of the broker's log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: signalling our own child by its pid.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two free local ports (both held until both are known).
fn free_ports() -> Result<(SocketAddr, SocketAddr), String> {
    let bind = || TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr().map(|a| (l, a)));
    let (_a, http) = bind().map_err(|e| format!("no free port: {e}"))?;
    let (_b, binary) = bind().map_err(|e| format!("no free port: {e}"))?;
    Ok((http, binary))
}

/// `GET /ready` answers 200.
fn ready(http: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&http, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET /ready HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}
