//! The committed offsets of the consumer groups, read from a data dir's
//! `groups/`: the groups logs `shard-<i>-of-<n>.log` (byte layout at the
//! top of broker/src/groups/log.rs) and the `<group>.json` files of older
//! brokers, which the broker still loads (broker/src/groups/load.rs).
//! The offsets and each group's owner (the API key that made it,
//! docs/security.md) are read; reading stops at the first bad record.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::fail::Fail;

/// group -> (topic, partition) -> committed offset.
pub type Groups = BTreeMap<String, BTreeMap<(String, u32), u64>>;

/// What reading `groups/` found besides the offsets.
#[derive(Default, Debug)]
pub struct Read {
    pub groups: Groups,
    /// group -> the key id that owns it, for groups that have an owner.
    pub owners: BTreeMap<String, String>,
    /// `(file, problem)`: a log record that does not decode, a `.json`
    /// that does not parse.
    pub damage: Vec<(String, String)>,
    /// Files read.
    pub files: Vec<String>,
}

const HEADER_BYTES: usize = 20;
const MAGIC: u8 = 1;

/// `<group>.json`: `{"name", "offsets": [{"topic", "partition", "offset"}]}`.
#[derive(Deserialize)]
pub struct GroupFile {
    pub name: String,
    pub offsets: Vec<GroupOffset>,
    #[serde(default)]
    pub owner: Option<String>,
}

