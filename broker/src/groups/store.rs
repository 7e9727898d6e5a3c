//! The consumer groups one shard coordinates, and the groups log that keeps
//! their committed offsets durable: `<data-dir>/groups/shard-<i>-of-<n>.log`,
//! records appended (groups/log.rs), never a file per group.
//!
//! Lives on its shard; nothing in it is shared but the broker-wide count of
//! groups (`--groups-max`, count.rs). An append is written and fdatasynced by the
//! shard's fsync batcher, which runs one sync of the log at a time and
//! covers every record appended meanwhile with the next: one fsync for any
//! number of concurrent commits. Only after the fsync are a record's
//! effects applied to the groups in memory, in log order, and its caller
//! answered: what a client saw acknowledged is in the file, and memory
//! never runs ahead of it.
//!
//! The log is compacted when it has grown past twice its last snapshot
//! (and by at least [`GROUP_LOG_COMPACT_BYTES_MIN`]): the groups' state,
//! one snapshot record each, is written to `<log>.tmp`, fdatasynced and
//! renamed over the log, so its size stays proportional to the groups that
//! exist, however many commits, deletes and expiries went through it.

use std::cell::{Ref, RefCell, RefMut};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use es_storage::{FsyncBatcher, SyncTarget};
use futures::channel::oneshot;
use glommio::io::BufferedFile;
use glommio::sync::{Semaphore, StaticPermit};

use crate::error::ApiError;
use crate::groups::assignor::TopicPartition;
use crate::groups::count::GroupCount;
use crate::groups::group::Group;
use crate::groups::load::ShardGroups;
use crate::groups::log as group_log;
use crate::limits::GROUP_LOG_COMPACT_BYTES_MIN;
use crate::shard::placement::ShardId;

/// The groups log of shard `shard` of `shards`.
pub fn log_name(shard: ShardId, shards: usize) -> String {
    format!("shard-{shard}-of-{shards}.log")
}

/// What a record does to the groups in memory once it is durable.
enum Effect {
    /// Sets offsets; `reserved`: the group did not exist when the commit
    /// was checked, and a place in `--groups-max` was reserved for it.
    Commit {
        group: Rc<str>,
        at_ms: i64,
        offsets: Vec<(TopicPartition, u64)>,
        reserved: bool,
        owner: Option<Rc<str>>,
    },
    /// Forgets the group's offsets (and the group, without members).
    Delete { group: Rc<str> },
    /// Keeps only the offsets of partitions that still exist.
    Prune {
        group: Rc<str>,
        gone: Vec<TopicPartition>,
    },
    /// Nothing in memory: a record read back at start-up only.
    None,
}

struct Queued {
    effect: Effect,
    /// Answered once the record is durable and applied (or failed).
    done: Option<oneshot::Sender<Result<(), ApiError>>>,
}

struct Log {
    /// Opened by the first sync; taken out while a sync uses it.
    file: Option<BufferedFile>,
    /// Bytes in the file, all durable (read when it is opened).
    len: u64,
    /// Records appended and not yet written, and their effects in order.
    buf: Vec<u8>,
    queued: Vec<Queued>,
    /// The file's size past which the next sync compacts it.
    compact_at: u64,
    /// Set by a failed fdatasync: nothing more is written until restart
    /// (what the file holds past the last good sync is unknown).
    failed: Option<String>,
}

pub struct GroupStore {
    shard: ShardId,
    dir: PathBuf,
    path: PathBuf,
    groups: RefCell<HashMap<Rc<str>, Group>>,
    /// Per group with an operation on its offsets under way, the lock that
    /// serializes them; removed with the last one (see [`GroupLock`]).
    locks: RefCell<HashMap<Rc<str>, Rc<Semaphore>>>,
    log: RefCell<Log>,
    batcher: FsyncBatcher,
    count: Arc<GroupCount>,
    /// Cluster mode: since when (ms since the Unix epoch) this node has
    /// coordinated groups without a break, as the offsets cleanup saw it
    /// (`coordinator::clean_offsets`); `None` while it does not.
    pub coordinating_since_ms: std::cell::Cell<Option<i64>>,
}

