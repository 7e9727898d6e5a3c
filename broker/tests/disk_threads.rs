//! `--disk-threads` (docs/storage.md, "Disk threads").
//!
//! Contract: by default every shard's segment writes and fsyncs run on its
//! disk threads (each job is counted in `es_disk_thread_wait_seconds`);
//! `--disk-threads 0` keeps them on io_uring (no job counted). Either way
//! every acknowledged record reads back, also after kill -9 and a restart.
//! A count past `DISK_THREADS_MAX` is refused at start with a message that
//! names the flag. Each disk thread runs with the time slice of
//! `--disk-thread-slice-us` (default 100 us), the shards with the kernel's.

mod common;

use std::process::Command;

use common::*;

/// Produces `requests` requests of 20 records (some large) over both
/// partitions; returns every acknowledged value, by partition.
fn produce_load(b: &Broker, requests: usize) -> Vec<Vec<String>> {
    let mut acked = vec![Vec::new(), Vec::new()];
    for r in 0..requests {
        let values: Vec<String> = (0..20)
            .map(|i| format!("r{r}-{i}-{}", "x".repeat((r * 37 + i * 911) % 9000)))
            .collect();
        let p = (r % 2) as u32;
        produce_values(b, "dt", p, &values);
        acked[p as usize].extend(values);
    }
    acked
}

fn check(b: &Broker, acked: &[Vec<String>]) {
    for (p, values) in acked.iter().enumerate() {
        assert_eq!(&values_of(b, "dt", p as u32), values, "partition {p}");
    }
}

fn disk_jobs(b: &Broker) -> f64 {
    b.metric_sum("es_disk_thread_wait_seconds_count").unwrap_or(0.0)
}

#[test]
fn writes_and_fsyncs_run_on_disk_threads_by_default_and_survive_kill9() {
    let mut b = Broker::start(2);
    create_topic(&b, "dt", 2);
    let acked = produce_load(&b, 30);
    // Every request is a write and a sync at least (one job, or two).
    assert!(disk_jobs(&b) >= 30.0, "jobs counted: {}", disk_jobs(&b));
    check(&b, &acked);
    b.kill9();
    b.restart();
    check(&b, &acked);
    let more = produce_load(&b, 4);
    let all: Vec<Vec<String>> = acked
        .iter()
        .zip(&more)
        .map(|(a, m)| a.iter().chain(m).cloned().collect())
        .collect();
    check(&b, &all);
}

#[test]
fn zero_disk_threads_keeps_the_writes_on_io_uring() {
    let mut b = Broker::start_opts(2, &["--disk-threads", "0"]);
    create_topic(&b, "dt", 2);
    let acked = produce_load(&b, 12);
    assert_eq!(disk_jobs(&b), 0.0);
    check(&b, &acked);
    b.kill9();
    b.restart();
    check(&b, &acked);
}

#[test]
fn too_many_disk_threads_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .args(["--registry-addr", "disabled", "--kafka-addr", "disabled"])
        .args(["--data-dir", dir.path().to_str().unwrap()])
        .args(["--http-addr", "127.0.0.1:0", "--binary-addr", "127.0.0.1:0"])
        .args([
            "--disk-threads",
            &(es_storage::limits::DISK_THREADS_MAX + 1).to_string(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "started with too many disk threads");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--disk-threads"), "{stderr}");
    // Nothing was created in the data directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Each thread of `pid` whose name starts with `prefix`: its scheduler
/// slice in ns (`se.slice` of /proc/PID/task/TID/sched), if the kernel
/// reports one.
fn slices(pid: u32, prefix: &str) -> Vec<Option<u64>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let sched = std::fs::read_to_string(dir.join("sched")).unwrap_or_default();
        let slice = sched
            .lines()
            .find(|l| l.starts_with("se.slice"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse().ok());
        out.push(slice);
    }
    out
}

/// Whether the running kernel grants a fair thread the slice it asks for
/// (Linux 6.12+); older ones accept the call and keep their own.
fn kernel_grants_slices() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 12)
}

#[test]
fn disk_threads_run_with_the_slice_asked_for_and_shards_with_the_kernels() {
    if !kernel_grants_slices() {
        eprintln!("this kernel keeps its own slices (before 6.12): nothing to check");
        return;
    }
    for (args, want_ns) in [
        (&[][..], Some(100_000)),
        (&["--disk-thread-slice-us", "300"][..], Some(300_000)),
        (&["--disk-thread-slice-us", "0"][..], None),
    ] {
        let b = Broker::start_opts(2, args);
        create_topic(&b, "dt", 2);
        produce_load(&b, 4);
        let shards = slices(b.pid(), "es-shard");
        let disk = slices(b.pid(), "es-disk");
        assert!(
            !shards.is_empty() && !disk.is_empty(),
            "threads: {shards:?} {disk:?}"
        );
        let Some(Some(default)) = shards.first().copied() else {
            eprintln!("this kernel reports no slice: nothing to check");
            return;
        };
        for slice in disk {
            assert_eq!(
                slice,
                Some(want_ns.unwrap_or(default)),
                "{args:?}: shard slice {default}"
            );
        }
    }
}
