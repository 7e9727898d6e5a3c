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

mod common;

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

#[test]
fn any_bad_batch_in_a_sealed_segment_is_corruption() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (first, starts) = image(0, BATCHES);
    let next_base = BATCHES as u64 * PER_BATCH;
    let (second, _) = image(next_base, 4);
    run(async {
        // Its last batch (nothing after it in the segment), its middle one.
        for k in [BATCHES - 1, BATCHES / 2] {
            let what = format!("sealed segment, batch {k}");
            let at = starts[k] + 30;
            let mut bad = first.clone();
            bad[at] ^= 0x5a;
            set_accept_data_loss(false);
            lay_out(&dir, &[(0, &bad), (next_base, &second)]);
            let message = refused(open(&dir).await, &what);
            assert!(
                message.contains(&format!("offsets {}..{next_base}", k as u64 * PER_BATCH)),
                "{message}"
            );
            assert_eq!(std::fs::read(log_file(&dir, 0)).unwrap(), bad, "{what}");
            assert_eq!(
                std::fs::read(log_file(&dir, next_base)).unwrap(),
                second,
                "{what}"
            );
            assert!(corrupt_copies(&dir).is_empty());

            set_accept_data_loss(true);
            let (log, report) = open(&dir).await.unwrap();
            let [q] = &report.quarantined[..] else {
                panic!("{what}: {report:?}")
            };
            let lost_from = k as u64 * PER_BATCH;
            assert_eq!(
                (q.lost.from, q.lost.to),
                (Offset(lost_from), Offset(next_base)),
                "{what}"
            );
            assert_eq!(q.lost.intact_batches, (BATCHES - 1 - k) as u64, "{what}");
            assert_eq!(std::fs::read(&q.copy).unwrap(), &bad[starts[k]..], "{what}");
            let want: Vec<_> = expected((0..lost_from).chain(next_base..next_base + 4 * PER_BATCH));
            assert_eq!(values(&log).await, want, "{what}");
            drop(log);
            set_accept_data_loss(false);
            let (log, report) = open(&dir).await.expect("the loss is accepted once");
            assert!(
                report.missing.is_empty() && report.quarantined.is_empty(),
                "{report:?}"
            );
            assert_eq!(values(&log).await, want, "{what}: after a restart");
        }
    });
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        ..LogConfig::default()
    }
}

/// A cleanly closed log of small segments, one record per batch; returns
/// the segment bases.
fn closed_log(dir: &Path, records: u64) -> Vec<u64> {
    run(async {
        let (log, _) = PartitionLog::open(dir, small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        for o in 0..records {
            log.append_durable(&[rec(Some("k"), &value(o), o as i64)], ProducerStamp::NONE)
                .await
                .unwrap();
        }
        log.close().await.unwrap();
    });
    let mut bases: Vec<u64> = file_names(dir)
        .iter()
        .filter_map(|n| n.strip_suffix(".log").and_then(|b| b.parse().ok()))
        .collect();
    bases.sort();
    bases
}

/// Where each batch of a segment log starts, and its base offset.
fn batches_of(bytes: &[u8]) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = batch::check(&bytes[pos..]).unwrap();
        out.push((pos, h.base_offset.0));
        pos += h.batch_len as usize;
    }
    out
}

#[test]
fn a_damaged_sealed_index_is_rebuilt_from_the_log_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bases = closed_log(dir.path(), 40);
    assert!(bases.len() >= 4, "{bases:?}");
    let ix = es_storage::index_path(dir.path(), Offset(bases[1]));
    let good = std::fs::read(&ix).unwrap();
    let entries = good.len() - es_storage::index::FOOTER_BYTES;
    for at in 0..entries {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        std::fs::write(&ix, &bad).unwrap();
        run(async {
            set_accept_data_loss(false);
            let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
                .await
                .unwrap();
            assert!(
                report.scanned.is_empty(),
                "the footer holds: nothing scanned at open"
            );
            assert_eq!(values(&log).await, expected(0..40), "index byte {at}");
            log.close().await.unwrap();
        });
        let rebuilt = std::fs::read(&ix).unwrap();
        assert_eq!(rebuilt, good, "index byte {at}: rewritten from the log");
    }
}

