//! A broker es-bench starts itself (`--start-broker`): `es-broker` from this
//! binary's directory on a directory of ours, free ports, ready when
//! `GET /ready` answers 200; stopped (SIGTERM, then SIGKILL) when dropped.
//! How a broker process is started, waited for and stopped is
//! `process.rs`, shared with es-chaos.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::process::{self, NotReady};

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
        let (http, binary) = process::free_ports()?;
        let log = dir.join(format!("broker-{shards}.log"));
        let out = File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
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
            .envs(env.iter().copied());
        let mut child = process::spawn(&mut cmd, out, &log)?;
        let ready = process::wait_ready(&mut child, http, READY_TIMEOUT);
        let broker = Broker {
            child,
            addr: binary.to_string(),
            http: http.to_string(),
            log,
        };
        match ready {
            Ok(()) => Ok(broker),
            Err(NotReady::Exited(status)) => Err(format!(
                "es-broker exited ({status}) before it was ready:\n{}",
                broker.log_tail()
            )),
            Err(NotReady::TimedOut) => Err(format!(
                "es-broker not ready after {}s:\n{}",
                READY_TIMEOUT.as_secs(),
                broker.log_tail()
            )),
        }
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The end of the broker's log, for error messages.
    pub fn log_tail(&self) -> String {
        process::log_tail(&self.log)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        process::terminate(&mut self.child, STOP_TIMEOUT);
    }
}
