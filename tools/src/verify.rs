//! `es-tools verify -i ARCHIVE|- [--deep] [--json]`: an archive's
//! integrity, without a data dir: tar structure, manifest version, every
//! entry's SHA-256 against the trailer, `status: complete`. `--deep` also
//! re-checks every batch (header rules, CRC, increasing offsets) of every
//! segment, and that a partition's segments do not overlap; it holds one
//! segment in memory at a time.

use std::collections::BTreeMap;
use std::io::Write;

use es_format::scan::{block_on_ready, scan, Shape, SliceSource, Tail};
use es_format::Offset;
use serde_json::json;

use crate::archive::segment_path;
use crate::archive_read;
use crate::fail::{Fail, Outcome};

pub fn run(input: &str, deep: bool, as_json: bool, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let reader = archive_read::open(input)?;
    // (tier, topic, partition) -> where the last segment's batches end.
    let mut ends: BTreeMap<(String, String, u32), Offset> = BTreeMap::new();
    let (mut batches, mut records) = (0u64, 0u64);
    let seen = archive_read::read(reader, |path, r| {
        if !deep {
            return Ok(());
        }
        let Some((tier, topic, p, base)) = segment_path(path) else {
            return Ok(());
        };
        let mut bytes = Vec::new();
        r.read_to_end(&mut bytes)
            .map_err(|e| format!("archive damaged in entry {path}: {e}"))?;
        let shape = Shape {
            last: false,
            end: None,
        };
        let scanned = block_on_ready(scan(&mut SliceSource(&bytes), base, shape, |h, _| {
            batches += 1;
            records += h.record_count as u64;
        }))
        .unwrap_or_else(|e| match e {});
        if scanned.tail != Tail::Clean {
            return Err(format!(
                "entry {path}: bad batch at byte {}: {}",
                scanned.end,
                scanned.reason().unwrap_or("?")
            ));
        }
        let key = (tier.to_string(), topic.to_string(), p);
        if let Some(prev) = ends.get(&key) {
            if base < *prev {
                return Err(format!(
                    "entry {path}: its base {base} is below the previous segment's end {prev}"
                ));
            }
        }
        ends.insert(key, scanned.next_offset);
        Ok(())
    });
    let status = if seen.problems.is_empty() {
        "ok"
    } else {
        "problems"
    };
    let archive_status = seen.trailer.as_ref().map(|t| t.status.clone());
    if as_json {
        let mut v = json!({"status": status, "archive": input, "entries": seen.entries.len(),
                           "archive_status": archive_status, "problems": seen.problems,
                           "totals": seen.trailer.as_ref().map(|t| t.totals.clone())});
        if let (true, Some(m)) = (deep, v.as_object_mut()) {
            m.insert("deep".into(), json!({"batches": batches, "records": records}));
        }
        writeln!(out, "{v}")?;
    } else {
        for p in &seen.problems {
            writeln!(out, "problem {p}")?;
        }
        let deep_text = if deep {
            format!(", {batches} batches and {records} records checked")
        } else {
            String::new()
        };
        writeln!(
            out,
            "verify: {input}: {} entries{deep_text}: {}",
            seen.entries.len(),
            if seen.problems.is_empty() {
                "ok".to_string()
            } else {
                crate::report::count(seen.problems.len(), "problem")
            }
        )?;
    }
    Ok(if seen.problems.is_empty() {
        Outcome::Clean
    } else {
        Outcome::Problems
    })
}