#[test]
fn a_bad_batch_a_read_meets_in_a_sealed_segment_is_reported_never_cut_or_skipped() {
    // The damaged index makes the first read rebuild it from the log, which
    // meets the bad batch.
    for damaged_index in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let bases = closed_log(dir.path(), 40);
        let (seg, next) = (bases[1], bases[2]);
        let log_path = log_file(dir.path(), seg);
        let mut bytes = std::fs::read(&log_path).unwrap();
        let batches = batches_of(&bytes);
        assert!(batches.len() >= 3, "{batches:?}");
        let (pos, bad_offset) = batches[batches.len() / 2];
        bytes[pos + HEADER_BYTES + 3] ^= 0x5a;
        std::fs::write(&log_path, &bytes).unwrap();
        if damaged_index {
            let ix = es_storage::index_path(dir.path(), Offset(seg));
            let mut index = std::fs::read(&ix).unwrap();
            index[1] ^= 0x5a;
            std::fs::write(&ix, &index).unwrap();
        }
        run(async {
            set_accept_data_loss(false);
            let (log, _) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
                .await
                .unwrap();
            let hw = log.durable_offset();
            // Everything before the bad batch, in as many reads as it takes.
            let mut got = Vec::new();
            let mut from = Offset(0);
            let err = loop {
                match log.read_records(from, 1 << 20, hw).await {
                    Ok(read) => {
                        assert!(read.next_offset > from, "progress below the high watermark");
                        got.extend(read.records.into_iter().map(|r| r.offset.0));
                        from = read.next_offset;
                        assert!(
                            from <= Offset(bad_offset),
                            "read past the bad batch at {bad_offset}: {got:?}"
                        );
                    }
                    Err(e) => break e,
                }
            };
            assert_eq!(
                got,
                (0..bad_offset).collect::<Vec<_>>(),
                "index damaged: {damaged_index}"
            );
            assert_eq!(from, Offset(bad_offset));
            match &err {
                StorageError::Corrupt { path, position, .. } => {
                    assert_eq!(path, &log_path);
                    assert_eq!(*position, pos as u64);
                }
                e => panic!("expected Corrupt, got {e}"),
            }
            // Past it in that segment: through an index entry after it,
            // the records there; without one, the error. Never a skip.
            let after = log.read_records(Offset(bad_offset + 1), 1 << 20, hw).await;
            if damaged_index {
                assert!(matches!(after, Err(StorageError::Corrupt { .. })), "{after:?}");
            } else {
                let first = after.unwrap().records.first().map(|r| r.offset);
                assert_eq!(first, Some(Offset(bad_offset + 1)));
            }
            // The next segment reads as before.
            let rest = log.read(Offset(next), 1 << 20, hw).await.unwrap();
            assert_eq!(rest.first().map(|r| r.offset), Some(Offset(next)));
            log.close().await.unwrap();
        });
        assert_eq!(
            std::fs::read(&log_path).unwrap(),
            bytes,
            "the sealed log is never cut at run time"
        );
    }
}

