//! `es-tools dump`: a stopped broker's data dir (or the selected part of
//! it) as one tar stream (`archive.rs`), taken under the broker's lock so
//! it is a point-in-time copy. Segments go as stored, cut to their last
//! valid batch (every CRC checked by the scan, `dump_plan.rs`); metadata
//! as read, after it parsed; the groups' committed offsets as
//! `groups/<g>.json`; the trailer last, with every entry's SHA-256.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use es_format::names::log_name;
use serde_json::{json, Value};

use crate::archive::{self, EntrySum, Hashing, Trailer, MANIFEST, TRAILER};
use crate::datadir::{self, cold_root};
use crate::dump_plan::{self, OnCorrupt, PartPlan, Plan, SegPlan, Selection};
use crate::fail::{Fail, Outcome};
use crate::groups;
use crate::limits::COPY_BUFFER_BYTES;

/// `--compress`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compress {
    None,
    Gzip,
    /// zstd (level 3): the cargo feature `zstd` (on by default).
    Zstd,
}

/// `--format`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The archive: one tar stream that `verify` and `restore` read.
    Tar,
    /// One JSON line per record, for inspection and other systems (not restored).
    Jsonl,
}

pub struct DumpOptions {
    pub data_dir: PathBuf,
    pub format: Format,
    pub cold_dir: Option<PathBuf>,
    pub output: String,
    pub selection: Selection,
    pub no_groups: bool,
    pub no_keys: bool,
    pub no_cold: bool,
    pub compress: Compress,
    pub on_corrupt: OnCorrupt,
    pub json: bool,
}

/// Where the archive goes: stdout or a file, compressed or not.
enum Sink {
    Plain(Box<dyn Write>),
    Gzip(flate2::write::GzEncoder<Box<dyn Write>>),
    #[cfg(feature = "zstd")]
    Zstd(zstd::stream::write::Encoder<'static, Box<dyn Write>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
            #[cfg(feature = "zstd")]
            Sink::Zstd(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
            #[cfg(feature = "zstd")]
            Sink::Zstd(w) => w.flush(),
        }
    }
}

impl Sink {
    fn new(sink: Box<dyn Write>, compress: Compress) -> Result<Sink, Fail> {
        Ok(match compress {
            Compress::None => Sink::Plain(sink),
            Compress::Gzip => Sink::Gzip(flate2::write::GzEncoder::new(
                sink,
                flate2::Compression::default(),
            )),
            #[cfg(feature = "zstd")]
            Compress::Zstd => Sink::Zstd(
                zstd::stream::write::Encoder::new(sink, crate::limits::ZSTD_LEVEL)
                    .map_err(|e| Fail(format!("starting zstd: {e}")))?,
            ),
            #[cfg(not(feature = "zstd"))]
            Compress::Zstd => return Err(Fail(crate::archive_read::NO_ZSTD.into())),
        })
    }

    /// Ends the compressed stream, flushes.
    fn finish(self) -> std::io::Result<()> {
        let mut inner = match self {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w.finish()?,
            #[cfg(feature = "zstd")]
            Sink::Zstd(w) => w.finish()?,
        };
        inner.flush()
    }
}

/// A file that is fsynced when the archive is complete (its writeback
/// started as it is written).
struct Synced(std::io::BufWriter<crate::durable::Writeback>);

impl Write for Synced {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()?;
        self.0.get_ref().file.sync_all()
    }
}

/// The tar stream being written, with the sums of its entries.
struct Writer {
    tar: tar::Builder<Sink>,
    sums: Vec<EntrySum>,
    started: Instant,
    last_progress: Instant,
    bytes: u64,
}

