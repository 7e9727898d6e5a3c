//! Storage engine benchmark: durable appends vs the disk's own limit.
//!
//! Prints, from one run on one disk:
//! - raw: `write` + `fdatasync` of the same bytes one append writes
//!   (a 1 KiB record encodes to 1100 bytes), back to back, std I/O: the
//!   disk's limit, and the 100% every other row is compared with;
//! - raw io_uring: the same loop through glommio's io_uring files, the floor
//!   for an engine whose I/O goes through io_uring;
//! - engine: `append_durable` of one 1 KiB record with 1, 16 and 256
//!   concurrent appenders on one shard, through the group-commit batcher,
//!   with the segment writes and fsyncs through io_uring, then on the
//!   shard's disk threads (`DISK_THREADS_DEFAULT` of them, as the broker).
//!
//! MB/s counts bytes written to the log file (10^6 bytes). Latencies are per
//! append, from call to fsynced. Run: `make bench-storage`
//! (env: BENCH_DIR = directory on the disk to test, default ./target;
//! BENCH_SECS = seconds per phase, default 3).

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::time::{Duration, Instant};

use es_storage::{batch, FsyncBatcher, LogConfig, PartitionLog, ProducerStamp, Record};
use hdrhistogram::Histogram;

const VALUE_BYTES: usize = 1024;
/// Shards spin this long before parking, as the broker's do: an fsync
/// completes in well under a millisecond, and waking a parked ring costs more.
const SPIN_BEFORE_PARK_US: u64 = 500;

struct Figures {
    name: String,
    appends: u64,
    bytes: u64,
    elapsed: Duration,
    hist: Histogram<u64>,
    fsyncs: u64,
}

impl Figures {
    fn mb_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
    fn row(&self, raw_mb_s: f64) {
        println!(
            "{:<22} {:>10.0} {:>9.2} {:>7.0}% {:>9.0} {:>9.0} {:>9.0} {:>10.1}",
            self.name,
            self.appends as f64 / self.elapsed.as_secs_f64(),
            self.mb_s(),
            100.0 * self.mb_s() / raw_mb_s,
            self.hist.value_at_quantile(0.50) as f64,
            self.hist.value_at_quantile(0.99) as f64,
            self.hist.max() as f64,
            self.appends as f64 / self.fsyncs.max(1) as f64,
        );
    }
}

fn record() -> Record {
    Record {
        key: None,
        value: vec![b'x'; VALUE_BYTES],
        timestamp_ms: 1,
    }
}

fn raw(dir: &std::path::Path, secs: Duration) -> Figures {
    let write_bytes = batch::encoded_len(&[record()]);
    let path = dir.join("raw.log");
    let mut f = std::fs::File::create(&path).unwrap();
    let buf = vec![b'x'; write_bytes];
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let start = Instant::now();
    let mut appends = 0u64;
    while start.elapsed() < secs {
        let t = Instant::now();
        f.write_all(&buf).unwrap();
        f.sync_data().unwrap();
        hist.record(t.elapsed().as_micros() as u64).unwrap();
        appends += 1;
    }
    let elapsed = start.elapsed();
    std::fs::remove_file(&path).unwrap();
    Figures {
        name: format!("raw write+fdatasync {write_bytes}B"),
        appends,
        bytes: appends * write_bytes as u64,
        elapsed,
        hist,
        fsyncs: appends,
    }
}

fn executor() -> glommio::LocalExecutor {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .spin_before_park(Duration::from_micros(SPIN_BEFORE_PARK_US))
        .make()
        .unwrap()
}

/// The same write + fdatasync loop as `raw`, through glommio's io_uring
/// files: the floor for an engine whose I/O must go through io_uring.
fn raw_uring(dir: &std::path::Path, secs: Duration) -> Figures {
    let write_bytes = batch::encoded_len(&[record()]);
    let path = dir.join("raw-uring.log");
    let fig = executor().run(async {
        let f = glommio::io::BufferedFile::create(&path).await.unwrap();
        let mut hist = Histogram::<u64>::new(3).unwrap();
        let start = Instant::now();
        let mut appends = 0u64;
        while start.elapsed() < secs {
            let t = Instant::now();
            f.write_at(vec![b'x'; write_bytes], appends * write_bytes as u64)
                .await
                .unwrap();
            f.fdatasync().await.unwrap();
            hist.record(t.elapsed().as_micros() as u64).unwrap();
            appends += 1;
        }
        Figures {
            name: format!("raw io_uring {write_bytes}B"),
            appends,
            bytes: appends * write_bytes as u64,
            elapsed: start.elapsed(),
            hist,
            fsyncs: appends,
        }
    });
    std::fs::remove_file(&path).unwrap();
    fig
}

fn engine(dir: &std::path::Path, appenders: usize, threads: usize, secs: Duration) -> Figures {
    let part = dir.join(format!("engine-{appenders}"));
    es_storage::start_disk_threads(
        threads,
        "bench-disk",
        es_storage::limits::DISK_THREAD_SLICE_US_DEFAULT,
    )
    .unwrap();
    let fig = executor().run(async move {
        let batcher = FsyncBatcher::new();
        let (log, _) = PartitionLog::open(&part, LogConfig::default(), batcher.clone())
            .await
            .unwrap();
        let log = Rc::new(log);
        let hist = Rc::new(RefCell::new(Histogram::<u64>::new(3).unwrap()));
        let start = Instant::now();
        let tasks: Vec<_> = (0..appenders)
            .map(|_| {
                let (log, hist) = (log.clone(), hist.clone());
                glommio::spawn_local(async move {
                    let recs = [record()];
                    let mut n = 0u64;
                    while start.elapsed() < secs {
                        let t = Instant::now();
                        log.append_durable(&recs, ProducerStamp::NONE).await.unwrap();
                        hist.borrow_mut().record(t.elapsed().as_micros() as u64).unwrap();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut appends = 0;
        for t in tasks {
            appends += t.await;
        }
        let elapsed = start.elapsed();
        log.close().await.unwrap();
        let hist = hist.borrow().clone();
        Figures {
            name: if threads == 0 {
                format!("engine, {appenders} appenders")
            } else {
                format!("threads, {appenders} appenders")
            },
            appends,
            bytes: appends * batch::encoded_len(&[record()]) as u64,
            elapsed,
            hist,
            fsyncs: batcher.stats().rounds,
        }
    });
    std::fs::remove_dir_all(dir.join(format!("engine-{appenders}"))).unwrap();
    fig
}

fn main() {
    let base = std::env::var("BENCH_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::tempdir_in(&base).unwrap();
    let secs = Duration::from_secs(
        std::env::var("BENCH_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3),
    );
    println!(
        "storage benchmark: 1 KiB records, {}s per phase, dir {}",
        secs.as_secs(),
        dir.path().display()
    );
    println!(
        "{:<22} {:>10} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10}",
        "phase", "appends/s", "MB/s", "vs raw", "p50 us", "p99 us", "max us", "appends/fs"
    );
    let r = raw(dir.path(), secs);
    let raw_mb_s = r.mb_s();
    r.row(raw_mb_s);
    raw_uring(dir.path(), secs).row(raw_mb_s);
    for threads in [0, es_storage::limits::DISK_THREADS_DEFAULT] {
        for appenders in [1, 16, 256] {
            engine(dir.path(), appenders, threads, secs).row(raw_mb_s);
        }
    }
}
