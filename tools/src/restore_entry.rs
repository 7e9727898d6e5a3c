//! One archive entry written into the staging dir of a restore: topics
//! (renamed and selected as asked), segments, and at each partition's
//! `partition.json` (which follows its segments) their indexes, rebuilt
//! with es-format's index rule after every batch's CRC is checked.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use es_format::index_rule::IndexBuilder;
use es_format::names::{index_name, log_name};
use es_format::scan::{Shape, Tail};
use es_format::Offset;
use serde_json::{json, Value};

use crate::archive::{segment_path, valid_topic, ROOT};
use crate::datadir::{self, DirLock};
use crate::durable;
use crate::fail::Fail;
use crate::groups::GroupFile;
use crate::limits::{INDEX_INTERVAL_BYTES, JSON_BYTES_MAX};
use crate::segscan::scan_file;

/// The staging dir being filled.
pub struct Staging {
    root: PathBuf,
    /// Where cold segments go: `<root>/cold`, or the staged `--cold-dir`.
    cold: PathBuf,
    _lock: DirLock,
    topics: Vec<String>,
    renames: BTreeMap<String, String>,
    /// Segments written, per (tier, topic as restored, partition).
    written: BTreeMap<(String, String, u32), BTreeSet<Offset>>,
    /// Partitions whose `partition.json` came: (topic in the archive, partition).
    done: BTreeSet<(String, u32)>,
    /// An I/O error that stopped the restore (exit 2, not a problem).
    pub io_error: Option<Fail>,
    /// A summary per partition restored.
    pub partitions: Vec<Value>,
    /// For the progress line on stderr.
    entries: u64,
    started: std::time::Instant,
    last_progress: std::time::Instant,
}

impl Staging {
    pub fn new(
        root: &Path,
        cold: &Path,
        topics: &[String],
        renames: &[(String, String)],
    ) -> Result<Staging, Fail> {
        Ok(Staging {
            root: root.to_path_buf(),
            cold: cold.to_path_buf(),
            _lock: datadir::lock(root)?,
            topics: topics.to_vec(),
            renames: renames.iter().cloned().collect(),
            written: BTreeMap::new(),
            done: BTreeSet::new(),
            io_error: None,
            partitions: Vec::new(),
            entries: 0,
            started: std::time::Instant::now(),
            last_progress: std::time::Instant::now(),
        })
    }

    fn selected(&self, topic: &str) -> bool {
        self.topics.is_empty() || self.topics.iter().any(|t| t == topic)
    }

    fn renamed<'a>(&'a self, topic: &'a str) -> &'a str {
        self.renames.get(topic).map_or(topic, String::as_str)
    }

    /// Writes the entry at `path`; `Err` is a problem with the archive (an
    /// I/O error is kept in `io_error` and stops the pass too).
    pub fn entry(&mut self, path: &str, r: &mut dyn Read) -> Result<(), String> {
        self.entries += 1;
        if self.last_progress.elapsed().as_secs() >= crate::limits::PROGRESS_INTERVAL_SECS {
            self.last_progress = std::time::Instant::now();
            eprintln!(
                "es-tools restore: {} entries, {} partitions, {} s",
                self.entries,
                self.partitions.len(),
                self.started.elapsed().as_secs()
            );
        }
        match self.entry_inner(path, r) {
            Ok(()) => Ok(()),
            Err(Stop::Problem(p)) => Err(p),
            Err(Stop::Io(f)) => {
                let msg = f.0.clone();
                self.io_error = Some(f);
                Err(msg)
            }
        }
    }

