//! Property test: random appends, reads, seeks and reopens (clean or as after
//! a crash) with tiny segments behave exactly like an in-memory model.

mod common;

use common::run;
use es_storage::{FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Append(Vec<(Option<Vec<u8>>, Vec<u8>, i64)>),
    Read { from: u64, max_bytes: usize },
    SeekTime(i64),
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let record = (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
        proptest::collection::vec(any::<u8>(), 0..80),
        0i64..1000,
    );
    prop_oneof![
        6 => proptest::collection::vec(record, 1..6).prop_map(Op::Append),
        3 => (0u64..120, 1usize..600).prop_map(|(from, max_bytes)| Op::Read { from, max_bytes }),
        1 => (0i64..1100).prop_map(Op::SeekTime),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

fn config(segment_bytes: u64, index_interval_bytes: u32) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        ..LogConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(
        ops in proptest::collection::vec(op(), 1..40),
        segment_bytes in 200u64..2000,
        interval in 1u32..500,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(segment_bytes, interval);
        run(async move {
            let mut model: Vec<Record> = Vec::new();
            let (mut log, _) = PartitionLog::open(dir.path(), cfg.clone(), FsyncBatcher::new()).await.unwrap();
            for op in ops {
                match op {
                    Op::Append(recs) => {
                        let records: Vec<Record> = recs
                            .into_iter()
                            .map(|(key, value, timestamp_ms)| Record { key, value, timestamp_ms })
                            .collect();
                        let a = log.append_durable(&records, ProducerStamp::NONE).await.unwrap();
                        assert_eq!(a.base_offset, Offset(model.len() as u64));
                        model.extend(records);
                        assert_eq!(a.next_offset, Offset(model.len() as u64));
                    }
                    Op::Read { from, max_bytes } => {
                        let got = log.read(Offset(from), max_bytes, log.durable_offset()).await.unwrap();
                        let expect = model.get(from as usize..).unwrap_or(&[]);
                        assert!(got.len() <= expect.len());
                        if !expect.is_empty() {
                            assert!(!got.is_empty(), "a read below the high watermark returns something");
                        }
                        for (i, r) in got.iter().enumerate() {
                            let m = &expect[i];
                            assert_eq!(r.offset, Offset(from + i as u64));
                            assert_eq!((&r.key, &r.value, r.timestamp_ms), (&m.key, &m.value, m.timestamp_ms));
                        }
                    }
                    Op::SeekTime(ts) => {
                        let got = log.offset_for_timestamp(ts, log.durable_offset()).await.unwrap();
                        let expect = model.iter().position(|r| r.timestamp_ms >= ts).map(|i| Offset(i as u64));
                        assert_eq!(got, expect, "seek to {ts}");
                    }
                    Op::Reopen { clean } => {
                        if clean {
                            log.close().await.unwrap();
                        }
                        drop(log);
                        let (reopened, report) =
                            PartitionLog::open(dir.path(), cfg.clone(), FsyncBatcher::new()).await.unwrap();
                        if clean {
                            assert!(report.scanned.is_empty());
                        } else {
                            assert!(report.scanned.len() <= 1, "only the active segment is scanned");
                        }
                        assert!(report.scanned.iter().all(|(_, t)| t.is_none()), "nothing acknowledged is trimmed");
                        log = reopened;
                    }
                }
                assert_eq!(log.next_offset(), Offset(model.len() as u64));
                assert_eq!(log.durable_offset(), Offset(model.len() as u64));
            }
            let all = log.read(Offset(0), usize::MAX, log.durable_offset()).await.unwrap();
            assert_eq!(all.len(), model.len());
        });
    }
}
