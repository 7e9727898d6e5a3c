//! `Broker`: the `es-broker` process a test runs, its start, restarts and
//! stop; a start that must be refused; the open-files limit it inherits.

use super::*;

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