    fn entry_inner(&mut self, path: &str, r: &mut dyn Read) -> Result<(), Stop> {
        let rest = path.strip_prefix(ROOT).unwrap_or(path);
        if let Some((tier, topic, p, base)) = segment_path(path) {
            let (_, to) = self.topic(topic)?;
            let Some(to) = to else { return Ok(()) };
            let file = self
                .tier_root(tier)
                .join(&to)
                .join(p.to_string())
                .join(log_name(base));
            let mut f = durable::create(&file)?;
            std::io::copy(r, &mut f)
                .map_err(|e| Stop::Problem(format!("archive damaged in entry {path}: {e}")))?;
            f.sync_all().map_err(|e| Fail::io(&file, e))?;
            self.written
                .entry((tier.to_string(), to, p))
                .or_default()
                .insert(base);
            return Ok(());
        }
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            ["topics", topic, "meta.json"] => {
                let (_, Some(to)) = self.topic(topic)? else {
                    return Ok(());
                };
                let mut v = read_json(path, r)?;
                let Some(m) = v.as_object_mut() else {
                    return Err(Stop::Problem(format!("entry {path} is not a JSON object")));
                };
                m.insert("name".into(), json!(to));
                self.json(&format!("topics/{to}/meta.json"), &v)
            }
            ["topics", topic, p, "partition.json"] => {
                let p: u32 = p
                    .parse()
                    .map_err(|_| Stop::Problem(format!("entry {path}: not a partition")))?;
                let (topic, to) = self.topic(topic)?;
                self.done.insert((topic, p));
                let Some(to) = to else { return Ok(()) };
                let v = read_json(path, r)?;
                self.indexes(&to, p, &v)
            }
            ["groups", file] => {
                let g: GroupFile = serde_json::from_value(read_json(path, r)?)
                    .map_err(|e| Stop::Problem(format!("entry {path}: {e}")))?;
                if !valid_topic(&g.name) || file.strip_suffix(".json") != Some(g.name.as_str()) {
                    return Err(Stop::Problem(format!("entry {path}: not a group file")));
                }
                let offsets: Vec<Value> = g
                    .offsets
                    .iter()
                    .filter(|o| self.selected(&o.topic))
                    .map(|o| json!({"topic": self.renamed(&o.topic), "partition": o.partition, "offset": o.offset}))
                    .collect();
                if offsets.is_empty() {
                    return Ok(());
                }
                let file = match &g.owner {
                    Some(owner) => json!({"name": g.name, "offsets": offsets, "owner": owner}),
                    None => json!({"name": g.name, "offsets": offsets}),
                };
                self.json(&format!("groups/{}.json", g.name), &file)
            }
            ["producers", topic, file] => {
                let (_, Some(to)) = self.topic(topic)? else {
                    return Ok(());
                };
                let p = file
                    .strip_suffix(".json")
                    .filter(|p| p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty());
                let p = p.ok_or_else(|| Stop::Problem(format!("entry {path}: not a producer snapshot")))?;
                let v = read_json(path, r)?;
                self.json(&format!("producers/{to}/{p}.json"), &v)
            }
            ["producers", "registry.json"] | ["api_keys.json"] => {
                let v = read_json(path, r)?;
                self.json(rest, &v)
            }
            _ => Ok(()), // an entry a later version added: hashed, not restored
        }
    }

    /// Where the segments of `tier` (`topics` or `cold`) go.
    fn tier_root(&self, tier: &str) -> PathBuf {
        if tier == "cold" {
            self.cold.clone()
        } else {
            self.root.join(tier)
        }
    }

    /// `(name in the archive, name restored or None when not selected)`.
    fn topic(&self, topic: &str) -> Result<(String, Option<String>), Stop> {
        let to = self.renamed(topic);
        if !valid_topic(topic) || !valid_topic(to) {
            return Err(Stop::Problem(format!("{topic:?} is not a topic name")));
        }
        Ok((topic.to_string(), self.selected(topic).then(|| to.to_string())))
    }

    fn json(&self, rel: &str, v: &Value) -> Result<(), Stop> {
        let bytes = serde_json::to_vec_pretty(v).map_err(|e| Stop::Problem(e.to_string()))?;
        Ok(durable::write(&self.root.join(rel), &bytes)?)
    }

    /// Checks every segment a `partition.json` lists against what was
    /// written, scans it (CRC and all) and writes its index.
    fn indexes(&mut self, to: &str, p: u32, v: &Value) -> Result<(), Stop> {
        let mut summary = serde_json::Map::new();
        summary.insert("topic".into(), json!(to));
        summary.insert("partition".into(), json!(p));
        let mut total = [0u64; 4];
        for (tier, key) in [("topics", "segments"), ("cold", "cold_segments")] {
            let listed = v.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
            let written = self
                .written
                .remove(&(tier.to_string(), to.to_string(), p))
                .unwrap_or_default();
            let dir = self.tier_root(tier).join(to).join(p.to_string());
            let mut bases = BTreeSet::new();
            for s in &listed {
                let field = |k: &str| s.get(k).and_then(Value::as_u64);
                let (Some(base), Some(bytes), Some(end)) =
                    (field("base"), field("bytes"), field("end_offset"))
                else {
                    return Err(Stop::Problem(format!(
                        "{to}/{p}: partition.json lists a segment without base, bytes or end_offset"
                    )));
                };
                let base = Offset(base);
                bases.insert(base);
                if !written.contains(&base) {
                    return Err(Stop::Problem(format!(
                        "{tier}/{to}/{p}: segment {base} is listed but not in the archive"
                    )));
                }
                let log = dir.join(log_name(base));
                let mut ix = IndexBuilder::new(base, INDEX_INTERVAL_BYTES);
                let mut bad = None;
                let (mut batches, mut records) = (0u64, 0u64);
                let scanned = scan_file(
                    &log,
                    base,
                    Shape {
                        last: false,
                        end: None,
                    },
                    |h, pos| {
                        batches += 1;
                        records += h.record_count as u64;
                        if let Err(e) = ix.note(h, pos) {
                            bad.get_or_insert(e);
                        }
                    },
                )
                .map_err(|e| Fail::io(&log, e))?;
                if scanned.tail != Tail::Clean || scanned.file_len != bytes || bad.is_some() {
                    return Err(Stop::Problem(format!(
                        "entry es-dump/{tier}/{to}/{p}/{}: bad batch at byte {} ({}), {bytes} bytes listed",
                        log_name(base),
                        scanned.end,
                        scanned.reason().or(bad.as_deref()).unwrap_or("length differs")
                    )));
                }
                durable::write(&dir.join(index_name(base)), &ix.finish(Some(Offset(end))))?;
                total[0] += 1;
                total[1] += batches;
                total[2] += records;
                total[3] += bytes;
            }
            if bases != written {
                return Err(Stop::Problem(format!(
                    "{tier}/{to}/{p}: the archive holds segments partition.json does not list"
                )));
            }
        }
        for (k, n) in ["segments", "batches", "records", "bytes"].iter().zip(total) {
            summary.insert(k.to_string(), json!(n));
        }
        for k in ["log_start_offset", "next_offset"] {
            summary.insert(k.into(), v.get(k).cloned().unwrap_or(Value::Null));
        }
        // A partition with no segment at all still gets its directory.
        std::fs::create_dir_all(self.root.join("topics").join(to).join(p.to_string()))
            .map_err(|e| Fail::io(&self.root, e))?;
        self.partitions.push(Value::Object(summary));
        Ok(())
    }

    /// The manifest's partitions whose `partition.json` never came.
    pub fn missing_partitions(&self, manifest: &Value) -> Vec<String> {
        let list = manifest
            .get("partitions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        list.iter()
            .filter_map(|p| {
                Some((
                    p.get("topic")?.as_str()?.to_string(),
                    p.get("partition")?.as_u64()? as u32,
                ))
            })
            .filter(|k| !self.done.contains(k))
            .map(|(t, p)| {
                format!("partition {t}/{p} is in the manifest but its partition.json is not in the archive")
            })
            .collect()
    }
}

/// Why an entry stopped the restore.
enum Stop {
    Problem(String),
    Io(Fail),
}

impl From<Fail> for Stop {
    fn from(f: Fail) -> Stop {
        Stop::Io(f)
    }
}

fn read_json(path: &str, r: &mut dyn Read) -> Result<Value, Stop> {
    let mut bytes = Vec::new();
    r.take(JSON_BYTES_MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| Stop::Problem(format!("archive damaged in entry {path}: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| Stop::Problem(format!("entry {path} does not parse: {e}")))
}
