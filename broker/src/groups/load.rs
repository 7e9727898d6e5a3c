//! Start-up of the consumer groups, on the main thread before the shards
//! run (std I/O): read every groups log in `<data-dir>/groups/` (and the
//! `<group>.json` files of brokers before the log), recover them, and
//! write each shard's log afresh, one snapshot record per group it
//! coordinates under the current `--shards`.
//!
//! Rewriting at every start keeps one rule for everything that can be
//! found there: a torn tail, a log of another shard count (placement is
//! recomputed at start), files of an older broker. The new logs are made
//! durable (fdatasync, rename, fsync of the directory) before any file they
//! replace is removed, and the broker serves nothing before both are done;
//! so the files on disk at any moment hold the groups' state, and where a
//! crash leaves old files beside new ones, both hold the same state (the
//! new ones were written from the old, with no commit in between).
//!
//! Damage follows the storage engine's rules (docs/storage.md, "Damaged
//! data"): a record cut short or garbage to the end of a log, with no
//! intact record after it, is the torn tail of an append that was never
//! acknowledged, and is dropped with a warning; damage with intact records
//! after it is corruption, and stops the start (exit code 3) unless
//! `--accept-data-loss`, which first copies the bytes from the bad record
//! on to `<log>.corrupt-<unix ms>` and then drops them.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::Deserialize;

use crate::groups::committed::Committed;
use crate::groups::count::GroupCount;
use crate::groups::log::{self as group_log, Record};
use crate::groups::store::log_name;
use crate::shard::placement::{self, ShardId};

pub fn groups_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("groups")
}

/// A group's state as the files say.
#[derive(Debug, Default, Clone)]
struct State {
    committed: Committed,
    idle_since_ms: i64,
    /// It had members when the last word on it was written.
    members: bool,
    /// The key that owns it.
    owner: Option<String>,
}

/// What one file said: its groups.
type Groups = HashMap<String, State>;

fn apply(groups: &mut Groups, record: Record) {
    match record {
        Record::Commit {
            group,
            at_ms,
            members,
            offsets,
        } => {
            let s = groups.entry(group).or_default();
            for (t, p, o) in &offsets {
                s.committed.set(t, *p, *o);
            }
            s.members = members;
            s.idle_since_ms = s.idle_since_ms.max(at_ms);
        }
        Record::Snapshot {
            group,
            at_ms,
            members,
            offsets,
        } => {
            let committed = offsets.iter().map(|(t, p, o)| (t.as_str(), *p, *o)).collect();
            groups.insert(
                group,
                State {
                    committed,
                    idle_since_ms: at_ms,
                    members,
                    owner: None,
                },
            );
        }
        Record::Delete { group, .. } => {
            groups.remove(&group);
        }
        Record::Owner { group, owner, .. } => {
            if let Some(s) = groups.get_mut(&group) {
                s.owner = Some(owner);
            }
        }
        Record::Members {
            group,
            at_ms,
            members,
        } => {
            if let Some(s) = groups.get_mut(&group) {
                s.members = members;
                if !members {
                    s.idle_since_ms = s.idle_since_ms.max(at_ms);
                }
            }
        }
    }
}

/// The format of `<group>.json`, from brokers before the groups log, and
/// what `es-tools restore` writes (with the group's `owner`, if it has one).
#[derive(Deserialize)]
struct LegacyFile {
    name: String,
    offsets: Vec<LegacyOffset>,
    #[serde(default)]
    owner: Option<String>,
}

#[derive(Deserialize)]
struct LegacyOffset {
    topic: String,
    partition: u32,
    offset: u64,
}

/// What `groups/` holds.
#[derive(Default)]
struct Listing {
    legacy: Vec<(String, PathBuf)>,
    /// `(shards, shard, path)`, sorted.
    logs: Vec<(usize, usize, PathBuf)>,
    leftovers: Vec<PathBuf>,
}

fn list(dir: &Path) -> std::io::Result<Listing> {
    let mut out = Listing::default();
    let entries = std::fs::read_dir(dir)?; // blocking-ok: start-up, before the shards run
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.contains(".corrupt-") {
            continue;
        }
        if name.ends_with(".tmp") {
            out.leftovers.push(path);
        } else if let Some(group) = name.strip_suffix(".json") {
            if crate::topics::topic::validate_group_name(group).is_ok() {
                out.legacy.push((group.to_string(), path));
            } else {
                tracing::warn!(path = %path.display(), "not a group file; ignored");
            }
        } else if let Some((shard, shards)) = parse_log_name(&name) {
            out.logs.push((shards, shard, path));
        } else {
            tracing::warn!(path = %path.display(), "not a groups log; ignored");
        }
    }
    out.legacy.sort();
    out.logs.sort();
    Ok(out)
}