#[test]
fn a_read_that_meets_a_bad_batch_returns_the_records_before_it() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("p");
    let (bytes, starts) = image(0, BATCHES);
    lay_out(&dir, &[(0, &bytes)]);
    run(async {
        let (log, _) = open(&dir).await.unwrap();
        log.close().await.unwrap();
    });
    // Damaged after a clean close: the open trusts the segment, a read
    // finds the damage.
    let k = BATCHES / 2;
    let mut bad = bytes.clone();
    bad[starts[k] + 70] ^= 0x5a;
    std::fs::write(log_file(&dir, 0), &bad).unwrap();
    run(async {
        set_accept_data_loss(false);
        let (log, report) = open(&dir).await.unwrap();
        assert!(report.scanned.is_empty());
        let hw = log.durable_offset();
        let before = k as u64 * PER_BATCH;
        let first = log.read_records(Offset(0), usize::MAX, hw).await.unwrap();
        let offsets: Vec<u64> = first.records.iter().map(|r| r.offset.0).collect();
        assert_eq!(offsets, (0..before).collect::<Vec<_>>());
        assert_eq!(first.next_offset, Offset(before));
        let mut out = Vec::new();
        let read = log
            .read_batches_into(Offset(1), usize::MAX, usize::MAX, hw, &mut out)
            .await
            .unwrap();
        assert_eq!((read.batches as usize, read.next_offset), (k, Offset(before)));
        assert_eq!(
            out.concat(),
            &bad[..starts[k]],
            "the batches as stored, up to the bad one"
        );
        for from in [before, before + 1] {
            match log.read_records(Offset(from), usize::MAX, hw).await {
                Err(StorageError::Corrupt { position, path, .. }) => {
                    assert_eq!(position, starts[k] as u64);
                    assert_eq!(path, log_file(&dir, 0));
                }
                other => panic!("from {from}: {other:?}"),
            }
        }
        log.close().await.unwrap();
    });
    assert_eq!(std::fs::read(log_file(&dir, 0)).unwrap(), bad);
}

#[test]
fn a_missing_middle_segment_refuses_the_open_or_leaves_its_offsets_empty() {
    let dir = tempfile::tempdir().unwrap();
    let bases = closed_log(dir.path(), 40);
    assert!(bases.len() >= 4, "{bases:?}");
    let (gone, next) = (bases[1], bases[2]);
    std::fs::remove_file(log_file(dir.path(), gone)).unwrap();
    let kept: Vec<(u64, Vec<u8>)> = bases
        .iter()
        .filter(|&&b| b != gone)
        .map(|&b| (b, std::fs::read(log_file(dir.path(), b)).unwrap()))
        .collect();
    run(async {
        set_accept_data_loss(false);
        let message = refused(
            PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new()).await,
            "a segment deleted",
        );
        assert!(message.contains(&format!("offsets {gone}..{next}")), "{message}");
        for (b, bytes) in &kept {
            assert_eq!(&std::fs::read(log_file(dir.path(), *b)).unwrap(), bytes);
        }
        set_accept_data_loss(true);
        let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .unwrap();
        assert_eq!(report.missing, [(Offset(gone), Offset(next))]);
        assert_eq!(values(&log).await, expected((0..gone).chain(next..40)));
        log.close().await.unwrap();
        set_accept_data_loss(false);
        let (log, report) = PartitionLog::open(dir.path(), small_segments(), FsyncBatcher::new())
            .await
            .expect("the loss was accepted once");
        assert!(report.missing.is_empty(), "{report:?}");
        assert_eq!(values(&log).await, expected((0..gone).chain(next..40)));
    });
}

// Bytes past the log's end: the early pages of a batch that never landed.

/// Feeds `bytes` to `early` as a socket would, the whole prefix each time.
fn feed(early: &mut EarlyWrite, bytes: &[u8], step: usize) {
    let mut have = 0;
    while have < bytes.len() {
        have = (have + step).min(bytes.len());
        early.arrived(&bytes[..have]);
    }
}

/// Where the first batch ends the log in the early-write tests.
const FIRST_END: u64 = 1000;

fn segment_len(dir: &Path) -> u64 {
    std::fs::metadata(log_file(dir, 0)).map_or(0, |m| m.len())
}

