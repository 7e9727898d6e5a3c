//! Recovery after a torn or corrupted last batch.
//!
//! Contract: whatever happened to the bytes of the last batch (cut at any
//! byte, or any byte flipped), reopening keeps every earlier batch intact,
//! trims the damaged one and everything after it, reports what it trimmed,
//! and the next append continues at the trimmed batch's base offset.

mod common;

use std::path::Path;

use common::{rec, run};
use es_storage::{FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp};

const BATCHES: u64 = 5;
const PER_BATCH: u64 = 3;

/// Writes BATCHES batches and returns the log bytes and where the last batch starts.
fn build(dir: &Path) -> (Vec<u8>, usize) {
    run(async {
        let (log, _) = PartitionLog::open(dir, LogConfig::default(), FsyncBatcher::new())
            .await
            .unwrap();
        for b in 0..BATCHES {
            let records: Vec<_> = (0..PER_BATCH)
                .map(|i| {
                    rec(
                        Some(&format!("k{b}")),
                        &format!("batch {b} record {i}"),
                        (b * 10 + i) as i64,
                    )
                })
                .collect();
            log.append_durable(&records, ProducerStamp::NONE).await.unwrap();
        }
        log.close().await.unwrap();
    });
    let bytes = std::fs::read(es_storage::log_path(dir, Offset(0))).unwrap();
    let last_start = {
        // Walk the batch lengths to find the last batch.
        let mut pos = 0usize;
        let mut last = 0usize;
        while pos < bytes.len() {
            last = pos;
            let h = es_storage::batch::check(&bytes[pos..]).unwrap();
            pos += h.batch_len as usize;
        }
        last
    };
    (bytes, last_start)
}

/// Reopens a partition holding exactly `log_bytes` (no index), checks the
/// recovery outcome and that appends continue at the right offset.
async fn check_recovers(dir: &Path, log_bytes: &[u8], last_start: usize, what: &str) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(es_storage::log_path(dir, Offset(0)), log_bytes).unwrap();
    let (log, report) = PartitionLog::open(dir, LogConfig::default(), FsyncBatcher::new())
        .await
        .unwrap();
    let kept = (BATCHES - 1) * PER_BATCH;
    assert_eq!(log.next_offset(), Offset(kept), "{what}");
    assert_eq!(report.scanned.len(), 1, "{what}");
    let trimmed = report.scanned[0].1.as_ref();
    if log_bytes.len() > last_start {
        let t = trimmed.unwrap_or_else(|| panic!("{what}: nothing trimmed"));
        assert_eq!(t.position, last_start as u64, "{what}");
        assert_eq!(t.bytes_dropped, (log_bytes.len() - last_start) as u64, "{what}");
    } else {
        assert!(trimmed.is_none(), "{what}");
    }
    let on_disk = std::fs::metadata(es_storage::log_path(dir, Offset(0)))
        .unwrap()
        .len();
    assert_eq!(
        on_disk, last_start as u64,
        "{what}: file truncated at the last good batch"
    );
    let records = log
        .read(Offset(0), usize::MAX, log.durable_offset())
        .await
        .unwrap();
    assert_eq!(records.len() as u64, kept, "{what}");
    for (i, r) in records.iter().enumerate() {
        let (b, k) = (i as u64 / PER_BATCH, i as u64 % PER_BATCH);
        assert_eq!(r.offset, Offset(i as u64));
        assert_eq!(r.value, format!("batch {b} record {k}").into_bytes(), "{what}");
    }
    let a = log
        .append_durable(&[rec(None, "next", 99)], ProducerStamp::NONE)
        .await
        .unwrap();
    assert_eq!(a.base_offset, Offset(kept), "{what}: next append continues");
    log.close().await.unwrap();
    let (log, report) = PartitionLog::open(dir, LogConfig::default(), FsyncBatcher::new())
        .await
        .unwrap();
    assert!(report.scanned.is_empty(), "{what}: clean after close");
    let records = log
        .read(Offset(0), usize::MAX, log.durable_offset())
        .await
        .unwrap();
    assert_eq!(records.len() as u64, kept + 1);
    assert_eq!(records.last().unwrap().value, b"next");
}

#[test]
fn last_batch_cut_at_every_byte() {
    let src = tempfile::tempdir().unwrap();
    let (bytes, last_start) = build(src.path());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    run(async {
        for cut in last_start..bytes.len() {
            check_recovers(&dir, &bytes[..cut], last_start, &format!("cut at {cut}")).await;
        }
    });
}

#[test]
fn any_flipped_byte_in_last_batch_is_trimmed() {
    let src = tempfile::tempdir().unwrap();
    let (bytes, last_start) = build(src.path());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    run(async {
        for at in last_start..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x5a;
            check_recovers(&dir, &bad, last_start, &format!("flip at {at}")).await;
        }
    });
}

#[test]
fn garbage_after_the_last_batch_is_trimmed() {
    let src = tempfile::tempdir().unwrap();
    let (bytes, _) = build(src.path());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    run(async {
        for garbage in [
            vec![0u8; 4096],
            b"garbage bytes from a bad disk".to_vec(),
            vec![0xff; 7],
        ] {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let mut with = bytes.clone();
            with.extend_from_slice(&garbage);
            std::fs::write(es_storage::log_path(&dir, Offset(0)), &with).unwrap();
            let (log, report) = PartitionLog::open(&dir, LogConfig::default(), FsyncBatcher::new())
                .await
                .unwrap();
            assert_eq!(log.next_offset(), Offset(BATCHES * PER_BATCH));
            let t = report.scanned[0].1.as_ref().expect("trimmed");
            assert_eq!(t.position, bytes.len() as u64);
            assert_eq!(t.bytes_dropped, garbage.len() as u64);
        }
    });
}