/// `(shard, shards)` of a name `shard-<i>-of-<n>.log` with `i < n`.
fn parse_log_name(name: &str) -> Option<(usize, usize)> {
    let rest = name.strip_prefix("shard-")?.strip_suffix(".log")?;
    let (i, n) = rest.split_once("-of-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(i) || !digits(n) {
        return None;
    }
    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some((i, n))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Reads, recovers and rewrites the groups of `data_dir` for `shards`
/// shards; per shard, the groups it coordinates.
pub fn load(data_dir: &Path, shards: usize, accept_data_loss: bool) -> Result<Vec<Vec<LoadedGroup>>, String> {
    load_at(data_dir, shards, accept_data_loss, now_ms())
}

/// [`load`] with the clock as an argument: `now_ms` starts the retention of
/// every group that had members when the broker stopped (members are not
/// kept across a restart, so they left then).
pub fn load_at(
    data_dir: &Path,
    shards: usize,
    accept_data_loss: bool,
    now_ms: i64,
) -> Result<Vec<Vec<LoadedGroup>>, String> {
    let dir = groups_dir(data_dir);
    let io = |what: &str, p: &Path, e: std::io::Error| format!("{what} {}: {e}", p.display());
    es_storage::create_dir_all_durable(&dir).map_err(|e| io("creating", &dir, e))?; // blocking-ok: start-up, before the shards run
    let listing = list(&dir).map_err(|e| io("listing", &dir, e))?;
    let mut all = Groups::new();
    let mut replaced: Vec<PathBuf> = Vec::new();

    for (group, path) in &listing.legacy {
        let bytes = std::fs::read(path).map_err(|e| io("reading", path, e))?; // blocking-ok: start-up, before the shards run
        match serde_json::from_slice::<LegacyFile>(&bytes) {
            Ok(f) if f.name == *group && f.owner.as_deref().is_none_or(group_log::valid_owner) => {
                let meta = std::fs::metadata(path); // blocking-ok: start-up, before the shards run
                let mtime = meta
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(now_ms, |d| d.as_millis() as i64);
                let committed = f
                    .offsets
                    .iter()
                    .map(|o| (o.topic.as_str(), o.partition, o.offset))
                    .collect();
                all.insert(
                    group.clone(),
                    State {
                        committed,
                        idle_since_ms: mtime,
                        members: false,
                        owner: f.owner,
                    },
                );
                replaced.push(path.clone());
            }
            _ => {
                corrupt_legacy(path, accept_data_loss)?;
            }
        }
    }

    // Other shard counts first, the current one last: where both hold a
    // group (a crash during an earlier rewrite) they agree, and the current
    // layout is the one later writes went to.
    let current = |n: usize| n == shards;
    let mut logs: Vec<&(usize, usize, PathBuf)> =
        listing.logs.iter().filter(|(n, _, _)| !current(*n)).collect();
    logs.extend(listing.logs.iter().filter(|(n, _, _)| current(*n)));
    for (n, i, path) in logs {
        let bytes = std::fs::read(path).map_err(|e| io("reading", path, e))?; // blocking-ok: start-up, before the shards run
        let mut groups = Groups::new();
        if let Some(d) = group_log::scan(&bytes, |r| apply(&mut groups, r)) {
            let dropped = bytes.len() - d.position;
            if d.intact_after == 0 {
                tracing::warn!(
                    file = %path.display(),
                    position = d.position,
                    bytes_dropped = dropped,
                    reason = %d.reason,
                    "groups log: trimmed a torn tail (an append that was never acknowledged)"
                );
            } else {
                metrics::counter!("es_storage_corruptions_total", "found" => "recovery").increment(1);
                if !accept_data_loss {
                    crate::shard::runtime::DATA_LOSS_REFUSED.store(true, Ordering::Release);
                    let msg = format!(
                        "refusing to start: corrupt data in the groups log {} at byte {}: {}; {} intact-looking \
                         record(s) after the damage (from byte {}) would be lost. Nothing was changed. Start with \
                         --accept-data-loss to keep the bytes from the damage on in {}.corrupt-<unix ms> and go on \
                         without them",
                        path.display(),
                        d.position,
                        d.reason,
                        d.intact_after,
                        d.first_intact_at.unwrap_or(d.position),
                        path.display(),
                    );
                    tracing::error!(file = %path.display(), position = d.position, reason = %d.reason, intact_after = d.intact_after, "corrupt groups log");
                    return Err(msg);
                }
                let copy = quarantine(path, &bytes[d.position..])?;
                tracing::error!(
                    file = %path.display(),
                    position = d.position,
                    bytes = dropped,
                    intact_records_lost = d.intact_after,
                    reason = %d.reason,
                    copy = %copy.display(),
                    "corrupt data quarantined and cut off the groups log: the commits after it are lost"
                );
            }
        }
        tracing::debug!(file = %path.display(), shards = n, shard = i, groups = groups.len(), "groups log read");
        all.extend(groups);
        if !(current(*n) && *i < shards) {
            replaced.push(path.clone());
        }
    }

    let mut per_shard: Vec<Vec<LoadedGroup>> = (0..shards).map(|_| Vec::new()).collect();
    let mut names: Vec<String> = all.keys().cloned().collect();
    names.sort();
    for name in names {
        let Some(s) = all.remove(&name) else { continue };
        if s.committed.is_empty() {
            continue;
        }
        let idle_since_ms = if s.members {
            s.idle_since_ms.max(now_ms)
        } else {
            s.idle_since_ms
        };
        per_shard[placement::shard_of_group(&name, shards)].push(LoadedGroup {
            name,
            committed: s.committed,
            idle_since_ms,
            owner: s.owner,
        });
    }

    for (i, groups) in per_shard.iter().enumerate() {
        let mut bytes = Vec::new();
        for g in groups {
            group_log::encode_offsets(
                &mut bytes,
                true,
                &g.name,
                g.idle_since_ms,
                false,
                g.committed.iter(),
            );
            group_log::encode_owner(&mut bytes, &g.name, g.idle_since_ms, g.owner.as_deref());
        }
        let name = log_name(i, shards);
        write_durably(&dir, &name, &bytes).map_err(|e| io("writing", &dir.join(&name), e))?;
    }
    sync_dir(&dir).map_err(|e| io("syncing", &dir, e))?;
    replaced.extend(listing.leftovers);
    if !replaced.is_empty() {
        for path in &replaced {
            let removed = std::fs::remove_file(path); // blocking-ok: start-up, before the shards run
            match removed {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("removing", path, e)),
            }
        }
        sync_dir(&dir).map_err(|e| io("syncing", &dir, e))?;
        if !listing.legacy.is_empty() {
            tracing::info!(
                files = listing.legacy.len(),
                "consumer group files of an older broker moved into the groups log"
            );
        }
    }
    let total: usize = per_shard.iter().map(Vec::len).sum();
    tracing::info!(groups = total, shards, "consumer groups loaded");
    Ok(per_shard)
}

