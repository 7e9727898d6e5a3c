//! Damage in sealed segments: any bad batch is corruption, a damaged
//! index is rebuilt, a read that meets a bad batch reports it, a missing
//! segment refuses the open.

use super::*;

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
