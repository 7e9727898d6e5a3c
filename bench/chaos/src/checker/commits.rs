//! `lost-commit`: a consumer group's committed offset read back below the
//! last commit acknowledged before the read.

use std::collections::HashMap;

use serde_json::json;

use super::{secs, Check, Tally, Verdict};
use crate::history::{Event, Type, F};

/// A commit of one partition's offset, as the history shows it.
struct CommitOp {
    invoked: u64,
    /// When it completed, and how; `None`: it never did.
    completed: Option<(u64, Type)>,
    offset: u64,
}

/// A group's committed offset read back below what was last acknowledged.
///
/// For a read invoked at `t`: let L be the `ok` commit of that partition
/// that completed last before `t`. Any commit that completed after L was
/// invoked, or whose outcome is unknown, may have been applied after L, so
/// the read may return the lowest of those; below that, an acknowledged
/// commit was lost.
pub(super) fn lost_commits(history: &[Event]) -> Check {
    let mut tally = Tally::new(Verdict::Fail);
    let mut invoked_at: HashMap<&str, (u64, &Event)> = HashMap::new();
    let mut commits: HashMap<(String, String, u32), Vec<CommitOp>> = HashMap::new();
    let mut open: HashMap<&str, Vec<(String, String, u32, usize)>> = HashMap::new();
    let mut reads: Vec<(u64, &Event)> = Vec::new();
    for e in history.iter().filter(|e| matches!(e.f, F::Commit | F::Position)) {
        let group = e.group.clone().unwrap_or_default();
        match (e.f, e.kind) {
            (F::Commit, Type::Invoke) => {
                let mut ops = Vec::new();
                for c in &e.offsets {
                    let key = (group.clone(), c.topic.clone(), c.partition);
                    let list = commits.entry(key.clone()).or_default();
                    list.push(CommitOp {
                        invoked: e.time,
                        completed: None,
                        offset: c.offset,
                    });
                    ops.push((key.0, key.1, key.2, list.len() - 1));
                }
                open.insert(e.process.as_str(), ops);
            }
            (F::Commit, kind) => {
                for (g, t, p, i) in open.remove(e.process.as_str()).unwrap_or_default() {
                    if let Some(op) = commits.get_mut(&(g, t, p)).and_then(|l| l.get_mut(i)) {
                        op.completed = Some((e.time, kind));
                    }
                }
            }
            (F::Position, Type::Invoke) => {
                invoked_at.insert(e.process.as_str(), (e.time, e));
            }
            (F::Position, Type::Ok) => {
                if let Some((t, _)) = invoked_at.remove(e.process.as_str()) {
                    reads.push((t, e));
                }
            }
            _ => {}
        }
    }
    for (t, read) in reads {
        let group = read.group.clone().unwrap_or_default();
        let got: HashMap<(&str, u32), u64> = read
            .offsets
            .iter()
            .map(|c| ((c.topic.as_str(), c.partition), c.offset))
            .collect();
        for ((g, topic, p), ops) in &commits {
            if *g != group {
                continue;
            }
            let Some(last) = ops
                .iter()
                .filter(|c| matches!(c.completed, Some((done, Type::Ok)) if done < t))
                .max_by_key(|c| c.completed.map(|(d, _)| d))
            else {
                continue;
            };
            let floor = ops
                .iter()
                .filter(|c| c.invoked < t)
                .filter(|c| match c.completed {
                    Some((done, Type::Ok | Type::Info)) => done > last.invoked || done >= t,
                    Some((_, Type::Fail)) => false,
                    Some((_, Type::Invoke)) | None => true,
                })
                .map(|c| c.offset)
                .chain([last.offset])
                .min()
                .unwrap_or(last.offset);
            let read_offset = got.get(&(topic.as_str(), *p)).copied();
            if read_offset.is_none_or(|r| r < floor) {
                tally.add(|| {
                    json!({"group": g, "topic": topic, "partition": p, "read": read_offset,
                           "acknowledged": last.offset, "read_at_s": secs(t)})
                });
            }
        }
    }
    tally.done()
}
