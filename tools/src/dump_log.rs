//! `es-tools dump-log FILE.log [--records] [--json]`: every batch of one
//! segment, one line each (`base last count position size crc ok max_ts
//! producer`), as kafka-dump-log prints them; `--records` adds the records.
//! The file is read with the broker's own scan, so the end it reports
//! (clean, padding, torn tail, corruption) is what recovery would find if
//! this were a partition's last segment.

use std::io::Write;
use std::path::Path;

use es_format::batch::{records, BatchHeader};
use es_format::scan::{Scanned, Shape, Tail};
use serde_json::{json, Value};

use crate::fail::{Fail, Outcome};
use crate::segscan::{base_of, scan_file, tail_kind, trimmed_bytes};
use crate::show;
use crate::source::FileSource;

pub fn run(path: &Path, with_records: bool, as_json: bool, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let base = base_of(path);
    let reader = FileSource::open(path).map_err(|e| Fail::io(path, e))?;
    let shape = Shape {
        last: true,
        end: None,
    };
    let mut first_err: Option<std::io::Error> = None;
    let mut n = 0u64;
    if as_json {
        let head = json!({ "file": path.display().to_string(), "base_offset": base.0 });
        let head = head.to_string();
        let open = head.strip_suffix('}').unwrap_or(&head);
        let _ = write!(out, "{open},\"batches\":[");
    }
    let scanned = scan_file(path, base, shape, |h, pos| {
        if first_err.is_some() {
            return;
        }
        let recs = if with_records {
            match reader.read_at(pos, h.batch_len as usize) {
                Ok(bytes) => Some(records(h, &bytes).unwrap_or_default()),
                Err(e) => {
                    first_err = Some(e);
                    return;
                }
            }
        } else {
            None
        };
        let written = if as_json {
            let mut v = batch_json(h, pos, true);
            if let (Some(recs), Value::Object(m)) = (&recs, &mut v) {
                let list: Vec<Value> = recs
                    .iter()
                    .map(|r| {
                        json!({"offset": r.offset.0, "timestamp": r.timestamp_ms,
                               "key": show::json_bytes(r.key.as_deref()),
                               "value": show::json_bytes(Some(&r.value))})
                    })
                    .collect();
                m.insert("records".into(), Value::Array(list));
            }
            let sep = if n == 0 { "" } else { "," };
            write!(out, "{sep}{v}")
        } else {
            write_batch_line(out, h, pos, true, None).and_then(|()| {
                for r in recs.iter().flatten() {
                    let key = r.key.as_deref().map_or("null".into(), show::text);
                    writeln!(
                        out,
                        "  offset={} ts={} key={key} value={}",
                        r.offset,
                        r.timestamp_ms,
                        show::text(&r.value)
                    )?;
                }
                Ok(())
            })
        };
        if let Err(e) = written {
            first_err = Some(e);
        }
        n += 1;
    })
    .map_err(|e| Fail::io(path, e))?;
    if let Some(e) = first_err {
        return Err(Fail::io(path, e));
    }
    // The batch the scan stopped at, when its header still parses.
    let bad = reader
        .read_at(scanned.end, es_format::batch::HEADER_V2_BYTES)
        .ok()
        .and_then(|b| BatchHeader::parse(&b).ok())
        .filter(|_| scanned.reason().is_some());
    if as_json {
        if let Some(h) = bad {
            let mut v = batch_json(&h, scanned.end, false);
            if let Value::Object(m) = &mut v {
                m.insert("error".into(), json!(scanned.reason()));
            }
            let sep = if n == 0 { "" } else { "," };
            write!(out, "{sep}{v}")?;
        }
        let end = end_json(&scanned);
        writeln!(out, "],\"end\":{end}}}")?;
    } else {
        if let Some(h) = bad {
            write_batch_line(out, &h, scanned.end, false, scanned.reason())?;
        }
        writeln!(out, "{}", end_line(&scanned))?;
    }
    Ok(match scanned.tail {
        Tail::Damaged { .. } => Outcome::Problems,
        _ => Outcome::Clean,
    })
}

fn producer_text(h: &BatchHeader) -> String {
    let p = h.producer;
    if p.producer_id == -1 {
        "-".into()
    } else {
        format!("{}/{}/{}", p.producer_id, p.epoch, p.base_sequence)
    }
}

fn write_batch_line(
    out: &mut dyn Write,
    h: &BatchHeader,
    pos: u64,
    ok: bool,
    error: Option<&str>,
) -> std::io::Result<()> {
    write!(
        out,
        "base={} last={} count={} position={pos} size={} crc=0x{:08x} ok={ok} max_ts={} producer={}",
        h.base_offset,
        h.last_offset(),
        h.record_count,
        h.batch_len,
        h.crc,
        h.max_timestamp_ms,
        producer_text(h)
    )?;
    match error {
        Some(e) => writeln!(out, " error={e:?}"),
        None => writeln!(out),
    }
}

fn batch_json(h: &BatchHeader, pos: u64, ok: bool) -> Value {
    let p = h.producer;
    json!({
        "base": h.base_offset.0, "last": h.last_offset().0, "count": h.record_count,
        "position": pos, "size": h.batch_len, "crc": h.crc, "ok": ok,
        "first_ts": h.first_timestamp_ms, "max_ts": h.max_timestamp_ms,
        "producer_id": p.producer_id, "producer_epoch": p.epoch, "base_sequence": p.base_sequence,
    })
}

/// The end of a scan as JSON (shared with `check`).
pub fn end_json(s: &Scanned) -> Value {
    let mut v = json!({
        "valid_bytes": s.end, "file_bytes": s.file_len, "tail": tail_kind(&s.tail),
        "next_offset": s.next_offset.0, "trimmed_tail_bytes": trimmed_bytes(s),
    });
    if let Value::Object(m) = &mut v {
        if let Some(r) = s.reason() {
            m.insert("reason".into(), json!(r));
        }
        if let Tail::Damaged { lost, .. } = &s.tail {
            m.insert("position".into(), json!(s.end));
            m.insert("expected_offset".into(), json!(lost.from.0));
            m.insert("lost".into(), json!(lost.to_string()));
        }
    }
    v
}

fn end_line(s: &Scanned) -> String {
    let mut line = format!(
        "end: valid_bytes={} file_bytes={} next_offset={} tail={}",
        s.end,
        s.file_len,
        s.next_offset,
        tail_kind(&s.tail)
    );
    match &s.tail {
        Tail::Clean => {}
        Tail::Padding | Tail::Torn(_) => line += &format!(" trimmed_tail_bytes={}", trimmed_bytes(s)),
        Tail::Damaged { lost, .. } => {
            line += &format!(
                " position={} expected_offset={} lost={:?}",
                s.end,
                lost.from,
                lost.to_string()
            )
        }
    }
    if let Some(r) = s.reason() {
        line += &format!(" reason={r:?}");
    }
    line
}
