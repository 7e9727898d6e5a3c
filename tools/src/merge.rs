//! `es-tools restore --merge -i ARCHIVE --data-dir D`: the archive's
//! topics added to a stopped broker's data dir, beside its own. Only
//! topics `D` does not hold (under their restored names, `--rename
//! OLD=NEW`) are added; the others are left out and reported. `D` is
//! locked for the whole run (a running broker: exit 2).
//!
//! Everything is first written into `D/.es-tools-merge-<pid>` (cold
//! segments of a `--cold-dir C` elsewhere into `C/.es-tools-merge-<pid>`),
//! checked as a plain restore checks it, and fsynced; nothing of `D`
//! changes before the archive's trailer has checked out. Then, in this
//! order, each step durable before the next:
//! 1. the groups' commits on the added topics: appended as a commit
//!    record to the groups log that holds the group (a torn tail cut
//!    first, as the broker would), or for a group `D` does not know, a
//!    `groups/<g>.json` the broker folds in at start;
//! 2. the producer registry, when the added topics know producer ids: its
//!    next id past every id they know, and every earlier id retired, so
//!    no id is issued twice and no producer of `D` is taken for one of
//!    the archive's (live producers of `D` ask for a new id, as after a
//!    lost registry: docs/tools.md);
//! 3. per topic: its producer snapshots and cold segments renamed into
//!    place, then its directory renamed into `D/topics`, the commit point.
//!    Leftovers of that name without a topic directory (a delete or a
//!    merge cut short) are removed first, as a broker's create does.
//!
//! A crash leaves each topic absent or complete; the same command run
//! again adds the rest (the topics already added are then held by `D`).
//! `api_keys.json` of the archive is not merged: `D`'s keys stay.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use crate::datadir;
use crate::durable;
use crate::fail::{Fail, Outcome};
use crate::groups::{self, GroupFile, LogFile};
use crate::restore::{fill, RestoreOptions};
use crate::restore_entry::{GroupCommits, Staging};
use crate::staged;

/// Staging dirs of a merge: `<prefix><pid>`, in `D` (and in `C`).
const STAGING_PREFIX: &str = ".es-tools-merge-";

pub fn run(o: &RestoreOptions, out: &mut dyn Write) -> Result<Outcome, Fail> {
    let started = Instant::now();
    let data = &o.data_dir;
    let _lock = datadir::lock(data)?;
    let cold_target = datadir::cold_root(data, o.cold_dir.as_deref());
    let cold_apart = cold_target != data.join("cold");
    staged::remove_dead_runs(data, STAGING_PREFIX)?;
    if cold_apart {
        staged::remove_dead_runs(&cold_target, STAGING_PREFIX)?;
    }
    // What must hold before anything is staged: groups logs to append to,
    // a registry to raise.
    let mut logs = groups::logs(data)?.map_err(|(file, why)| {
        Fail(format!(
            "the groups log {} is damaged ({why}): start es-broker on it once (its recovery \
             settles the log, docs/storage.md), stop it, then merge",
            data.join("groups").join(file).display()
        ))
    })?;
    let registry = read_registry(data)?;
    let exists: BTreeSet<String> = datadir::topics(data)?.into_iter().collect();

    let pid = std::process::id();
    let staging = data.join(format!("{STAGING_PREFIX}{pid}"));
    std::fs::create_dir(&staging).map_err(|e| Fail::io(&staging, e))?;
    let cold_staging = if cold_apart {
        std::fs::create_dir_all(&cold_target).map_err(|e| Fail::io(&cold_target, e))?;
        cold_target.join(format!("{STAGING_PREFIX}{pid}"))
    } else {
        staging.join("cold")
    };
    let remove_staging = || {
        let _ = std::fs::remove_dir_all(&staging);
        if cold_apart {
            let _ = std::fs::remove_dir_all(&cold_staging);
        }
    };
    let (st, problems) = match fill(o, &staging, &cold_staging, exists) {
        Ok(x) => x,
        Err(f) => {
            remove_staging();
            return Err(f);
        }
    };
    if !problems.is_empty() {
        remove_staging();
        report_problems(o, out, &problems)?;
        return Ok(Outcome::Problems);
    }
    let target = Target {
        data,
        cold: &cold_target,
        staging: &staging,
        cold_staging: &cold_staging,
    };
    let merged = target.commit(&st, &mut logs, registry);
    remove_staging();
    let retired = merged?;
    report(o, out, &st, retired, started)?;
    Ok(Outcome::Clean)
}

/// Where a merge writes.
struct Target<'a> {
    data: &'a Path,
    cold: &'a Path,
    staging: &'a Path,
    cold_staging: &'a Path,
}

