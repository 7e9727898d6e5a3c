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
//!
//! Files: `client` (the HTTP client, metrics), `broker` (the process),
//! `api` (helpers over the API, encodings, data files), `raw_http` (HTTP
//! over a bare TCP stream), `pki` (test certificates), `port` and `wait`
//! (shared with the CLI's and tools' tests by path).
#![allow(dead_code)]

mod api;
mod broker;
mod client;
pub mod pki;
mod port;
mod raw_http;
mod wait;

pub use port::free_port;
#[allow(unused_imports)] // each test binary uses part of the harness
pub use wait::{hang_guard, poll_until, wait_for};
#[allow(unused_imports)]
pub use {api::*, broker::*, client::*, raw_http::*};

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