impl GroupStore {
    /// The store of shard `shard` of `shards`, holding what start-up loaded
    /// for it and has just written to its log, exactly these groups.
    pub fn new(
        data_dir: &Path,
        shard: ShardId,
        shards: usize,
        start: ShardGroups,
        batcher: FsyncBatcher,
    ) -> GroupStore {
        let ShardGroups { loaded, count } = start;
        let dir = crate::groups::load::groups_dir(data_dir);
        let path = dir.join(log_name(shard, shards));
        let mut groups = HashMap::with_capacity(loaded.len());
        for l in loaded {
            let mut g = Group::new(&l.name);
            g.committed = l.committed;
            g.idle_since_ms = l.idle_since_ms;
            (g.owner, g.owner_durable) = (l.owner.as_deref().map(Rc::from), l.owner.is_some());
            groups.insert(g.name.clone(), g);
        }
        GroupStore {
            shard,
            dir,
            path,
            groups: RefCell::new(groups),
            locks: RefCell::new(HashMap::new()),
            log: RefCell::new(Log {
                file: None,
                len: 0,
                buf: Vec::new(),
                queued: Vec::new(),
                compact_at: 0,
                failed: None,
            }),
            batcher,
            count,
            coordinating_since_ms: std::cell::Cell::new(None),
        }
    }

