//! Damaged data on disk is quarantined and reported, never silently
//! dropped or served.
//!
//! Contract:
//! - a **torn tail** (damage running to the end of the last segment, with
//!   no valid batch after it) is trimmed, as a crash leaves it;
//! - **corruption** (a bad batch with valid batches after it, any bad
//!   batch in a sealed segment, a missing segment) refuses the open and
//!   changes nothing on disk; where recovery may drop data
//!   (`set_accept_data_loss`), the bytes from the bad batch on are copied
//!   to `<base>.log.corrupt-<ms>` exactly, the log is cut there, and new
//!   records get offsets past every one lost, across restarts;
//! - a damaged index is rebuilt from the log and loses nothing;
//! - a read that meets a bad batch returns the records before it, and the
//!   read of the bad batch fails with `Corrupt` (file and position), the
//!   file untouched;
//! - bytes past the log's end (zero padding, the early pages of a batch
//!   that never landed there) are never taken for a batch, nor for a sign
//!   of corruption.
//!
//! Here the open: damage before intact batches, torn tails, padding;
//! `sealed.rs` damage in sealed segments, their indexes and reads, and a
//! missing segment; `early.rs` the early pages of a batch that never
//! landed.

#[path = "../common/mod.rs"]
mod common;
mod early;
mod sealed;

use std::path::{Path, PathBuf};

use common::{contents, ending_at, file_names, rec, run, run_with_disk_threads, Model, DISK_THREAD_MODES};
use es_storage::batch::{self, HEADER_BYTES};
use es_storage::{
    set_accept_data_loss, EarlyWrite, FsyncBatcher, LogConfig, Offset, OpenReport, PartitionLog,
    ProducerStamp, Record, StorageError, PAGE_BYTES,
};

/// Batches of a log image, and records per batch.
const BATCHES: usize = 10;
const PER_BATCH: u64 = 3;

fn value(offset: u64) -> String {
    format!("record {offset} of a batch that must not be lost")
}

/// The records of the batch at `base`.
fn records(base: u64) -> Vec<Record> {
    (base..base + PER_BATCH)
        .map(|o| rec(Some(&format!("k{o}")), &value(o), o as i64))
        .collect()
}

/// The bytes of a segment of `batches` batches from offset `base`, and
/// where each batch starts.
fn image(base: u64, batches: usize) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    for b in 0..batches as u64 {
        starts.push(bytes.len());
        batch::encode(
            Offset(base + b * PER_BATCH),
            &records(base + b * PER_BATCH),
            ProducerStamp::NONE,
            &mut bytes,
        );
    }
    (bytes, starts)
}

fn log_file(dir: &Path, base: u64) -> PathBuf {
    es_storage::log_path(dir, Offset(base))
}

/// A fresh partition directory holding exactly these segment logs.
fn lay_out(dir: &Path, segments: &[(u64, &[u8])]) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for (base, bytes) in segments {
        std::fs::write(log_file(dir, *base), bytes).unwrap();
    }
}

async fn open(dir: &Path) -> es_storage::Result<(PartitionLog, OpenReport)> {
    PartitionLog::open(dir, LogConfig::default(), FsyncBatcher::new()).await
}

/// Every record's (offset, value), read with a small budget so that each
/// read is one batch.
async fn values(log: &PartitionLog) -> Vec<(u64, String)> {
    common::read_all(log)
        .await
        .into_iter()
        .map(|r| (r.offset.0, String::from_utf8(r.value).unwrap()))
        .collect()
}

fn expected(offsets: impl IntoIterator<Item = u64>) -> Vec<(u64, String)> {
    offsets.into_iter().map(|o| (o, value(o))).collect()
}

/// Spots in a batch starting at `start` of `len` bytes: header fields
/// (base offset, length low and high bytes, checksum, magic, record
/// count, last offset delta, a timestamp), the middle of the payload, the
/// last byte.
fn spots(start: usize, len: usize) -> Vec<(usize, &'static str)> {
    vec![
        (start, "base offset"),
        (start + 8, "length, low byte"),
        (start + 9, "length, second byte"),
        (start + 12, "checksum"),
        (start + 16, "magic"),
        (start + 20, "record count"),
        (start + 24, "last offset delta"),
        (start + 33, "first timestamp"),
        (start + len / 2, "payload"),
        (start + len - 1, "last byte"),
    ]
}

/// Batches to damage: the first, one in the middle, the last but one.
const DAMAGED: [usize; 3] = [0, BATCHES / 2, BATCHES - 2];

