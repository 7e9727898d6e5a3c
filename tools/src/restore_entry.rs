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
use crate::limits::{COPY_BUFFER_BYTES, INDEX_INTERVAL_BYTES, JSON_BYTES_MAX};
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
    /// Topics (as restored) the target already holds: left out (`--merge`).
    exists: BTreeSet<String>,
    /// Topics of the archive left out because the target holds them.
    pub skipped: BTreeSet<String>,
    /// Topics (as restored) written into the staging dir.
    pub added: BTreeSet<String>,
    /// The groups' commits on the topics restored, each group's owner.
    pub groups: Vec<GroupCommits>,
    /// The archive's producer registry.
    pub registry: Option<Value>,
    /// The archive's API keys, checked.
    pub keys: Option<Vec<es_keys::file::KeyRecord>>,
    /// The largest producer id in a batch header restored (-1: none).
    pub largest_producer_id: i64,
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
        exists: BTreeSet<String>,
    ) -> Result<Staging, Fail> {
        Ok(Staging {
            root: root.to_path_buf(),
            cold: cold.to_path_buf(),
            _lock: datadir::lock(root)?,
            topics: topics.to_vec(),
            renames: renames.iter().cloned().collect(),
            written: BTreeMap::new(),
            done: BTreeSet::new(),
            exists,
            skipped: BTreeSet::new(),
            added: BTreeSet::new(),
            groups: Vec::new(),
            registry: None,
            keys: None,
            largest_producer_id: -1,
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

    /// Whether the archive's `topic` is restored: selected, and not held
    /// by the target under its restored name.
    fn wanted(&self, topic: &str) -> bool {
        self.selected(topic) && !self.exists.contains(self.renamed(topic))
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
            // Written back as it is written, fsynced with the whole tree
            // before anything is renamed into place (durable.rs).
            let mut f = std::io::BufWriter::with_capacity(
                COPY_BUFFER_BYTES,
                durable::Writeback::new(durable::create(&file)?),
            );
            std::io::copy(r, &mut f)
                .map_err(|e| Stop::Problem(format!("archive damaged in entry {path}: {e}")))?;
            let f = f.into_inner().map_err(|e| Fail::io(&file, e.into_error()))?;
            durable::start_writeback(&f.file);
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
                let offsets: Vec<(String, u32, u64)> = g
                    .offsets
                    .iter()
                    .filter(|o| self.wanted(&o.topic))
                    .map(|o| (self.renamed(&o.topic).to_string(), o.partition, o.offset))
                    .collect();
                if !offsets.is_empty() {
                    self.groups.push(GroupCommits {
                        name: g.name,
                        offsets,
                        owner: g.owner,
                    });
                }
                Ok(())
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
            ["producers", "registry.json"] => {
                self.registry = Some(read_json(path, r)?);
                Ok(())
            }
            ["api_keys.json"] => {
                // Checked by the broker's own rules, written as the broker
                // writes it: private (0600), durably.
                let mut bytes = Vec::new();
                r.take(es_keys::limits::KEY_FILE_BYTES_MAX)
                    .read_to_end(&mut bytes)
                    .map_err(|e| Stop::Problem(format!("archive damaged in entry {path}: {e}")))?;
                let keys = es_keys::file::parse(&bytes)
                    .map_err(|e| Stop::Problem(format!("entry {path} does not parse: {e}")))?;
                self.keys = Some(keys);
                Ok(())
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
    fn topic(&mut self, topic: &str) -> Result<(String, Option<String>), Stop> {
        let to = self.renamed(topic).to_string();
        if !valid_topic(topic) || !valid_topic(&to) {
            return Err(Stop::Problem(format!("{topic:?} is not a topic name")));
        }
        if self.selected(topic) && self.exists.contains(&to) {
            self.skipped.insert(topic.to_string());
        }
        let wanted = self.wanted(topic);
        if wanted {
            self.added.insert(to.clone());
        }
        Ok((topic.to_string(), wanted.then_some(to)))
    }

    /// Writes what was gathered from the archive for a data dir of its
    /// own: the groups' commits as `groups/<g>.json` (which the broker
    /// folds into its groups log at start), the producer registry, the
    /// API keys (0600, as the broker writes them).
    pub fn write_extras(&self) -> Result<(), Fail> {
        for g in &self.groups {
            let offsets: Vec<Value> = g
                .offsets
                .iter()
                .map(|(t, p, o)| json!({"topic": t, "partition": p, "offset": o}))
                .collect();
            let file = match &g.owner {
                Some(owner) => json!({"name": g.name, "offsets": offsets, "owner": owner}),
                None => json!({"name": g.name, "offsets": offsets}),
            };
            self.json(&format!("groups/{}.json", g.name), &file)
                .map_err(Stop::into_fail)?;
        }
        if let Some(v) = &self.registry {
            self.json("producers/registry.json", v).map_err(Stop::into_fail)?;
        }
        if let Some(keys) = &self.keys {
            es_keys::file::write(&self.root, keys)
                .map_err(|e| Fail::io(&es_keys::file::path(&self.root), e))?;
        }
        Ok(())
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
                let mut largest = self.largest_producer_id;
                let scanned = scan_file(
                    &log,
                    base,
                    Shape {
                        last: false,
                        end: None,
                    },
                    |h, pos| {
                        largest = largest.max(h.producer.producer_id);
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
                self.largest_producer_id = largest;
                durable::write_unsynced(&dir.join(index_name(base)), &ix.finish(Some(Offset(end))))?;
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

/// The commits of one group on the topics restored (renamed), and its
/// owner.
pub struct GroupCommits {
    pub name: String,
    pub offsets: Vec<(String, u32, u64)>,
    pub owner: Option<String>,
}

/// Why an entry stopped the restore.
enum Stop {
    Problem(String),
    Io(Fail),
}

impl Stop {
    fn into_fail(self) -> Fail {
        match self {
            Stop::Problem(p) => Fail(p),
            Stop::Io(f) => f,
        }
    }
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
