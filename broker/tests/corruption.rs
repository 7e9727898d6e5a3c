//! Damaged data on disk through the real broker: quarantined and
//! reported, never silently dropped or served.
//!
//! Contract: after a kill -9, a flipped byte in the middle of the active
//! segment (intact batches after it) stops the next start, exit code 3,
//! the data left as it was; `--accept-data-loss` (here its variable,
//! `ES_ACCEPT_DATA_LOSS`) starts it, with the bytes from the bad batch on
//! in a `.corrupt-*` copy, every record before it served, new records at
//! offsets past every one lost, and `es_storage_corruptions_total
//! {found="recovery"}` at 1. A bad batch found by a fetch later answers
//! the records before it, then `corrupt_data` (500) for the bad batch,
//! counted once as `found="read"`, and the broker log names the file.

mod common;

use std::path::{Path, PathBuf};

use common::{create_topic, fetch, last_segment, produce_values, start_refused, values_of, Broker};

/// Where each batch of a segment log starts (before a direct writer's zero
/// padding, if any).
fn batch_starts(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() && bytes[pos..].iter().any(|&b| b != 0) {
        let h = es_storage::batch::check(&bytes[pos..]).unwrap_or_else(|e| panic!("a batch at {pos}: {e}"));
        out.push(pos);
        pos += h.batch_len as usize;
    }
    out
}

fn corrupt_copies(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".log.corrupt-"))
        .collect();
    out.sort();
    out
}

#[test]
fn corrupt_data_stops_the_start_until_accepted_and_a_fetch_never_serves_it() {
    let mut b = Broker::start(1);
    create_topic(&b, "t", 1);
    // Ten batches of fifty records, acknowledged, then kill -9: the next
    // start scans the active segment.
    let per = 50u64;
    let value = |o: u64| format!("value {o}");
    for r in 0..10 {
        let values: Vec<String> = (r * per..(r + 1) * per).map(value).collect();
        produce_values(&b, "t", 0, &values);
    }
    b.kill9();
    let pdir = b.partition_dir("t", 0);
    let seg = last_segment(&pdir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let starts = batch_starts(&bytes);
    assert_eq!(starts.len(), 10, "one batch per produce request");
    let bad = 4;
    bytes[starts[bad] + 100] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();

    // Refused: exit 3 (not a crash a supervisor should retry), the log
    // says why and what to do, nothing changed.
    let (code, out) = start_refused(&b);
    assert_eq!(code, Some(3), "{out}");
    assert!(
        out.contains("refusing to open") && out.contains("--accept-data-loss"),
        "{out}"
    );
    assert!(out.contains(&seg.display().to_string()), "names the file: {out}");
    assert_eq!(
        std::fs::read(&seg).unwrap(),
        bytes,
        "the segment is left as it was"
    );
    assert!(corrupt_copies(&pdir).is_empty());

    // Accepted: quarantined, cut, served up to the damage, new offsets.
    std::env::set_var("ES_ACCEPT_DATA_LOSS", "true");
    b.restart();
    std::env::remove_var("ES_ACCEPT_DATA_LOSS");
    let kept = bad as u64 * per;
    let want: Vec<String> = (0..kept).map(value).collect();
    assert_eq!(values_of(&b, "t", 0), want);
    let copies = corrupt_copies(&pdir);
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(std::fs::read(&copies[0]).unwrap(), &bytes[starts[bad]..]);
    assert_eq!(
        b.metric("es_storage_corruptions_total{found=\"recovery\"}"),
        Some(1.0)
    );
    let after = produce_values(&b, "t", 0, &["after the loss".to_string()]);
    assert_eq!(after, [10 * per], "new records get offsets past every one lost");
    let log = b.stderr_text();
    assert!(log.contains("corrupt data quarantined"), "{log}");

    // A bad batch a fetch meets: the records before it, then corrupt_data.
    for r in 0..3 {
        let values: Vec<String> = (0..10).map(|i| format!("later {r}.{i}")).collect();
        produce_values(&b, "t", 0, &values);
    }
    assert_eq!(b.sigterm_and_wait().code(), Some(0));
    let seg = last_segment(&pdir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let starts = batch_starts(&bytes);
    assert_eq!(starts.len(), 4, "the record after the loss, then three batches");
    bytes[starts[2] + 80] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();
    b.restart(); // a clean stop: the segment is trusted, no scan
    let from = 10 * per;
    let (status, body) = fetch(&b, "t", 0, &format!("offset={from}&max_records=1000"));
    assert_eq!(status, 200, "{body}");
    let got = body["records"].as_array().unwrap().len();
    assert_eq!(got, 11, "the records before the bad batch: {body}");
    let next = body["next_offset"].as_u64().unwrap();
    assert_eq!(next, from + 11);
    let (status, body) = fetch(&b, "t", 0, &format!("offset={next}"));
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["code"], "corrupt_data", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("at byte {}", starts[2])), "{message}");
    assert_eq!(
        b.metric("es_storage_corruptions_total{found=\"read\"}"),
        Some(1.0)
    );
    let log = b.stderr_text();
    assert!(
        log.lines().any(|l| l.contains("ERROR")
            && l.contains("corrupt data in a segment")
            && l.contains(&seg.display().to_string())),
        "{log}"
    );
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "never cut at run time");
    assert_eq!(b.sigterm_and_wait().code(), Some(0));
}
