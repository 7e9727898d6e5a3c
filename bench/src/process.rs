//! A broker process as the harnesses run one: two free loopback ports,
//! `es-broker` started in its own process group with its output in a log,
//! ready when `GET /ready` answers 200, stopped by SIGTERM and, after a
//! hang guard, SIGKILL. es-bench's `--start-broker` (`broker.rs`) and
//! es-chaos's nodes (`bench/chaos/src/node.rs`) both start brokers through
//! it; es-chaos includes this file (`#[path]`), as it depends on
//! es-protocol alone. Std and libc only.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why a started broker is not ready.
pub enum NotReady {
    /// It exited first.
    Exited(ExitStatus),
    /// It still runs and did not answer 200 within the wait.
    TimedOut,
}

/// Two free loopback ports (both held until both are known).
pub fn free_ports() -> Result<(SocketAddr, SocketAddr), String> {
    let bind = || TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr().map(|a| (l, a)));
    let (_a, http) = bind().map_err(|e| format!("no free port: {e}"))?;
    let (_b, binary) = bind().map_err(|e| format!("no free port: {e}"))?;
    Ok((http, binary))
}

/// Starts `cmd` with no input and its stdout and stderr into `log` (at
/// `log_path`), in its own process group: a Ctrl-C to the harness is not
/// the broker's, the harness stops it.
pub fn spawn(cmd: &mut Command, log: File, log_path: &Path) -> Result<Child, String> {
    let err = log
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", Path::new(cmd.get_program()).display()))
}

/// Waits until `child` answers `GET /ready` on `http` with 200, at most
/// `timeout` (a hang guard, not a verdict).
pub fn wait_ready(child: &mut Child, http: SocketAddr, timeout: Duration) -> Result<(), NotReady> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(NotReady::Exited(status));
        }
        if ready(http) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(NotReady::TimedOut)
}

/// Sends `sig` to `child`, which has not been reaped; whether it was sent.
pub fn signal(child: &Child, sig: i32) -> bool {
    let Ok(pid) = i32::try_from(child.id()) else {
        return false;
    };
    // SAFETY: signalling our own child, which we have not reaped, so its
    // pid is still ours.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// SIGTERM, then waits up to `timeout` for the exit; SIGKILL after it.
/// The exit status, once reaped.
pub fn terminate(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    // Reaped already (it exited while the harness waited): its pid may be
    // another process's by now.
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    signal(child, libc::SIGTERM);
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// The last 20 lines of the log at `path`, for error messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
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
