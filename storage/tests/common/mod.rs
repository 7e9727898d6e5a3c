//! Helpers shared by the storage integration tests.
#![allow(dead_code)]

use std::future::Future;

use es_storage::Record;

/// How long [`wait_for`] may wait before the test gives up as hung:
/// `ES_TEST_WAIT_SECS`, else 10 minutes. A guard, not a limit on speed.
pub fn hang_guard() -> std::time::Duration {
    let secs = std::env::var("ES_TEST_WAIT_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(600);
    std::time::Duration::from_secs(secs)
}

/// Polls `cond` every 10 ms, letting the executor run meanwhile, until it
/// holds; gives up only after [`hang_guard`]. The one wait of these tests.
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let guard = hang_guard();
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < guard,
            "gave up waiting for {what} after {guard:?} (a guard against a hang, \
             not a limit on speed: ES_TEST_WAIT_SECS sets it)"
        );
        glommio::timer::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Runs `fut` on a fresh glommio executor, nudged as a shard is
/// (`es_storage::Nudge`: a lost wake-up of the executor, seen under heavy
/// load, costs one nudge interval instead of hanging the test).
pub fn run<T>(fut: impl Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor (needs io_uring and >= 512 KiB memlock)")
        .run(async move {
            let nudge = es_storage::Nudge::install().expect("nudge");
            let out = fut.await;
            drop(nudge);
            out
        })
}

/// Like [`run`], with the segment writer's direct writes and fsyncs on
/// `threads` disk threads (0: through io_uring, as `run`).
pub fn run_with_disk_threads<T>(threads: usize, fut: impl Future<Output = T>) -> T {
    es_storage::start_disk_threads(
        threads,
        "es-test-disk",
        es_storage::limits::DISK_THREAD_SLICE_US_DEFAULT,
    )
    .expect("disk threads");
    run(fut)
}

/// Disk thread counts a test runs with: io_uring, then two threads.
pub const DISK_THREAD_MODES: [usize; 2] = [0, 2];

pub fn rec(key: Option<&str>, value: &str, ts: i64) -> Record {
    Record {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.as_bytes().to_vec(),
        timestamp_ms: ts,
    }
}

/// The wall clock in ms since the Unix epoch, as the broker passes it to
/// `PartitionLog::cleanup`.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// Every record from the log start to the high watermark, paging with
/// `read_records` and a small byte budget (so gaps and segment edges are
/// crossed one batch at a time).
pub async fn read_all(log: &es_storage::PartitionLog) -> Vec<es_storage::StoredRecord> {
    let hw = log.durable_offset();
    let mut from = log.log_start_offset();
    let mut out = Vec::new();
    while from < hw {
        let got = log.read_records(from, 1, hw).await.expect("read");
        assert!(
            got.next_offset > from,
            "a read below the high watermark makes progress"
        );
        out.extend(got.records);
        from = got.next_offset;
    }
    out
}

/// Names of the files in a directory, sorted.
pub fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// (offset, key, value) of every record in a log, in order.
pub type Model = Vec<(u64, Option<Vec<u8>>, Vec<u8>)>;

/// What the log holds, as a [`Model`].
pub async fn contents(log: &es_storage::PartitionLog) -> Model {
    read_all(log)
        .await
        .into_iter()
        .map(|r| (r.offset.0, r.key, r.value))
        .collect()
}

/// Adds `records`, appended next, to `model`.
pub fn expect(model: &mut Model, records: &[Record]) {
    for r in records {
        let offset = model.len() as u64;
        model.push((offset, r.key.clone(), r.value.clone()));
    }
}

/// Appends a first batch that ends the log at byte `end` (at least 78).
pub async fn ending_at(log: &es_storage::PartitionLog, model: &mut Model, end: u64) {
    use es_storage::batch;
    let overhead = (batch::HEADER_BYTES + batch::RECORD_OVERHEAD_BYTES + 1) as u64;
    let first = vec![rec(Some("a"), &"f".repeat((end - overhead) as usize), 1)];
    log.append_durable(&first, es_storage::ProducerStamp::NONE)
        .await
        .unwrap();
    expect(model, &first);
}

/// A producer's batch (offsets from 0, no producer id) of `n` records, the
/// `i`th with a value of `value_len + i * step` bytes that depend on `seed`.
pub fn produced(seed: u8, n: usize, value_len: usize, step: usize) -> (Vec<Record>, Vec<u8>) {
    let records: Vec<Record> = (0..n)
        .map(|i| Record {
            key: Some(format!("k{seed}-{i}").into_bytes()),
            value: (0..value_len + step * i)
                .map(|j| (j as u8).wrapping_mul(seed).wrapping_add(i as u8))
                .collect(),
            timestamp_ms: 1_700_000_000_000 + i as i64,
        })
        .collect();
    let mut out = Vec::new();
    es_storage::batch::encode(
        es_storage::Offset(0),
        &records,
        es_storage::ProducerStamp::NONE,
        &mut out,
    );
    (records, out)
}

/// Opens the partition log in `dir` with the default config.
pub async fn open_default(dir: &std::path::Path) -> es_storage::PartitionLog {
    es_storage::PartitionLog::open(
        dir,
        es_storage::LogConfig::default(),
        es_storage::FsyncBatcher::new(),
    )
    .await
    .expect("open")
    .0
}

/// Runs `child`, an `#[ignore]`d test of this same test binary, alone in a
/// child process (for a fault the parent must not share: a descriptor
/// limit, a failed write), with `env` set; `what` names the run in
/// messages. The child ends by printing `<marker> N`; returns N, panicking
/// with the child's output when it failed or did not report.
pub fn child_reports(child: &str, env: &[(&str, String)], marker: &str, what: &str) -> u64 {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--ignored", "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed ({what}): {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = format!("{marker} ");
    stdout
        .lines()
        .find_map(|l| l.split(prefix.as_str()).nth(1))
        .unwrap_or_else(|| panic!("child did not report: {stdout}"))
        .trim()
        .parse()
        .unwrap()
}