#[derive(Deserialize)]
pub struct GroupOffset {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

pub fn read(data: &Path) -> Result<Read, Fail> {
    let dir = data.join("groups");
    let mut out = Read::default();
    let names = crate::datadir::names(&dir)?;
    let mut logs = Vec::new();
    for name in &names {
        let path = dir.join(name);
        if name.contains(".corrupt-") || name.ends_with(".tmp") {
            continue;
        }
        if let Some(group) = name.strip_suffix(".json") {
            let bytes = std::fs::read(&path).map_err(|e| Fail::io(&path, e))?;
            match serde_json::from_slice::<GroupFile>(&bytes) {
                Ok(f) if f.name == group => {
                    if let Some(owner) = f.owner {
                        out.owners.insert(f.name.clone(), owner);
                    }
                    let g = out.groups.entry(f.name).or_default();
                    for o in f.offsets {
                        g.insert((o.topic, o.partition), o.offset);
                    }
                }
                Ok(_) => out
                    .damage
                    .push((name.clone(), "its name is not the file's".into())),
                Err(e) => out.damage.push((name.clone(), format!("does not parse: {e}"))),
            }
            out.files.push(name.clone());
        } else if let Some(n) = shard_count(name) {
            logs.push((n, name.clone()));
        }
    }
    logs.sort();
    for (_, name) in logs {
        let path = dir.join(&name);
        let bytes = std::fs::read(&path).map_err(|e| Fail::io(&path, e))?;
        if let Some((at, why)) = apply_log(&bytes, &mut out) {
            out.damage
                .push((name.clone(), format!("bad record at byte {at}: {why}")));
        }
        out.files.push(name);
    }
    Ok(out)
}

/// The groups each groups log of `data` holds at its end (a delete
/// forgets one), by file name; and where each log's intact records end
/// (the rest is a torn tail, which the broker drops too). A log damaged
/// before its end (records after the damage) is an error: `(file, why)`.
pub fn logs(data: &Path) -> Result<Result<Vec<LogFile>, (String, String)>, Fail> {
    let dir = data.join("groups");
    let mut out = Vec::new();
    for name in crate::datadir::names(&dir)? {
        if shard_count(&name).is_none() {
            continue;
        }
        let path = dir.join(&name);
        let bytes = std::fs::read(&path).map_err(|e| Fail::io(&path, e))?;
        let mut held = std::collections::BTreeSet::new();
        let mut at = 0;
        while at < bytes.len() {
            match record(bytes.get(at..).unwrap_or_default()) {
                Ok((len, rec)) => {
                    match rec {
                        Rec::Set { group, .. } | Rec::Owner { group, .. } => {
                            held.insert(group);
                        }
                        Rec::Delete(group) => {
                            held.remove(&group);
                        }
                        Rec::Other => {}
                    }
                    at += len;
                }
                Err(None) => break,
                Err(Some(why)) => return Ok(Err((name, format!("bad record at byte {at}: {why}")))),
            }
        }
        out.push(LogFile {
            name,
            groups: held,
            intact_bytes: at as u64,
        });
    }
    Ok(Ok(out))
}

/// One groups log, as [`logs`] read it.
pub struct LogFile {
    pub name: String,
    pub groups: std::collections::BTreeSet<String>,
    pub intact_bytes: u64,
}

/// A commit record in the broker's layout (broker/src/groups/log.rs): sets
/// `offsets` of `group` and leaves its others alone. Topic and group
/// names are at most 249 bytes (checked by the caller).
pub fn commit_record(group: &str, at_ms: i64, offsets: &[(String, u32, u64)]) -> Vec<u8> {
    let mut r = vec![0u8; 8];
    r.extend_from_slice(&[MAGIC, KIND_COMMIT, 0]);
    r.extend_from_slice(&at_ms.to_le_bytes());
    r.push(group.len() as u8);
    r.extend_from_slice(group.as_bytes());
    let mut runs: BTreeMap<&str, Vec<(u32, u64)>> = BTreeMap::new();
    for (t, p, o) in offsets {
        runs.entry(t.as_str()).or_default().push((*p, *o));
    }
    r.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for (t, list) in runs {
        r.push(t.len() as u8);
        r.extend_from_slice(t.as_bytes());
        r.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for (p, o) in list {
            r.extend_from_slice(&p.to_le_bytes());
            r.extend_from_slice(&o.to_le_bytes());
        }
    }
    let len = (r.len() as u32).to_le_bytes();
    let mut h = crc32fast::Hasher::new();
    h.update(&len);
    h.update(r.get(8..).unwrap_or_default());
    let crc = h.finalize().to_le_bytes();
    for (i, b) in len.into_iter().chain(crc).enumerate() {
        if let Some(slot) = r.get_mut(i) {
            *slot = b;
        }
    }
    r
}

const KIND_COMMIT: u8 = 1;

/// `n` of `shard-<i>-of-<n>.log`.
fn shard_count(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("shard-")?.strip_suffix(".log")?;
    let (i, n) = rest.split_once("-of-")?;
    let (i, n): (usize, usize) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some(n)
}

/// Applies the records of a groups log in order; where one does not
/// decode, its position and why, unless only zeros or a record cut short
/// end the file (a torn tail, which the broker drops too).
fn apply_log(bytes: &[u8], out: &mut Read) -> Option<(usize, String)> {
    let mut at = 0;
    while at < bytes.len() {
        let rest = bytes.get(at..).unwrap_or_default();
        match record(rest) {
            Ok((len, rec)) => {
                apply(out, rec);
                at += len;
            }
            Err(None) => return None,
            Err(Some(why)) => return Some((at, why.to_string())),
        }
    }
    None
}

enum Rec {
    Set {
        group: String,
        snapshot: bool,
        offsets: Vec<(String, u32, u64)>,
    },
    Delete(String),
    Owner {
        group: String,
        owner: String,
    },
    Other,
}

/// As the broker applies a record (broker/src/groups/load.rs): a snapshot
/// replaces the group's offsets and clears its owner, which the owner
/// record written after it restores.
fn apply(out: &mut Read, rec: Rec) {
    let groups = &mut out.groups;
    match rec {
        Rec::Set {
            group,
            snapshot,
            offsets,
        } => {
            if snapshot {
                out.owners.remove(&group);
            }
            let g = groups.entry(group).or_default();
            if snapshot {
                g.clear();
            }
            for (t, p, o) in offsets {
                g.insert((t, p), o);
            }
        }
        Rec::Delete(group) => {
            groups.remove(&group);
            out.owners.remove(&group);
        }
        Rec::Owner { group, owner } => {
            out.owners.insert(group, owner);
        }
        Rec::Other => {}
    }
}

struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (h, r) = self.0.split_at_checked(n)?;
        self.0 = r;
        Some(h)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn name(&mut self) -> Option<String> {
        let n = self.u8()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// The record at the start of `bytes` and its length; `Err(None)` for a
/// torn tail (cut short, or zeros to the end), `Err(Some(why))` otherwise.
fn record(bytes: &[u8]) -> Result<(usize, Rec), Option<&'static str>> {
    if bytes.iter().all(|&b| b == 0) {
        return Err(None);
    }
    let mut c = Cur(bytes);
    let len = c.u32().ok_or(None)? as usize;
    let stored = c.u32().ok_or(None)?;
    if !(HEADER_BYTES + 1..=crate::limits::GROUPS_RECORD_BYTES_MAX).contains(&len) {
        return Err(Some("record length out of range"));
    }
    let record = bytes.get(..len).ok_or(None)?;
    let mut h = crc32fast::Hasher::new();
    h.update(record.get(..4).unwrap_or_default());
    h.update(record.get(8..).unwrap_or_default());
    if h.finalize() != stored {
        return Err(Some("checksum mismatch"));
    }
    let mut c = Cur(record.get(8..).unwrap_or_default());
    let bad = Some("a record that does not decode");
    if c.u8() != Some(MAGIC) {
        return Err(Some("unknown magic"));
    }
    let kind = c.u8().ok_or(bad)?;
    let _flags = c.u8().ok_or(bad)?;
    let _at_ms = c.u64().ok_or(bad)?;
    let group = c.name().ok_or(bad)?;
    let rec = match kind {
        1 | 2 => {
            let mut offsets = Vec::new();
            for _ in 0..c.u32().ok_or(bad)? {
                let topic = c.name().ok_or(bad)?;
                let count = c.u32().ok_or(bad)?;
                if count as usize > c.0.len() / 12 {
                    return Err(bad);
                }
                for _ in 0..count {
                    offsets.push((topic.clone(), c.u32().ok_or(bad)?, c.u64().ok_or(bad)?));
                }
            }
            Rec::Set {
                group,
                snapshot: kind == 2,
                offsets,
            }
        }
        3 => Rec::Delete(group),
        4 => Rec::Other,
        5 => {
            let owner = c.name().ok_or(bad)?;
            if owner.is_empty() {
                return Err(bad);
            }
            Rec::Owner { group, owner }
        }
        _ => return Err(Some("unknown record kind")),
    };
    Ok((len, rec))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record in the broker's layout (broker/src/groups/log.rs).
    fn record(kind: u8, group: &str, body: &[u8]) -> Vec<u8> {
        let mut r = vec![0u8; 8];
        r.extend_from_slice(&[MAGIC, kind, 0]);
        r.extend_from_slice(&7i64.to_le_bytes());
        r.push(group.len() as u8);
        r.extend_from_slice(group.as_bytes());
        r.extend_from_slice(body);
        let len = r.len() as u32;
        r[0..4].copy_from_slice(&len.to_le_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&r[..4]);
        h.update(&r[8..]);
        let crc = h.finalize();
        r[4..8].copy_from_slice(&crc.to_le_bytes());
        r
    }

    fn commit(group: &str, snapshot: bool) -> Vec<u8> {
        let mut body = 1u32.to_le_bytes().to_vec();
        body.push(1);
        body.push(b't');
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&5u64.to_le_bytes());
        record(if snapshot { 2 } else { 1 }, group, &body)
    }