impl Target<'_> {
    /// Moves what was staged into `D`; the floor below which producer ids
    /// were retired, if they were.
    fn commit(
        &self,
        st: &Staging,
        logs: &mut [LogFile],
        registry: Option<Value>,
    ) -> Result<Option<i64>, Fail> {
        durable::sync_tree(self.staging)?;
        if self.cold_staging.exists() {
            durable::sync_tree(self.cold_staging)?;
        }
        self.groups(&st.groups, logs)?;
        let retired = self.registry(st, registry)?;
        for t in &st.added {
            self.topic(t)?;
        }
        Ok(retired)
    }

    /// The groups' commits on the added topics (step 1).
    fn groups(&self, commits: &[GroupCommits], logs: &mut [LogFile]) -> Result<(), Fail> {
        if commits.is_empty() {
            return Ok(());
        }
        let dir = self.data.join("groups");
        std::fs::create_dir_all(&dir).map_err(|e| Fail::io(&dir, e))?;
        let now = now_ms();
        for g in commits {
            let record = groups::commit_record(&g.name, now, &g.offsets);
            if record.len() > crate::limits::GROUPS_RECORD_BYTES_MAX {
                return Err(Fail(format!(
                    "group {}: its commits on the restored topics exceed a groups-log record",
                    g.name
                )));
            }
            let mut held = false;
            for log in logs.iter_mut().filter(|l| l.groups.contains(&g.name)) {
                append(&dir.join(&log.name), log.intact_bytes, &record)?;
                log.intact_bytes += record.len() as u64;
                held = true;
            }
            if !held {
                legacy_file(&dir, g)?;
            }
        }
        durable::sync_dir(&dir)
    }

    /// The producer registry (step 2): `None` when the added topics know
    /// no producer id, else the new floor.
    fn registry(&self, st: &Staging, target: Option<Value>) -> Result<Option<i64>, Fail> {
        let snapshots = st
            .added
            .iter()
            .any(|t| self.staging.join("producers").join(t).exists());
        if st.largest_producer_id < 0 && !snapshots {
            return Ok(None);
        }
        let field =
            |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_i64).unwrap_or(0);
        let next = field(target.as_ref(), "next_id")
            .max(field(st.registry.as_ref(), "next_id"))
            .max(st.largest_producer_id.saturating_add(1));
        let mut v = target.unwrap_or_else(|| json!({"next_id": 0, "exact": true}));
        let retired = field(Some(&v), "retired_below").max(next);
        let Some(m) = v.as_object_mut() else {
            return Err(Fail("producers/registry.json is not a JSON object".into()));
        };
        m.insert("next_id".into(), json!(next));
        m.insert("retired_below".into(), json!(retired));
        let bytes = serde_json::to_vec(&v).map_err(|e| Fail(e.to_string()))?;
        durable::replace(&self.data.join("producers").join("registry.json"), &bytes)?;
        Ok(Some(retired))
    }

    /// One topic (step 3): snapshots and cold segments, then its directory.
    fn topic(&self, t: &str) -> Result<(), Fail> {
        let topics = self.data.join("topics");
        let from = self.staging.join("topics").join(t);
        if !from.is_dir() {
            return Ok(());
        }
        for (staged, root) in [
            (
                self.staging.join("producers").join(t),
                self.data.join("producers"),
            ),
            (self.cold_staging.join(t), self.cold.to_path_buf()),
        ] {
            let to = root.join(t);
            if to.exists() {
                // No topics/<t>: what a delete cut short left.
                std::fs::remove_dir_all(&to).map_err(|e| Fail::io(&to, e))?;
            }
            if staged.is_dir() {
                std::fs::create_dir_all(&root).map_err(|e| Fail::io(&root, e))?;
                rename(&staged, &to)?;
            }
            if root.is_dir() {
                durable::sync_dir(&root)?;
            }
        }
        std::fs::create_dir_all(&topics).map_err(|e| Fail::io(&topics, e))?;
        rename(&from, &topics.join(t))?;
        durable::sync_dir(&topics)
    }
}

fn rename(from: &Path, to: &Path) -> Result<(), Fail> {
    std::fs::rename(from, to)
        .map_err(|e| Fail(format!("renaming {} to {}: {e}", from.display(), to.display())))
}

/// Appends `record` to the groups log at `path` after its first
/// `intact` bytes (a torn tail after them is cut, as the broker cuts it),
/// then fdatasyncs it.
fn append(path: &Path, intact: u64, record: &[u8]) -> Result<(), Fail> {
    use std::io::{Seek, SeekFrom};
    let io = |e| Fail::io(path, e);
    let mut f = std::fs::OpenOptions::new().write(true).open(path).map_err(io)?;
    f.set_len(intact).map_err(io)?;
    f.seek(SeekFrom::Start(intact)).map_err(io)?;
    f.write_all(record).map_err(io)?;
    f.sync_data().map_err(io)
}

