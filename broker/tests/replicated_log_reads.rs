//! A partition log in format version 2 (a replicated partition's: its
//! segment log is its Raft log, written with `append_entry`, blank and
//! membership entries between the data entries) read through each of a
//! broker's client paths: HTTP records, the binary protocol's batches
//! (which go out in the protocol's version 1 layout) and the Kafka
//! listener's Fetch (kcat). Each gives exactly the data records, at dense
//! offsets; no control batch reaches a client.

mod common;
mod kafka_common;

use std::path::Path;

use es_protocol::client::{Client, Options};
use es_protocol::requests::fetch::Fetch;
use es_storage::batch::{encode_v2, RaftStamp, CONTROL_BLANK, CONTROL_MEMBERSHIP};
use es_storage::{
    BatchBuf, EntryBody, FsyncBatcher, LogConfig, Offset, PartitionLog, ProducerStamp, Record, Stamping,
};

use common::{create_topic, describe, fetch_all};
use kafka_common::{kcat, start};

/// The entries written: `(term, index, batches)`, 0 batches = a control
/// entry (index 1 a membership, the others blank); 3 records per batch.
const ENTRIES: &[(u64, u64, usize)] = &[(1, 1, 0), (1, 2, 2), (2, 3, 0), (2, 4, 1), (3, 5, 0), (3, 6, 3)];

/// A produced version 2 batch of `values` (stamp 0, offsets from 0).
fn batch(values: &[String]) -> BatchBuf {
    let recs: Vec<Record> = values
        .iter()
        .map(|v| Record {
            key: Some(b"k".to_vec()),
            value: v.clone().into_bytes(),
            timestamp_ms: 1_700_000_000_000,
        })
        .collect();
    let mut out = Vec::new();
    encode_v2(
        Offset(0),
        &recs,
        ProducerStamp::NONE,
        RaftStamp::default(),
        &mut out,
    );
    BatchBuf::from(out)
}

/// Writes ENTRIES into the (empty) partition log in `dir` as a leader
/// does, closes it, and returns the values written, in offset order.
fn write_v2_log(dir: &Path) -> Vec<String> {
    let dir = dir.to_path_buf();
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor (needs io_uring and >= 512 KiB memlock)")
        .run(async move {
            let (log, _) = PartitionLog::open(&dir, LogConfig::default(), FsyncBatcher::new())
                .await
                .expect("open the partition log");
            let mut values = Vec::new();
            for &(term, index, batches) in ENTRIES {
                let body = if batches == 0 {
                    let kind = if index == 1 {
                        CONTROL_MEMBERSHIP
                    } else {
                        CONTROL_BLANK
                    };
                    EntryBody::Control {
                        kind,
                        body: br#"{"configs":[[1]],"nodes":[1]}"#.to_vec(),
                    }
                } else {
                    let bs = (0..batches)
                        .map(|b| {
                            let vs: Vec<String> = (0..3).map(|i| format!("e{index}-b{b}-r{i}")).collect();
                            values.extend(vs.iter().cloned());
                            batch(&vs)
                        })
                        .collect();
                    EntryBody::Batches(bs, Stamping::Leader)
                };
                log.append_entry(term, index, body).expect("append an entry");
            }
            log.wait_durable_index(ENTRIES.len() as u64)
                .await
                .expect("entries durable");
            log.close().await.expect("close");
            values
        })
}

#[test]
fn a_version_2_log_reads_as_its_data_records_on_every_client_path() {
    let (mut b, kafka) = start(1, &[]);
    create_topic(&b, "replicated", 1);
    b.sigterm_and_wait();
    let dir = b.partition_dir("replicated", 0);
    for entry in std::fs::read_dir(&dir).expect("partition dir") {
        let path = entry.expect("dir entry").path();
        if path.is_file() {
            std::fs::remove_file(&path).expect("remove a segment file");
        }
    }
    let values = write_v2_log(&dir);
    assert_eq!(values.len(), 18, "6 data batches of 3 records");
    b.restart();
    let want: Vec<(u64, String)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64, v.clone()))
        .collect();

    // The high watermark counts records, not control batches.
    let d = describe(&b, "replicated");
    assert_eq!(d["partitions"][0]["high_watermark"], 18, "{d}");

    // HTTP: records.
    let http: Vec<(u64, String)> = fetch_all(&b, "replicated", 0, "utf8")
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(http, want, "HTTP");

    // Binary: batches in the protocol's layout (version 1), from every
    // offset, one batch at a time and all at once.
    let c = Client::connect(&b.binary_addr(), Options::default()).expect("connect");
    let fetch = |offset: u64, max_records: u32| {
        c.fetch(Fetch {
            topic: "replicated".into(),
            partition: 0,
            offset: Some(offset),
            max_records,
            max_bytes: 1 << 20,
            wait_ms: 0,
        })
        .expect("fetch")
    };
    let all = fetch(0, 10_000);
    assert_eq!(all.high_watermark, 18);
    assert_eq!(all.next_offset, 18);
    let got: Vec<(u64, String)> = all
        .to_records()
        .into_iter()
        .map(|r| (r.offset, String::from_utf8(r.value).unwrap()))
        .collect();
    assert_eq!(got, want, "binary");
    let bytes = all.batch_bytes();
    let mut at = 0;
    let mut batches = 0;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        assert_eq!(
            bytes[at + 16],
            es_protocol::batch::MAGIC,
            "batch {batches} in version 1 layout"
        );
        es_protocol::batch::validate(&bytes[at..at + len], 1, 0, u64::MAX)
            .unwrap_or_else(|e| panic!("batch {batches}: {e}"));
        at += len;
        batches += 1;
    }
    assert_eq!(batches, 6, "the data batches only");
    let mut offset = 0;
    let mut paged = Vec::new();
    while offset < 18 {
        let ok = fetch(offset, 1);
        assert!(
            !ok.is_empty(),
            "a fetch at {offset} below the high watermark is not empty"
        );
        paged.extend(
            ok.to_records()
                .into_iter()
                .map(|r| (r.offset, String::from_utf8(r.value).unwrap())),
        );
        assert!(ok.next_offset > offset);
        offset = ok.next_offset;
    }
    assert_eq!(paged, want, "binary, batch by batch");
    // A gzipped reply is built apart (one buffer, compressed).
    let gz = Client::connect(
        &b.binary_addr(),
        Options {
            gzip: true,
            ..Options::default()
        },
    )
    .expect("connect with gzip");
    let zipped = gz
        .fetch(Fetch {
            topic: "replicated".into(),
            partition: 0,
            offset: Some(0),
            max_records: 10_000,
            max_bytes: 1 << 20,
            wait_ms: 0,
        })
        .expect("gzipped fetch");
    assert_eq!(
        zipped.batch_bytes(),
        all.batch_bytes(),
        "gzipped, the same batches"
    );

    // Kafka: kcat from the beginning to the end.
    let (ok, out, err) = kcat(
        &[
            "-b",
            &kafka,
            "-C",
            "-t",
            "replicated",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o:%s\n",
        ],
        "",
    );
    assert!(ok, "kcat: {err}");
    let want_lines: Vec<String> = want.iter().map(|(o, v)| format!("{o}:{v}")).collect();
    let got_lines: Vec<String> = out.lines().map(str::to_string).collect();
    assert_eq!(got_lines, want_lines, "Kafka");
}
