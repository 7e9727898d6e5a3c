//! Running out of file descriptors poisons nothing: an append whose write
//! could not start (no descriptor to create the next segment, or to open
//! the active segment's writer) fails with `StorageError::Refused`, and so
//! does every append queued behind it; appends already written stay
//! durable; the log is back at its written end, so the retry takes the
//! same offsets; reads of closed segments keep working through the cache;
//! once descriptors free up the partition writes on, and a restart finds
//! exactly what was acknowledged.
//!
//! The shortage is real: a child process (this test binary, running the
//! ignored `descriptors_child`) lowers its own RLIMIT_NOFILE to its highest
//! descriptor and fills every lower one free, so that a new descriptor
//! fails with EMFILE until one is closed; once with the writes on io_uring,
//! once on disk threads.

mod common;

use std::path::Path;

use common::{read_all, rec, run_with_disk_threads, DISK_THREAD_MODES};
use es_storage::{FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, StorageError};

const CHILD_DIR_ENV: &str = "ES_DESCRIPTORS_CHILD_DIR";

/// Takes every descriptor left: the soft limit down to just past the
/// highest one open, then the free ones below it filled. Returns the old
/// limit and the fillers (drop them to free descriptors).
fn exhaust() -> (u64, Vec<std::fs::File>) {
    let highest = std::fs::read_dir("/proc/self/fd") // blocking-ok: a test
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap();
    let old = set_open_files(highest + 1);
    let mut fillers = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            // blocking-ok: a test
            Ok(f) => fillers.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => return (old, fillers),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Sets this process's soft open-files limit; returns the old one.
fn set_open_files(soft: u64) -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit on structs we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut l), 0);
        let old = l.rlim_cur;
        l.rlim_cur = soft;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &l), 0);
        old
    }
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

#[track_caller]
fn refused(got: Result<es_storage::Appended, StorageError>) -> String {
    match got {
        Err(e @ StorageError::Refused { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
#[ignore = "run by running_out_of_descriptors_gives_back_and_recovers as a child process"]
fn descriptors_child() {
    let dir = std::env::var(CHILD_DIR_ENV).expect("set by the parent test");
    let threads: usize = std::env::var("ES_DESCRIPTORS_DISK_THREADS")
        .unwrap()
        .parse()
        .unwrap();
    run_with_disk_threads(threads, async move {
        let dir = Path::new(&dir);
        es_storage::set_open_segments_max(2);
        let batcher = FsyncBatcher::new();
        let (log, _) = PartitionLog::open(&dir.join("a"), small_segments(), batcher.clone())
            .await
            .unwrap();
        let (fresh, _) = PartitionLog::open(&dir.join("b"), LogConfig::default(), batcher)
            .await
            .unwrap();
        let value = "v".repeat(1000);
        // Too big to share a segment with much: each one rolls.
        let big = "w".repeat(3000);
        // Three closed segments and a written active one.
        for i in 0..14 {
            log.append_durable(&[rec(None, &value, i)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        assert!(log.segment_count() >= 4, "{} segments", log.segment_count());
        let before = log.next_offset();
        let segments = log.segment_count();

        let (limit, fillers) = exhaust();
        // A write that fits the active segment needs no descriptor.
        let fits = log
            .append_durable(&[rec(None, "small", 20)], ProducerStamp::NONE)
            .await
            .unwrap();
        assert_eq!(fits.base_offset, before);
        // Three appends queued at once: the first rolls (a new file), so
        // none of them is written; all are refused and given back.
        let placed: Vec<_> = (0..3)
            .map(|i| {
                log.append_placed(&[rec(None, &big, 30 + i)], ProducerStamp::NONE)
                    .unwrap()
            })
            .collect();
        assert_eq!(placed[0].base_offset, fits.next_offset);
        // Their waits start before the write loop runs, as an append's do.
        let waits = futures::future::join_all(placed.iter().map(|p| log.wait_durable(p.next_offset))).await;
        for (wait, p) in waits.into_iter().zip(&placed) {
            let why = refused(wait.map(|()| *p));
            assert!(why.contains("Too many open files"), "{why}");
        }
        assert_eq!(log.next_offset(), fits.next_offset, "back at the written end");
        assert_eq!(log.segment_count(), segments, "the rolled segment is gone");
        assert!(log.failure().is_none(), "not poisoned");
        // Again: refused the same way, nothing taken.
        refused(
            log.append_durable(&[rec(None, &big, 40)], ProducerStamp::NONE)
                .await,
        );
        // A partition's first write opens its writer: refused, not poisoned.
        refused(
            fresh
                .append_durable(&[rec(None, "first", 41)], ProducerStamp::NONE)
                .await,
        );
        assert!(fresh.failure().is_none());
        assert_eq!(fresh.next_offset(), Offset(0));
        // Closed segments are read through the cache, which gives up one
        // of its own files for each it must open.
        let all = read_all(&log).await;
        assert_eq!(all.len() as u64, fits.next_offset.0);
        assert_eq!(all.last().unwrap().value, b"small");
        assert!(es_storage::open_segment_files() <= 2);

        // Descriptors again: the same writes go through, at the same offsets.
        drop(fillers);
        set_open_files(limit);
        let again = log
            .append_durable(&[rec(None, &big, 30)], ProducerStamp::NONE)
            .await
            .unwrap();
        assert_eq!(again.base_offset, placed[0].base_offset);
        assert_eq!(log.segment_count(), segments + 1, "rolled this time");
        let first = fresh
            .append_durable(&[rec(None, "first", 41)], ProducerStamp::NONE)
            .await
            .unwrap();
        assert_eq!(first.base_offset, Offset(0));
        log.close().await.unwrap();
        fresh.close().await.unwrap();
        println!("DESCRIPTORS OK {}", again.next_offset.0);
    });
}

#[test]
fn running_out_of_descriptors_gives_back_and_recovers() {
    for threads in DISK_THREAD_MODES {
        gives_back_and_recovers(threads);
    }
}

/// The child's writes go through io_uring (0) or `threads` disk threads.
fn gives_back_and_recovers(threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let end = common::child_reports(
        "descriptors_child",
        &[
            (CHILD_DIR_ENV, dir.path().display().to_string()),
            ("ES_DESCRIPTORS_DISK_THREADS", threads.to_string()),
        ],
        "DESCRIPTORS OK",
        &format!("{threads} disk threads"),
    );
    common::run(async move {
        let (log, report) = PartitionLog::open(&dir.path().join("a"), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        assert!(report.scanned.is_empty(), "closed cleanly: {:?}", report.scanned);
        assert_eq!(log.next_offset(), Offset(end), "exactly what was acknowledged");
        let all = read_all(&log).await;
        assert_eq!(all.len() as u64, end);
        assert_eq!(all[14].value, b"small");
        log.close().await.unwrap();
    });
}