/// `groups/<g>.json` for a group no groups log holds: the file's offsets
/// (if one is there, from an earlier merge) with the archive's on top,
/// its owner kept, else the archive's.
fn legacy_file(dir: &Path, g: &GroupCommits) -> Result<(), Fail> {
    let path = dir.join(format!("{}.json", g.name));
    let mut offsets = std::collections::BTreeMap::new();
    let mut owner = g.owner.clone();
    match std::fs::read(&path) {
        Ok(bytes) => {
            let f: GroupFile = serde_json::from_slice(&bytes)
                .map_err(|e| Fail(format!("{} does not parse: {e}", path.display())))?;
            for o in f.offsets {
                offsets.insert((o.topic, o.partition), o.offset);
            }
            owner = f.owner.or(owner);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Fail::io(&path, e)),
    }
    for (t, p, o) in &g.offsets {
        offsets.insert((t.clone(), *p), *o);
    }
    let offsets: Vec<Value> = offsets
        .into_iter()
        .map(|((t, p), o)| json!({"topic": t, "partition": p, "offset": o}))
        .collect();
    let mut v = json!({"name": g.name, "offsets": offsets});
    if let (Some(owner), Some(m)) = (owner, v.as_object_mut()) {
        m.insert("owner".into(), json!(owner));
    }
    let bytes = serde_json::to_vec_pretty(&v).map_err(|e| Fail(e.to_string()))?;
    durable::replace(&path, &bytes)
}

/// `D/producers/registry.json`, if there is one; one that does not parse
/// stops the merge before anything changes.
fn read_registry(data: &Path) -> Result<Option<Value>, Fail> {
    let path = data.join("producers").join("registry.json");
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) if v.is_object() => Ok(Some(v)),
            _ => Err(Fail(format!(
                "{} is damaged: start es-broker on it once (it rebuilds the registry), stop it, then merge",
                path.display()
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Fail::io(&path, e)),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn report_problems(o: &RestoreOptions, out: &mut dyn Write, problems: &[String]) -> Result<(), Fail> {
    if o.json {
        let v = json!({"status": "problems", "data_dir": o.data_dir.display().to_string(), "merge": true,
                       "problems": problems});
        writeln!(out, "{v}")?;
    } else {
        for p in problems {
            writeln!(out, "problem {p}")?;
        }
        writeln!(
            out,
            "restore --merge: {}: nothing merged",
            crate::report::count(problems.len(), "problem")
        )?;
    }
    Ok(())
}

fn report(
    o: &RestoreOptions,
    out: &mut dyn Write,
    st: &Staging,
    retired: Option<i64>,
    started: Instant,
) -> Result<(), Fail> {
    let ms = started.elapsed().as_millis() as u64;
    let renamed = |t: &String| {
        o.renames
            .iter()
            .find(|(from, _)| from == t)
            .map_or(t.clone(), |(_, to)| to.clone())
    };
    let skipped: Vec<Value> = st
        .skipped
        .iter()
        .map(|t| json!({"topic": t, "as": renamed(t), "reason": "the data dir holds a topic of that name"}))
        .collect();
    let keys = if st.keys.is_some() {
        "not merged"
    } else {
        "none in the archive"
    };
    if o.json {
        let v = json!({"status": "complete", "data_dir": o.data_dir.display().to_string(), "merge": true,
                       "added": st.added, "skipped": skipped, "partitions": st.partitions,
                       "groups": st.groups.len(), "producer_ids_retired_below": retired,
                       "api_keys": keys, "elapsed_ms": ms});
        writeln!(out, "{v}")?;
        return Ok(());
    }
    for p in &st.partitions {
        writeln!(out, "partition {}", crate::report::line(p))?;
    }
    for t in &st.skipped {
        let to = renamed(t);
        writeln!(
            out,
            "skipped topic {t}: {} holds a topic {to} (restore it beside with --rename {t}=NEW)",
            o.data_dir.display()
        )?;
    }
    if let Some(r) = retired {
        writeln!(
            out,
            "producer ids below {r} retired: producers of this broker ask for a new id on their next write"
        )?;
    }
    if st.keys.is_some() {
        writeln!(
            out,
            "api_keys.json of the archive not merged: the data dir's keys stay"
        )?;
    }
    writeln!(
        out,
        "restore --merge: {} topics ({} partitions) added to {}, {} skipped, commits of {} groups, in {ms} ms: complete",
        st.added.len(),
        st.partitions.len(),
        o.data_dir.display(),
        st.skipped.len(),
        st.groups.len()
    )?;
    Ok(())
}