impl Writer {
    fn entry(&mut self, path: &str, len: u64, data: impl Read) -> std::io::Result<EntrySum> {
        let mut header = tar::Header::new_gnu();
        header.set_size(len);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        let mut hashing = Hashing::new(data.take(len));
        self.tar.append_data(&mut header, path, &mut hashing)?;
        let (bytes, sha256) = hashing.finish();
        if bytes != len {
            return Err(std::io::Error::other(format!(
                "{path}: {bytes} bytes read, {len} expected"
            )));
        }
        let sum = EntrySum {
            path: path.to_string(),
            bytes,
            sha256,
        };
        self.sums.push(sum.clone());
        self.bytes += bytes;
        self.progress();
        Ok(sum)
    }

    fn json(&mut self, path: &str, v: &Value) -> std::io::Result<EntrySum> {
        let bytes = serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?;
        self.entry(path, bytes.len() as u64, bytes.as_slice())
    }

    /// A line on stderr about once a second, for long runs.
    fn progress(&mut self) {
        if self.last_progress.elapsed().as_secs() >= crate::limits::PROGRESS_INTERVAL_SECS {
            self.last_progress = Instant::now();
            eprintln!(
                "es-tools dump: {} entries, {} MiB, {} s",
                self.sums.len(),
                self.bytes >> 20,
                self.started.elapsed().as_secs()
            );
        }
    }
}

pub fn run(o: &DumpOptions, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let _lock = datadir::lock(&o.data_dir)?;
    let cold = (!o.no_cold).then(|| cold_root(&o.data_dir, o.cold_dir.as_deref()));
    let plan = dump_plan::plan(&o.data_dir, cold, &o.selection, o.on_corrupt)?;
    let failed = o.on_corrupt == OnCorrupt::Fail && !plan.problems.is_empty();
    let sink: Box<dyn Write> = if o.output == "-" {
        Box::new(std::io::BufWriter::with_capacity(
            COPY_BUFFER_BYTES,
            std::io::stdout().lock(),
        ))
    } else {
        let path = Path::new(&o.output);
        let file = File::create(path).map_err(|e| Fail::io(path, e))?;
        Box::new(Synced(std::io::BufWriter::with_capacity(
            COPY_BUFFER_BYTES,
            crate::durable::Writeback::new(file),
        )))
    };
    let mut sink = Sink::new(sink, o.compress)?;
    let totals = if o.format == Format::Jsonl {
        // No trailer to say "failed": a dump that met corruption with
        // --on-corrupt fail writes no record at all.
        let written = if failed {
            Ok(json!({"partitions": 0, "segments": 0, "batches": 0, "records": 0, "bytes": 0}))
        } else {
            crate::dump_jsonl::write(&plan, &mut sink)
        };
        written
            .and_then(|t| sink.finish().map(|()| t))
            .map_err(|e| Fail(format!("writing the records: {e}")))?
    } else {
        let w = Writer {
            tar: tar::Builder::new(sink),
            sums: Vec::new(),
            started: Instant::now(),
            last_progress: Instant::now(),
            bytes: 0,
        };
        write_all(o, &plan, failed, w).map_err(|e| Fail(format!("writing the archive: {e}")))?
    };
    let status = if failed { "failed" } else { "complete" };
    if !o.json && o.output == "-" {
        // stdout is the archive: the summary goes to stderr.
        eprintln!("{}", summary(status, &totals, &plan, &o.output));
    } else if o.json {
        let v = json!({"status": status, "archive": o.output, "totals": totals, "problems": plan.problems});
        let text = v.to_string();
        if o.output == "-" {
            eprintln!("{text}");
        } else {
            writeln!(out, "{text}")?;
        }
    } else {
        for p in &plan.problems {
            writeln!(out, "problem {}", crate::report::line(p))?;
        }
        writeln!(out, "{}", summary(status, &totals, &plan, &o.output))?;
    }
    Ok(if plan.problems.is_empty() {
        Outcome::Clean
    } else {
        Outcome::Problems
    })
}