fn refused(result: es_storage::Result<(PartitionLog, OpenReport)>, what: &str) -> String {
    match result {
        Err(e @ StorageError::DataLoss { .. }) => e.to_string(),
        Err(e) => panic!("{what}: refused with the wrong error: {e}"),
        Ok((_, report)) => panic!("{what}: opened, dropping data: {report:?}"),
    }
}

#[test]
fn damage_with_intact_batches_after_it_refuses_the_open_and_changes_nothing() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (bytes, starts) = image(0, BATCHES);
    run(async {
        set_accept_data_loss(false);
        for k in DAMAGED {
            let len = starts[k + 1] - starts[k];
            for (at, field) in spots(starts[k], len) {
                let what = format!("batch {k}, {field} (byte {at})");
                let mut bad = bytes.clone();
                bad[at] ^= 0x5a;
                lay_out(&dir, &[(0, &bad)]);
                let message = refused(open(&dir).await, &what);
                assert!(
                    message.contains(&format!("at byte {}", starts[k])),
                    "{what}: {message}"
                );
                assert!(
                    message.contains(&format!("offsets {}..", k as u64 * PER_BATCH)),
                    "{what}: {message}"
                );
                assert_eq!(
                    std::fs::read(log_file(&dir, 0)).unwrap(),
                    bad,
                    "{what}: the log is left as it was"
                );
                assert_eq!(
                    file_names(&dir),
                    ["00000000000000000000.log"],
                    "{what}: nothing written beside it"
                );
            }
        }
    });
}

#[test]
fn every_flipped_byte_of_a_middle_batch_refuses_the_open() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (bytes, starts) = image(0, BATCHES);
    let k = BATCHES / 2;
    run(async {
        set_accept_data_loss(false);
        for at in starts[k]..starts[k + 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0xa5;
            lay_out(&dir, &[(0, &bad)]);
            refused(open(&dir).await, &format!("flip at {at}"));
            assert_eq!(std::fs::read(log_file(&dir, 0)).unwrap(), bad);
        }
    });
}

/// The `.corrupt-*` copies in `dir`.
fn corrupt_copies(dir: &Path) -> Vec<PathBuf> {
    file_names(dir)
        .into_iter()
        .filter(|n| n.contains(".log.corrupt-"))
        .map(|n| dir.join(n))
        .collect()
}

#[test]
fn with_data_loss_allowed_corruption_is_copied_aside_cut_off_and_its_offsets_never_reused() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (bytes, starts) = image(0, BATCHES);
    let end = BATCHES as u64 * PER_BATCH;
    run(async {
        for k in DAMAGED {
            let len = starts[k + 1] - starts[k];
            for (at, field) in spots(starts[k], len).into_iter().step_by(2) {
                let what = format!("batch {k}, {field} (byte {at})");
                let mut bad = bytes.clone();
                bad[at] ^= 0x5a;
                lay_out(&dir, &[(0, &bad)]);
                set_accept_data_loss(true);
                let (log, report) = open(&dir).await.unwrap_or_else(|e| panic!("{what}: {e}"));
                let [q] = &report.quarantined[..] else {
                    panic!("{what}: one quarantine, got {report:?}")
                };
                let pos = starts[k];
                assert_eq!(q.position, pos as u64, "{what}");
                assert_eq!(q.bytes, (bad.len() - pos) as u64, "{what}");
                assert_eq!(corrupt_copies(&dir), std::slice::from_ref(&q.copy), "{what}");
                assert_eq!(
                    std::fs::read(&q.copy).unwrap(),
                    &bad[pos..],
                    "{what}: the copy holds the damage on, exactly"
                );
                assert_eq!(
                    std::fs::read(log_file(&dir, 0)).unwrap(),
                    &bad[..pos],
                    "{what}: cut at the bad batch"
                );
                let lost_from = k as u64 * PER_BATCH;
                assert_eq!(
                    (q.lost.from, q.lost.to),
                    (Offset(lost_from), Offset(end)),
                    "{what}"
                );
                let intact = (BATCHES - k - 1) as u64;
                assert_eq!(q.lost.intact_batches, intact, "{what}");
                assert_eq!(q.lost.intact_records, intact * PER_BATCH, "{what}");
                assert_eq!(
                    q.lost.intact_offsets,
                    Some((Offset(lost_from + PER_BATCH), Offset(end - 1))),
                    "{what}"
                );
                assert_eq!(values(&log).await, expected(0..lost_from), "{what}");
                // New records start past every offset lost, even after a
                // crash before the first of them.
                assert_eq!(log.next_offset(), Offset(end), "{what}");
                drop(log);
                set_accept_data_loss(false);
                let (log, report) = open(&dir).await.unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
                assert!(
                    report.quarantined.is_empty() && report.missing.is_empty(),
                    "{what}: {report:?}"
                );
                assert_eq!(log.next_offset(), Offset(end), "{what}: after a crash");
                let a = log
                    .append_durable(&[rec(None, "after the loss", 99)], ProducerStamp::NONE)
                    .await
                    .unwrap();
                assert_eq!(a.base_offset, Offset(end), "{what}");
                drop(log); // a crash: no clean close
                let (log, report) = open(&dir).await.unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
                assert!(
                    report.quarantined.is_empty() && report.missing.is_empty(),
                    "{what}: {report:?}"
                );
                let mut want = expected(0..lost_from);
                want.push((end, "after the loss".into()));
                assert_eq!(values(&log).await, want, "{what}: after a restart");
                assert_eq!(log.next_offset(), Offset(end + 1), "{what}");
            }
        }
    });
}