    pub fn groups(&self) -> Ref<'_, HashMap<Rc<str>, Group>> {
        self.groups.borrow()
    }

    pub fn groups_mut(&self) -> RefMut<'_, HashMap<Rc<str>, Group>> {
        self.groups.borrow_mut()
    }

    pub fn count(&self) -> &GroupCount {
        &self.count
    }

    /// Gives back the map's spare room once most of its groups are gone.
    pub fn shrink(&self) {
        let mut groups = self.groups.borrow_mut();
        if groups.capacity() > 4 * groups.len().max(16) {
            groups.shrink_to_fit();
        }
    }

    /// The group `name` for a join: the existing one, or a new one if
    /// `--groups-max` has room.
    pub fn get_or_create(&self, name: &str) -> Result<RefMut<'_, Group>, ApiError> {
        let mut groups = self.groups.borrow_mut();
        if !groups.contains_key(name) {
            self.count.reserve(name)?;
            let g = Group::new(name);
            groups.insert(g.name.clone(), g);
        }
        Ok(RefMut::map(groups, |g| {
            g.get_mut(name).expect("just found or inserted")
        }))
    }

    /// Forgets `name` if it holds nothing (no member, no offset): a group
    /// that was only joined leaves nothing behind once its members are
    /// gone.
    pub fn forget_if_vacant(&self, name: &str) {
        let mut groups = self.groups.borrow_mut();
        if groups.get(name).is_some_and(Group::is_vacant) {
            groups.remove(name);
            self.count.release();
        }
    }

    /// Serializes the operations on `group`'s offsets (commit, delete,
    /// expiry): each checks the group, appends and waits for its fsync
    /// holding it, so that what it checked still holds when it is applied.
    pub async fn lock(self: &Rc<Self>, group: &str) -> GroupLock {
        let sem = {
            let mut locks = self.locks.borrow_mut();
            match locks.get(group) {
                Some(sem) => sem.clone(),
                None => {
                    let sem = Rc::new(Semaphore::new(1));
                    locks.insert(Rc::from(group), sem.clone());
                    sem
                }
            }
        };
        let mut lock = GroupLock {
            store: self.clone(),
            group: Rc::from(group),
            sem,
            permit: None,
        };
        // The semaphore is never closed: acquiring only waits.
        lock.permit = lock.sem.acquire_static_permit(1).await.ok();
        lock
    }

    /// Whether appending now would fail at once (a failed fsync).
    fn failed(&self) -> Option<ApiError> {
        self.log
            .borrow()
            .failed
            .as_ref()
            .map(|why| ApiError::unavailable(format!("consumer group offsets cannot be written: {why}")))
    }

    /// Appends a commit of `offsets` to `group`, made at `at_ms`; resolves
    /// once it is durable and applied.
    pub fn append_commit(
        self: &Rc<Self>,
        group: &str,
        at_ms: i64,
        members: bool,
        offsets: Vec<(TopicPartition, u64)>,
        (reserved, owner): (bool, Option<Rc<str>>),
    ) -> impl Future<Output = Result<(), ApiError>> {
        let group: Rc<str> = Rc::from(group);
        let rx = self.append(
            offsets,
            |offsets, buf| {
                group_log::encode_offsets(
                    buf,
                    false,
                    &group,
                    at_ms,
                    members,
                    offsets.iter().map(|((t, p), o)| (t.as_str(), *p, *o)),
                );
                group_log::encode_owner(buf, &group, at_ms, owner.as_deref());
            },
            |offsets| Effect::Commit {
                group: group.clone(),
                at_ms,
                offsets,
                reserved,
                owner: owner.clone(),
            },
        );
        wait(rx)
    }

    /// Appends the deletion of `group`; resolves once it is durable and
    /// applied.
    pub fn append_delete(
        self: &Rc<Self>,
        group: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<(), ApiError>> {
        let group: Rc<str> = Rc::from(group);
        let rx = self.append(
            (),
            |_, buf| group_log::encode_delete(buf, &group, at_ms),
            |_| Effect::Delete { group: group.clone() },
        );
        wait(rx)
    }

    /// Appends the state of `group` without the offsets of `gone`
    /// (partitions that no longer exist); resolves once it is durable and
    /// applied.
    pub fn append_prune(
        self: &Rc<Self>,
        group: &str,
        gone: Vec<TopicPartition>,
    ) -> impl Future<Output = Result<(), ApiError>> {
        let group: Rc<str> = Rc::from(group);
        let rx = {
            let groups = self.groups.borrow();
            match groups.get(&*group) {
                Some(g) => {
                    let kept = g
                        .committed
                        .iter()
                        .filter(|(t, p, _)| !gone.iter().any(|(gt, gp)| gt == t && gp == p));
                    let mut rec = Vec::new();
                    group_log::encode_offsets(
                        &mut rec,
                        true,
                        &group,
                        g.idle_since_ms,
                        !g.members.is_empty(),
                        kept,
                    );
                    group_log::encode_owner(&mut rec, &group, g.idle_since_ms, g.owner.as_deref());
                    drop(groups);
                    self.append(
                        gone,
                        |_, buf| buf.extend_from_slice(&rec),
                        |gone| Effect::Prune {
                            group: group.clone(),
                            gone,
                        },
                    )
                }
                None => {
                    let (tx, rx) = oneshot::channel();
                    let _ = tx.send(Ok(()));
                    rx
                }
            }
        };
        wait(rx)
    }

    /// Records that `group` (which has offsets) gained its first member or
    /// lost its last, at `at_ms`: what offset retention counts from after
    /// a restart. Not waited for: a join or a leave does not wait on the
    /// disk, and a record lost in a crash costs only retention time.
    pub fn append_members(self: &Rc<Self>, group: &str, at_ms: i64, members: bool) {
        if self.failed().is_some() {
            return;
        }
        // Nobody waits for it: its answer is dropped.
        drop(self.append(
            (),
            |_, buf| group_log::encode_members(buf, group, at_ms, members),
            |_| Effect::None,
        ));
    }

    /// Appends the record `encode` writes of `data`, whose effect, once it
    /// is durable, is `effect(data)`.
    fn append<T>(
        self: &Rc<Self>,
        data: T,
        encode: impl FnOnce(&T, &mut Vec<u8>),
        effect: impl FnOnce(T) -> Effect,
    ) -> oneshot::Receiver<Result<(), ApiError>> {
        let (tx, rx) = oneshot::channel();
        if let Some(e) = self.failed() {
            let _ = tx.send(Err(e));
            return rx;
        }
        {
            let mut log = self.log.borrow_mut();
            encode(&data, &mut log.buf);
            log.queued.push(Queued {
                effect: effect(data),
                done: Some(tx),
            });
        }
        self.batcher.mark_dirty(self.clone(), 1);
        rx
    }

    /// Applies a durable record's effect to the groups in memory.
    fn apply(&self, effect: Effect) {
        let mut groups = self.groups.borrow_mut();
        match effect {
            Effect::Commit {
                group,
                at_ms,
                offsets,
                reserved,
                owner,
            } => {
                let g = match groups.get_mut(&group) {
                    Some(g) => {
                        if reserved {
                            self.count.release();
                        }
                        g
                    }
                    None => {
                        if !reserved {
                            self.count.add();
                        }
                        let g = Group::new(&group);
                        groups.entry(g.name.clone()).or_insert(g)
                    }
                };
                for ((t, p), o) in offsets {
                    g.committed.set(&t, p, o);
                }
                g.idle_since_ms = g.idle_since_ms.max(at_ms);
                g.owner = owner.or(g.owner.take());
            }
            Effect::Delete { group } => {
                if let Some(g) = groups.get_mut(&group) {
                    g.committed.clear();
                    if g.members.is_empty() {
                        groups.remove(&group);
                        self.count.release();
                    }
                }
            }
            Effect::Prune { group, gone } => {
                if let Some(g) = groups.get_mut(&group) {
                    g.committed
                        .retain(|t, p| !gone.iter().any(|(gt, gp)| gt == t && *gp == p));
                    if g.is_vacant() {
                        groups.remove(&group);
                        self.count.release();
                    }
                }
            }
            Effect::None => {}
        }
    }

    /// Writes and fdatasyncs what was appended, then applies it and
    /// answers; compacts the log when it is due.
    async fn sync_once(self: Rc<Self>) {
        let (bytes, queued, file) = {
            let mut log = self.log.borrow_mut();
            if log.buf.is_empty() && log.queued.is_empty() {
                return;
            }
            let bytes = std::mem::take(&mut log.buf);
            let queued = std::mem::take(&mut log.queued);
            if let Some(why) = log.failed.clone() {
                drop(log);
                fail(
                    queued,
                    &ApiError::unavailable(format!("consumer group offsets cannot be written: {why}")),
                );
                return;
            }
            (bytes, queued, log.file.take())
        };
        let file = match file {
            Some(f) => f,
            None => match open_for_append(&self.path).await {
                Ok((f, len)) => {
                    let mut log = self.log.borrow_mut();
                    log.len = len;
                    log.compact_at = compact_at(len);
                    f
                }
                Err(e) => {
                    tracing::error!(shard = self.shard, log = %self.path.display(), error = %e, "opening the groups log failed; the commits waiting are refused");
                    fail(
                        queued,
                        &ApiError::unavailable(format!("opening {}: {e}", self.path.display())),
                    );
                    return;
                }
            },
        };
        let at = self.log.borrow().len;
        let n = bytes.len() as u64;
        let written = write_all(&file, bytes, at).await;
        let synced = match written {
            Ok(()) => file
                .fdatasync()
                .await
                .map_err(|e| std::io::Error::from(e).to_string()),
            Err(e) => {
                // Never acknowledged, so nothing is lost: cut the file back
                // to its durable end (a later append must not follow a
                // partial record) and go on, as a full disk may empty again.
                let cut = file.truncate(at).await;
                tracing::warn!(shard = self.shard, log = %self.path.display(), error = %e, cut_back = cut.is_ok(), "writing the groups log failed; the commits in this write are refused");
                if let Err(c) = cut {
                    self.log.borrow_mut().failed = Some(format!("cutting back a failed write: {c}"));
                }
                self.log.borrow_mut().file = Some(file);
                fail(
                    queued,
                    &ApiError::unavailable(format!(
                        "writing consumer group offsets failed (disk full?): {e}"
                    )),
                );
                return;
            }
        };
        if let Err(e) = synced {
            tracing::error!(shard = self.shard, log = %self.path.display(), error = %e, "fdatasync of the groups log failed; group commits are refused until restart");
            self.log.borrow_mut().failed = Some(format!("fdatasync failed: {e}"));
            self.log.borrow_mut().file = Some(file);
            fail(
                queued,
                &ApiError::unavailable(format!("fdatasync of consumer group offsets failed: {e}")),
            );
            return;
        }
        let due = {
            let mut log = self.log.borrow_mut();
            log.len = at + n;
            log.len > log.compact_at
        };
        for q in queued {
            self.apply(q.effect);
            if let Some(done) = q.done {
                let _ = done.send(Ok(()));
            }
        }
        let file = if due { self.compact(file).await } else { file };
        self.log.borrow_mut().file = Some(file);
    }

    /// Replaces the log with one snapshot record per group; returns the
    /// file to append to (the new one, or the old one if this failed).
    async fn compact(&self, old: BufferedFile) -> BufferedFile {
        let bytes = self.snapshot();
        let tmp = self.dir.join(format!("{}.tmp", log_name_of(&self.path)));
        let len = bytes.len() as u64;
        match write_snapshot(&tmp, &self.path, &self.dir, bytes).await {
            Ok(file) => {
                let _ = old.close().await;
                let mut log = self.log.borrow_mut();
                let before = log.len;
                log.len = len;
                log.compact_at = compact_at(len);
                tracing::debug!(shard = self.shard, before, after = len, "groups log compacted");
                metrics::counter!("es_group_log_compactions_total").increment(1);
                file
            }
            Err((e, renamed)) => {
                let mut log = self.log.borrow_mut();
                if renamed {
                    // The rename is done but not known durable: the old
                    // handle's file is gone, so is the way forward.
                    log.failed = Some(format!("compacting: {e}"));
                    tracing::error!(shard = self.shard, log = %self.path.display(), error = %e, "compacting the groups log failed after its rename; group commits are refused until restart");
                } else {
                    log.compact_at = log.len + GROUP_LOG_COMPACT_BYTES_MIN;
                    tracing::warn!(shard = self.shard, log = %self.path.display(), error = %e, "compacting the groups log failed; it goes on growing and is tried again later");
                }
                old
            }
        }
    }

    /// One snapshot record per group with offsets.
    fn snapshot(&self) -> Vec<u8> {
        let groups = self.groups.borrow();
        let mut out = Vec::new();
        let mut names: Vec<&Rc<str>> = groups
            .iter()
            .filter(|(_, g)| !g.committed.is_empty())
            .map(|(n, _)| n)
            .collect();
        names.sort();
        for name in names {
            let g = &groups[name];
            group_log::encode_offsets(
                &mut out,
                true,
                name,
                g.idle_since_ms,
                !g.members.is_empty(),
                g.committed.iter(),
            );
            group_log::encode_owner(&mut out, name, g.idle_since_ms, g.owner.as_deref());
        }
        out
    }
}