    fn owner(group: &str, key: &str) -> Vec<u8> {
        let mut body = vec![key.len() as u8];
        body.extend_from_slice(key.as_bytes());
        record(5, group, &body)
    }

    #[test]
    fn a_commit_record_decodes_and_merges() {
        let mut log = commit("a", false);
        log.extend(owner("a", "q3x7k2m5w4a6b2cd"));
        log.extend(super::commit_record(
            "a",
            9,
            &[("u".into(), 2, 40), ("v".into(), 0, 7), ("u".into(), 0, 1)],
        ));
        let mut out = Read::default();
        assert_eq!(apply_log(&log, &mut out), None);
        let a = &out.groups["a"];
        assert_eq!(a.len(), 4, "the commit added to what was there: {a:?}");
        assert_eq!(a[&("t".to_string(), 0)], 5);
        assert_eq!(a[&("u".to_string(), 2)], 40);
        assert_eq!(out.owners["a"], "q3x7k2m5w4a6b2cd", "the owner stays");
    }

    #[test]
    fn owners_follow_the_log_as_the_broker_applies_it() {
        let mut log = commit("a", false);
        log.extend(owner("a", "q3x7k2m5w4a6b2cd"));
        log.extend(commit("b", false));
        log.extend(owner("b", "zzzzzzzzzzzzzzzz"));
        log.extend(commit("b", true));
        log.extend(commit("gone", false));
        log.extend(owner("gone", "q3x7k2m5w4a6b2cd"));
        log.extend(record(3, "gone", &[]));
        let mut out = Read::default();
        assert_eq!(apply_log(&log, &mut out), None);
        assert_eq!(out.groups.len(), 2);
        assert_eq!(
            out.owners.into_iter().collect::<Vec<_>>(),
            vec![("a".to_string(), "q3x7k2m5w4a6b2cd".to_string())],
            "b's snapshot cleared its owner; gone's delete forgot it"
        );
    }
}