#[test]
fn torn_tails_are_trimmed_wherever_they_start() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (bytes, starts) = image(0, BATCHES);
    run(async {
        set_accept_data_loss(false);
        for k in [0, BATCHES / 2, BATCHES - 2, BATCHES - 1] {
            let len = bytes.len().min(starts.get(k + 1).copied().unwrap_or(bytes.len())) - starts[k];
            for (at, field) in spots(starts[k], len) {
                let tails: [(&str, Vec<u8>); 3] = [
                    ("cut", bytes[..at].to_vec()),
                    (
                        "zeros to the end",
                        [&bytes[..at], &vec![0u8; bytes.len() - at]].concat(),
                    ),
                    (
                        "garbage to the end",
                        [
                            &bytes[..at],
                            &(at..bytes.len())
                                .map(|i| (i * 131 % 251) as u8)
                                .collect::<Vec<u8>>(),
                        ]
                        .concat(),
                    ),
                ];
                for (shape, torn) in tails {
                    let what = format!("batch {k}, {field} (byte {at}): {shape}");
                    lay_out(&dir, &[(0, &torn)]);
                    let (log, report) = open(&dir).await.unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(report.quarantined.is_empty(), "{what}");
                    let trimmed = report.scanned[0].1.as_ref();
                    if at > starts[k] || shape != "cut" {
                        let t = trimmed.unwrap_or_else(|| panic!("{what}: nothing trimmed"));
                        assert_eq!(t.position, starts[k] as u64, "{what}");
                    }
                    assert!(corrupt_copies(&dir).is_empty(), "{what}");
                    let kept = k as u64 * PER_BATCH;
                    assert_eq!(values(&log).await, expected(0..kept), "{what}");
                    assert_eq!(
                        log.next_offset(),
                        Offset(kept),
                        "{what}: a torn batch was never acknowledged"
                    );
                }
            }
        }
    });
}

#[test]
fn padding_and_the_writers_end_of_the_log_are_not_damage() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (bytes, _) = image(0, BATCHES);
    let end = BATCHES as u64 * PER_BATCH;
    let page = PAGE_BYTES as usize;
    let padded = bytes.len().div_ceil(page) * page;
    run(async {
        set_accept_data_loss(false);
        // A direct writer's zero padding: cut quietly.
        let mut with = bytes.clone();
        with.resize(padded, 0);
        lay_out(&dir, &[(0, &with)]);
        let (log, report) = open(&dir).await.unwrap();
        assert_eq!(report.scanned[0].1, None, "padding is not a torn tail");
        assert_eq!(log.next_offset(), Offset(end));
        drop(log);
        // Zeros to the page's end, then a page of batches a client chose
        // (early pages of a batch that never landed), their offsets
        // following the log's: the log ends at the zeros.
        let (forged, _) = image(end, 3);
        let mut with = bytes.clone();
        with.resize(padded, 0);
        with.extend_from_slice(&forged);
        lay_out(&dir, &[(0, &with)]);
        let (log, report) = open(&dir).await.expect("a torn tail, not corruption");
        let t = report.scanned[0].1.as_ref().expect("trimmed");
        assert_eq!(t.position, bytes.len() as u64);
        assert!(report.quarantined.is_empty());
        assert_eq!(values(&log).await, expected(0..end));
    });
}