impl SyncTarget for GroupStore {
    fn sync(self: Rc<Self>) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(self.sync_once())
    }
}

/// The size past which a log of `len` bytes, just compacted, compacts again.
fn compact_at(len: u64) -> u64 {
    let min = compact_bytes_min();
    len.saturating_mul(2).max(len + min)
}

fn compact_bytes_min() -> u64 {
    // Debug builds only, for broker/tests/groups.rs: a small step, so that a
    // test sees the log compact after a few hundred records.
    #[cfg(debug_assertions)]
    if let Some(n) = std::env::var("ES_TEST_GROUP_LOG_COMPACT_BYTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        return n;
    }
    GROUP_LOG_COMPACT_BYTES_MIN
}

fn log_name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

async fn wait(rx: oneshot::Receiver<Result<(), ApiError>>) -> Result<(), ApiError> {
    rx.await.unwrap_or_else(|_| {
        Err(ApiError::unavailable(
            "the shard stopped before the write was durable",
        ))
    })
}

fn fail(queued: Vec<Queued>, e: &ApiError) {
    for q in queued {
        if let Some(done) = q.done {
            let _ = done.send(Err(e.clone()));
        }
    }
}

/// The log, open for writing, and its size: what start-up wrote.
async fn open_for_append(path: &Path) -> std::io::Result<(BufferedFile, u64)> {
    let file = glommio::io::OpenOptions::new()
        .write(true)
        .create(true)
        .buffered_open(path)
        .await
        .map_err(std::io::Error::from)?;
    let len = file.file_size().await.map_err(std::io::Error::from)?;
    Ok((file, len))
}