/// A `<group>.json` that does not parse: corruption, as in a log.
fn corrupt_legacy(path: &Path, accept_data_loss: bool) -> Result<(), String> {
    metrics::counter!("es_storage_corruptions_total", "found" => "recovery").increment(1);
    if !accept_data_loss {
        crate::shard::runtime::DATA_LOSS_REFUSED.store(true, Ordering::Release);
        return Err(format!(
            "refusing to start: the consumer group file {} cannot be read (not the JSON of a group of this \
             name). Nothing was changed. Start with --accept-data-loss to move it to {}.corrupt-<unix ms> and \
             go on without that group's offsets",
            path.display(),
            path.display()
        ));
    }
    let copy = PathBuf::from(format!("{}.corrupt-{}", path.display(), now_ms()));
    std::fs::rename(path, &copy).map_err(|e| format!("moving {} aside: {e}", path.display()))?; // blocking-ok: start-up, before the shards run
    if let Some(dir) = path.parent() {
        sync_dir(dir).map_err(|e| format!("syncing {}: {e}", dir.display()))?;
    }
    tracing::error!(file = %path.display(), copy = %copy.display(), "unreadable consumer group file moved aside: the group's offsets are lost");
    Ok(())
}

/// Copies the damaged bytes of `path` to `<path>.corrupt-<unix ms>`, durably.
fn quarantine(path: &Path, bytes: &[u8]) -> Result<PathBuf, String> {
    let copy = PathBuf::from(format!("{}.corrupt-{}", path.display(), now_ms()));
    let name = copy
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    write_durably(dir, &name, bytes).map_err(|e| format!("writing {}: {e}", copy.display()))?;
    sync_dir(dir).map_err(|e| format!("syncing {}: {e}", dir.display()))?;
    Ok(copy)
}

/// Writes `dir/name.tmp`, fdatasyncs it and renames it to `dir/name` (the
/// caller fsyncs `dir`).
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?; // blocking-ok: start-up, before the shards run
    f.write_all(bytes)?;
    f.sync_data()?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name)) // blocking-ok: start-up, before the shards run
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all() // blocking-ok: start-up, before the shards run
}