#[test]
fn a_void_early_writes_pages_are_never_taken_for_a_batch() {
    // A client's batch has its pages written early; another batch is placed
    // first, ending exactly on a page boundary inside those pages; the
    // client's batch never comes. Its page there holds a valid batch whose
    // offsets follow the log's: a restart after a crash must not find it.
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        let boundary = 2 * PAGE_BYTES;
        let model: Model = run_with_disk_threads(threads, async {
            let log = common::open_default(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, FIRST_END).await;
            let other = vec![rec(None, &"o".repeat((boundary - FIRST_END) as usize - 76), 2)];
            assert_eq!(batch::encoded_len(&other) as u64, boundary - FIRST_END);
            let mut client = vec![0x33u8; 600 << 10];
            let mut forged = Vec::new();
            batch::encode(
                Offset(2),
                &[rec(Some("x"), "forged", 3)],
                ProducerStamp::NONE,
                &mut forged,
            );
            let at = (boundary - FIRST_END) as usize;
            client[at..at + forged.len()].copy_from_slice(&forged);
            let mut early = log.begin_early(client.len()).expect("an early write");
            feed(&mut early, &client, 64 << 10);
            let last_page = (FIRST_END + client.len() as u64) / PAGE_BYTES * PAGE_BYTES;
            common::wait_for("the early pages to land", || {
                segment_len(dir.path()) >= last_page // blocking-ok: a test's look at the file
            })
            .await;
            log.append_durable(&other, ProducerStamp::NONE).await.unwrap();
            common::expect(&mut model, &other);
            drop(early);
            assert_eq!(contents(&log).await, model);
            model // dropped without a close: a crash
        });
        run(async {
            set_accept_data_loss(false);
            let (log, report) = open(dir.path()).await.unwrap();
            assert!(report.quarantined.is_empty(), "{report:?}");
            assert_eq!(contents(&log).await, model, "disk threads: {threads}");
            assert_eq!(log.next_offset(), Offset(2));
        });
    }
}

#[test]
fn no_early_write_begins_while_a_void_ones_pages_are_being_written() {
    // Their pages could overlap, and land in either order.
    let dir = tempfile::tempdir().unwrap();
    run(async {
        let log = common::open_default(dir.path()).await;
        let mut model = Vec::new();
        ending_at(&log, &mut model, FIRST_END).await;
        let client = vec![0x44u8; 600 << 10];
        let mut early = log.begin_early(client.len()).expect("an early write");
        feed(&mut early, &client, 64 << 10);
        // Placed first: the early write is void, its writes still in flight.
        log.append_placed(&[rec(None, "first", 2)], ProducerStamp::NONE)
            .unwrap();
        assert!(
            log.begin_early(client.len()).is_none(),
            "a new early write while the void one's pages are still being written"
        );
        drop(early);
        common::wait_for("the void early write's pages to land", || {
            log.begin_early(client.len()).is_some()
        })
        .await;
    });
}

#[test]
fn cutting_a_void_early_writes_pages_keeps_every_batch_placed() {
    // A void early write's pages lie past the end; a later batch written
    // early over them lands where it went: the cut before its write must
    // not lose the pages it wrote early.
    for threads in DISK_THREAD_MODES {
        let dir = tempfile::tempdir().unwrap();
        let model: Model = run_with_disk_threads(threads, async {
            let log = common::open_default(dir.path()).await;
            let mut model = Vec::new();
            ending_at(&log, &mut model, FIRST_END).await;
            let (_, void) = common::produced(3, 200, 3000, 1);
            let mut early = log.begin_early(void.len()).expect("an early write");
            feed(&mut early, &void, 64 << 10);
            let small = vec![rec(None, "small", 2)];
            log.append_durable(&small, ProducerStamp::NONE).await.unwrap();
            common::expect(&mut model, &small);
            drop(early);
            let (records, bytes) = common::produced(5, 100, 3000, 1);
            let slot = std::cell::RefCell::new(None);
            common::wait_for("the void early write's pages to land", || {
                let mut slot = slot.borrow_mut();
                if slot.is_none() {
                    *slot = log.begin_early(bytes.len());
                }
                slot.is_some()
            })
            .await;
            let mut early = slot.into_inner().expect("begun");
            feed(&mut early, &bytes, 64 << 10);
            log.append_batch_durable(bytes, Some(early.ticket()))
                .await
                .unwrap();
            drop(early);
            common::expect(&mut model, &records);
            assert_eq!(contents(&log).await, model);
            model // a crash
        });
        run(async {
            let (log, _) = open(dir.path()).await.unwrap();
            assert_eq!(contents(&log).await, model, "disk threads: {threads}");
        });
    }
}