/// Writes `bytes` at `at`. A short write (a full disk) is an error: the
/// caller cuts the file back, and nothing of it was acknowledged.
async fn write_all(file: &BufferedFile, bytes: Vec<u8>, at: u64) -> std::io::Result<()> {
    let total = bytes.len();
    let n = file.write_at(bytes, at).await.map_err(std::io::Error::from)?;
    if n < total {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("short write: {n} of {total} bytes (disk full?)"),
        ));
    }
    Ok(())
}

/// Writes `bytes` to `tmp`, fdatasyncs it, renames it over `path` and
/// fsyncs `dir`; the open file, or the error and whether the rename was
/// done.
async fn write_snapshot(
    tmp: &Path,
    path: &Path,
    dir: &Path,
    bytes: Vec<u8>,
) -> Result<BufferedFile, (String, bool)> {
    let io = |e: glommio::GlommioError<()>| (std::io::Error::from(e).to_string(), false);
    let file = BufferedFile::create(tmp).await.map_err(io)?;
    let written = async {
        write_all(&file, bytes, 0)
            .await
            .map_err(|e| (e.to_string(), false))?;
        file.fdatasync().await.map_err(io)?;
        glommio::io::rename(tmp, path).await.map_err(io)?;
        es_storage::sync_dir(dir).await.map_err(|e| (e.to_string(), true))
    }
    .await;
    match written {
        Ok(()) => Ok(file),
        Err((e, renamed)) => {
            if !renamed {
                let _ = glommio::io::remove(tmp).await;
            }
            let _ = file.close().await;
            Err((e, renamed))
        }
    }
}

/// Held while an operation on one group's offsets runs; the last one out
/// removes the group's lock, so the table holds only groups in use.
pub struct GroupLock {
    store: Rc<GroupStore>,
    group: Rc<str>,
    sem: Rc<Semaphore>,
    permit: Option<StaticPermit>,
}

impl Drop for GroupLock {
    fn drop(&mut self) {
        drop(self.permit.take());
        // Ours and the table's: nobody else holds or waits for it.
        if Rc::strong_count(&self.sem) == 2 {
            self.store.locks.borrow_mut().remove(&self.group);
        }
    }
}