/// A group as start-up read it back (groups/load.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedGroup {
    pub name: String,
    pub committed: crate::groups::committed::Committed,
    pub idle_since_ms: i64,
    pub owner: Option<String>,
}

/// What a shard starts its groups with: those start-up loaded for it
/// (groups/load.rs), and the broker's count.
pub struct ShardGroups {
    pub loaded: Vec<LoadedGroup>,
    pub count: Arc<GroupCount>,
}

/// The groups start-up loaded for every shard, each taken once by its
/// shard as it starts (Send: handed from the main thread).
pub struct BrokerGroups {
    per_shard: std::sync::Mutex<Vec<Vec<LoadedGroup>>>, // blocking-ok: taken once per shard at its start
    count: Arc<GroupCount>,
}

impl BrokerGroups {
    pub fn new(per_shard: Vec<Vec<LoadedGroup>>, groups_max: usize) -> BrokerGroups {
        let live = per_shard.iter().map(Vec::len).sum();
        BrokerGroups {
            per_shard: std::sync::Mutex::new(per_shard), // blocking-ok: taken once per shard at its start
            count: Arc::new(GroupCount::new(live, groups_max)),
        }
    }

    /// Shard `shard`'s groups (empty if taken already).
    pub fn take(&self, shard: ShardId) -> ShardGroups {
        let mut per_shard = self.per_shard.lock().unwrap_or_else(|e| e.into_inner()); // blocking-ok: start-up, uncontended
        let loaded = per_shard.get_mut(shard).map(std::mem::take).unwrap_or_default();
        ShardGroups {
            loaded,
            count: self.count.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn offsets(g: &LoadedGroup) -> Vec<(String, u32, u64)> {
        g.committed
            .iter()
            .map(|(t, p, o)| (t.to_string(), p, o))
            .collect()
    }

    fn all(loaded: &[Vec<LoadedGroup>]) -> Vec<&LoadedGroup> {
        let mut v: Vec<&LoadedGroup> = loaded.iter().flatten().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn log_names() {
        assert_eq!(parse_log_name("shard-0-of-2.log"), Some((0, 2)));
        assert_eq!(parse_log_name("shard-11-of-12.log"), Some((11, 12)));
        for bad in [
            "shard-2-of-2.log",
            "shard--of-2.log",
            "shard-1-of-2.log.tmp",
            "shard-a-of-2.log",
            "x.log",
        ] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
        assert_eq!(parse_log_name(&log_name(3, 4)), Some((3, 4)));
    }

    /// Files of an older broker (one JSON file per group) load, and are
    /// replaced by one log per shard; so is a log of another shard count,
    /// whose groups go to the shards that coordinate them now.
    #[test]
    fn older_files_and_other_shard_counts_are_rewritten_for_this_one() {
        let data = tempfile::tempdir().unwrap();
        let dir = groups_dir(data.path());
        fs::create_dir_all(&dir).unwrap(); // test setup
        fs::write(
            dir.join("old.json"),
            r#"{"name":"old","offsets":[{"topic":"t","partition":1,"offset":7}],"owner":"q3x7k2m5w4a6b2cd"}"#,
        )
        .unwrap();
        fs::write(dir.join("half.json.tmp"), b"{").unwrap();
        let mut log = Vec::new();
        group_log::encode_offsets(&mut log, false, "a", 10, false, [("t", 0, 1)]);
        group_log::encode_offsets(&mut log, false, "a", 20, false, [("t", 0, 2), ("u", 3, 4)]);
        group_log::encode_offsets(&mut log, false, "gone", 20, false, [("t", 0, 2)]);
        group_log::encode_delete(&mut log, "gone", 30);
        fs::write(dir.join(log_name(0, 3)), &log).unwrap();

        let loaded = load_at(data.path(), 2, false, 1_000).unwrap();
        assert_eq!(loaded.len(), 2);
        let groups = all(&loaded);
        assert_eq!(groups.len(), 2, "{groups:?}");
        assert_eq!(groups[0].name, "a");
        assert_eq!(offsets(groups[0]), vec![("t".into(), 0, 2), ("u".into(), 3, 4)]);
        assert_eq!(groups[0].idle_since_ms, 20);
        assert_eq!(groups[1].name, "old");
        assert_eq!(offsets(groups[1]), vec![("t".into(), 1, 7)]);
        assert_eq!(groups[1].owner.as_deref(), Some("q3x7k2m5w4a6b2cd"));
        assert_eq!(groups[0].owner, None);
        for (i, shard) in loaded.iter().enumerate() {
            for g in shard {
                assert_eq!(placement::shard_of_group(&g.name, 2), i, "{}", g.name);
            }
        }
        assert_eq!(files(&dir), vec![log_name(0, 2), log_name(1, 2)]);
        // Loading again reads back exactly what was written.
        let again = load_at(data.path(), 2, false, 2_000).unwrap();
        assert_eq!(again, loaded);
    }

    /// A group that had members when the broker stopped left them then: its
    /// retention starts at the start-up; one without keeps its last commit.
    #[test]
    fn retention_counts_from_the_last_commit_or_the_last_member() {
        let data = tempfile::tempdir().unwrap();
        let dir = groups_dir(data.path());
        fs::create_dir_all(&dir).unwrap(); // test setup
        let mut log = Vec::new();
        group_log::encode_offsets(&mut log, false, "busy", 10, true, [("t", 0, 1)]);
        group_log::encode_offsets(&mut log, false, "left", 10, true, [("t", 0, 1)]);
        group_log::encode_members(&mut log, "left", 50, false);
        group_log::encode_offsets(&mut log, false, "tools", 10, false, [("t", 0, 1)]);
        group_log::encode_members(&mut log, "nobody", 60, true);
        fs::write(dir.join(log_name(0, 1)), &log).unwrap();
        let loaded = load_at(data.path(), 1, false, 1_000).unwrap();
        let idle: Vec<(&str, i64)> = all(&loaded)
            .iter()
            .map(|g| (g.name.as_str(), g.idle_since_ms))
            .collect();
        assert_eq!(idle, vec![("busy", 1_000), ("left", 50), ("tools", 10)]);
    }

    /// A torn tail is dropped; damage with intact records after it stops the
    /// start and changes nothing, unless data loss is accepted: then the
    /// bytes from the damage on are kept aside and the records before it
    /// load.
    #[test]
    fn torn_tails_are_dropped_and_corruption_stops_the_start() {
        let data = tempfile::tempdir().unwrap();
        let dir = groups_dir(data.path());
        fs::create_dir_all(&dir).unwrap(); // test setup
        let mut log = Vec::new();
        group_log::encode_offsets(&mut log, false, "a", 10, false, [("t", 0, 1)]);
        let first = log.len();
        group_log::encode_offsets(&mut log, false, "b", 10, false, [("t", 0, 2)]);
        group_log::encode_offsets(&mut log, false, "c", 10, false, [("t", 0, 3)]);
        let path = dir.join(log_name(0, 1));

        fs::write(&path, &log[..log.len() - 3]).unwrap();
        let loaded = load_at(data.path(), 1, false, 0).unwrap();
        let names: Vec<&str> = all(&loaded).iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["a", "b"], "the torn last record is dropped");

        let mut bad = log.clone();
        bad[first + 5] ^= 1;
        fs::write(&path, &bad).unwrap();
        let e = load_at(data.path(), 1, false, 0).unwrap_err();
        assert!(e.contains("corrupt") && e.contains("--accept-data-loss"), "{e}");
        assert_eq!(fs::read(&path).unwrap(), bad, "nothing changed");
        assert_eq!(files(&dir), vec![log_name(0, 1)]);

        let loaded = load_at(data.path(), 1, true, 0).unwrap();
        let names: Vec<&str> = all(&loaded).iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, vec!["a"]);
        let kept: Vec<String> = files(&dir)
            .into_iter()
            .filter(|f| f.contains(".corrupt-"))
            .collect();
        assert_eq!(kept.len(), 1, "{:?}", files(&dir));
        assert_eq!(fs::read(dir.join(&kept[0])).unwrap(), &bad[first..]);
    }

    #[test]
    fn an_unreadable_older_file_stops_the_start_unless_loss_is_accepted() {
        let data = tempfile::tempdir().unwrap();
        let dir = groups_dir(data.path());
        fs::create_dir_all(&dir).unwrap(); // test setup
        fs::write(dir.join("g.json"), b"{\"name\":").unwrap();
        let e = load_at(data.path(), 1, false, 0).unwrap_err();
        assert!(e.contains("g.json") && e.contains("--accept-data-loss"), "{e}");
        assert!(dir.join("g.json").exists());
        let loaded = load_at(data.path(), 1, true, 0).unwrap();
        assert!(all(&loaded).is_empty());
        assert!(!dir.join("g.json").exists());
        assert!(files(&dir).iter().any(|f| f.starts_with("g.json.corrupt-")));
    }
}