fn summary(status: &str, totals: &Value, plan: &Plan, archive: &str) -> String {
    format!(
        "dump: {} partitions, {} segments, {} batches, {} records, {} bytes to {archive}: {status}{}",
        totals["partitions"],
        totals["segments"],
        totals["batches"],
        totals["records"],
        totals["bytes"],
        if plan.problems.is_empty() {
            String::new()
        } else {
            format!(" ({})", crate::report::count(plan.problems.len(), "problem"))
        }
    )
}

/// Every entry, the trailer last; the totals.
fn write_all(o: &DumpOptions, plan: &Plan, failed: bool, mut w: Writer) -> std::io::Result<Value> {
    let parts: Vec<&PartPlan> = plan.topics.iter().flat_map(|t| &t.partitions).collect();
    let seg_list = |segs: &[SegPlan]| -> Vec<Value> {
        segs.iter()
            .map(|s| json!({"base": s.seg.base.0, "bytes": s.entry_len()}))
            .collect()
    };
    let mut listed = Vec::new();
    for p in &parts {
        listed.push(
            json!({"topic": p.topic, "partition": p.partition, "tier": "hot", "segments": seg_list(&p.hot)}),
        );
        if !p.cold.is_empty() {
            listed.push(json!({"topic": p.topic, "partition": p.partition, "tier": "cold", "segments": seg_list(&p.cold)}));
        }
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let manifest = json!({
        "format": archive::FORMAT, "version": archive::VERSION,
        "tool": format!("es-tools {}", env!("CARGO_PKG_VERSION")), "created_at_ms": now_ms,
        "source": {"data_dir": o.data_dir.display().to_string(), "node_id": null, "broker_version_last_seen": null},
        "selection": {"topics": o.selection.topics, "topic_prefix": o.selection.topic_prefix,
                      "partitions": o.selection.partitions, "range": o.selection.range, "no_groups": o.no_groups, "no_keys": o.no_keys,
                      "no_cold": o.no_cold, "on_corrupt": format!("{:?}", o.on_corrupt).to_lowercase()},
        "partitions": listed,
    });
    w.json(MANIFEST, &manifest)?;
    let mut totals = [0u64; 5]; // partitions, segments, batches, records, bytes
    if !failed {
        for t in &plan.topics {
            w.json(&format!("es-dump/topics/{}/meta.json", t.name), &t.meta)?;
            for p in &t.partitions {
                totals[0] += 1;
                let hot = segments(&mut w, "topics", p, &p.hot, &mut totals)?;
                let cold = segments(&mut w, "cold", p, &p.cold, &mut totals)?;
                w.json(
                    &format!("es-dump/topics/{}/{}/partition.json", p.topic, p.partition),
                    &partition_json(p, hot, cold),
                )?;
            }
        }
        extras(o, &parts, &mut w)?;
    }
    let totals = json!({"partitions": totals[0], "segments": totals[1], "batches": totals[2],
                        "records": totals[3], "bytes": totals[4]});
    let trailer = Trailer {
        status: if failed { "failed" } else { "complete" }.into(),
        sha256_of_entries: archive::digest_of_entries(&w.sums),
        entries: w.sums.clone(),
        totals: totals.clone(),
        problems: plan.problems.clone(),
    };
    let v = serde_json::to_value(&trailer).map_err(std::io::Error::other)?;
    let bytes = serde_json::to_vec_pretty(&v).map_err(std::io::Error::other)?;
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    w.tar.append_data(&mut header, TRAILER, bytes.as_slice())?;
    w.tar.into_inner()?.finish()?;
    Ok(totals)
}

/// The segments of one tier of a partition; their summaries.
fn segments(
    w: &mut Writer,
    tier: &str,
    p: &PartPlan,
    segs: &[SegPlan],
    totals: &mut [u64; 5],
) -> std::io::Result<Vec<Value>> {
    let mut out = Vec::new();
    for s in segs {
        let path = format!(
            "es-dump/{tier}/{}/{}/{}",
            p.topic,
            p.partition,
            log_name(s.seg.base)
        );
        let len = s.entry_len();
        let reader = std::io::BufReader::with_capacity(COPY_BUFFER_BYTES, s.entry_reader()?);
        let sum = w.entry(&path, len, reader)?;
        totals[1] += 1;
        totals[2] += s.seg.batches;
        totals[3] += s.seg.records;
        totals[4] += len;
        out.push(
            json!({"base": s.seg.base.0, "bytes": len, "batches": s.seg.batches, "records": s.seg.records,
            "first_offset": s.seg.first_offset.map(|o| o.0), "last_offset": s.seg.last_offset.map(|o| o.0),
            "end_offset": s.seg.end_offset.0, "max_timestamp": s.seg.max_timestamp_ms, "sha256": sum.sha256}),
        );
    }
    Ok(out)
}

fn partition_json(p: &PartPlan, hot: Vec<Value>, cold: Vec<Value>) -> Value {
    let all = p.cold.iter().chain(&p.hot);
    let first_ts = all.clone().filter_map(|s| s.seg.first_timestamp_ms).next();
    let max_ts = all
        .map(|s| s.seg.max_timestamp_ms)
        .max()
        .filter(|&t| t != i64::MIN);
    let start = p.cold.first().or(p.hot.first()).map(|s| s.seg.base.0);
    let next = p.hot.last().map(|s| s.seg.end_offset.0);
    json!({"topic": p.topic, "partition": p.partition, "log_start_offset": start, "next_offset": next,
           "hot_start_offset": p.hot.first().map(|s| s.seg.base.0),
           "first_timestamp": first_ts, "max_timestamp": max_ts, "segments": hot, "cold_segments": cold,
           "gaps": p.gaps.iter().map(|(f, t)| json!({"from": f.0, "to": t.0})).collect::<Vec<_>>(),
           "trimmed_tail_bytes": p.trimmed_tail_bytes})
}

/// Groups, producers, API keys.
fn extras(o: &DumpOptions, parts: &[&PartPlan], w: &mut Writer) -> std::io::Result<()> {
    let data = &o.data_dir;
    let io = |f: crate::fail::Fail| std::io::Error::other(f.0);
    if !o.no_groups {
        let read = groups::read(data).map_err(io)?;
        for (group, offsets) in &read.groups {
            let offsets: Vec<Value> = offsets
                .iter()
                .filter(|((t, p), _)| parts.iter().any(|pp| pp.topic == *t && pp.partition == *p))
                .map(|((t, p), off)| json!({"topic": t, "partition": p, "offset": off}))
                .collect();
            if !offsets.is_empty() {
                let file = match read.owners.get(group) {
                    Some(owner) => json!({"name": group, "offsets": offsets, "owner": owner}),
                    None => json!({"name": group, "offsets": offsets}),
                };
                w.json(&format!("es-dump/groups/{group}.json"), &file)?;
            }
        }
    }
    let mut files: Vec<(PathBuf, String)> = vec![(
        data.join("producers/registry.json"),
        "es-dump/producers/registry.json".into(),
    )];
    for p in parts {
        files.push((
            data.join(format!("producers/{}/{}.json", p.topic, p.partition)),
            format!("es-dump/producers/{}/{}.json", p.topic, p.partition),
        ));
    }
    if !o.no_keys {
        files.push((data.join("api_keys.json"), "es-dump/api_keys.json".into()));
    }
    for (path, name) in files {
        match std::fs::read(&path) {
            Ok(bytes) => {
                // Only what parses is copied, never silently something
                // damaged; the key file by the broker's own checks.
                let parsed = if name.ends_with("/api_keys.json") {
                    es_keys::file::parse(&bytes).map(|_| ())
                } else {
                    serde_json::from_slice::<Value>(&bytes)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                };
                parsed
                    .map_err(|e| std::io::Error::other(format!("{}: does not parse: {e}", path.display())))?;
                w.entry(&name, bytes.len() as u64, bytes.as_slice())?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
