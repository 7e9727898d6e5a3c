//! The shard's open descriptors of closed segments: a bounded cache, the
//! least recently read closed first.
//!
//! A partition's active segment keeps its files open (it is written and
//! tailed all the time); a closed segment is only read now and then, by a
//! consumer catching up or by a start-up scan, and there may be any number
//! of them. So a closed segment holds no descriptor of its own: a read
//! asks this cache for its log file, opened on first use and kept for the
//! next read until `open_segments_max` others were read since. A shard then
//! holds at most that many descriptors for closed segments, however many
//! segments its partitions have.
//!
//! Every handle holds a slot (a permit of the shard's semaphore), cached or
//! not, until its last clone drops: a handle evicted while a read still
//! uses it stays open until that read ends (eviction never closes a file
//! under a read), and keeps its slot till then, so the bound holds for
//! descriptors, not only for cache entries. A read that finds every slot
//! held by reads in progress waits for one of them to end.
//!
//! Per shard, so in a thread local: a shard is one thread, its partitions
//! never leave it. Entries are keyed by segment id (`Segment::id`), never
//! by path: compaction renames a new file over an old one's name.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Deref;
use std::path::Path;
use std::rc::Rc;

use glommio::io::BufferedFile;
use glommio::sync::{Semaphore, StaticPermit};

use crate::limits::OPEN_SEGMENTS_MAX_DEFAULT;
use crate::{Result, StorageError};

/// A closed segment's log file, open for reading, holding one of the
/// shard's slots while it lives.
pub(crate) struct SegmentFile {
    file: BufferedFile,
    _slot: StaticPermit,
}

impl Deref for SegmentFile {
    type Target = BufferedFile;

    fn deref(&self) -> &BufferedFile {
        &self.file
    }
}

/// A segment's log file as a read holds it: the active segment's own
/// handle, or a closed segment's from the cache.
#[derive(Clone)]
pub(crate) enum Held {
    Active(Rc<BufferedFile>),
    Closed(Rc<SegmentFile>),
}

impl Deref for Held {
    type Target = BufferedFile;

    fn deref(&self) -> &BufferedFile {
        match self {
            Held::Active(f) => f,
            Held::Closed(f) => f,
        }
    }
}

impl Held {
    /// Clones of this handle held elsewhere (reads in progress).
    pub fn others(&self) -> usize {
        match self {
            Held::Active(f) => Rc::strong_count(f) - 1,
            Held::Closed(f) => Rc::strong_count(f) - 1,
        }
    }

    /// Closes the file if this is the last handle; otherwise the last
    /// clone's drop closes it.
    pub async fn close(self) {
        let file = match self {
            Held::Active(f) => Rc::try_unwrap(f).ok(),
            Held::Closed(f) => Rc::try_unwrap(f).ok().map(|s| s.file),
        };
        if let Some(file) = file {
            let _ = file.close().await;
        }
    }
}

struct Cache {
    slots: Rc<Semaphore>,
    max: usize,
    /// Bumped on every use: the order of `lru`.
    clock: u64,
    by_id: HashMap<u64, (Rc<SegmentFile>, u64)>,
    /// Last use -> segment id, oldest first.
    lru: BTreeMap<u64, u64>,
}

impl Cache {
    fn new(max: usize) -> Cache {
        Cache {
            slots: Rc::new(Semaphore::new(max as u64)),
            max,
            clock: 0,
            by_id: HashMap::new(),
            lru: BTreeMap::new(),
        }
    }

    fn get(&mut self, id: u64) -> Option<Rc<SegmentFile>> {
        self.clock += 1;
        let clock = self.clock;
        let (file, used) = self.by_id.get_mut(&id)?;
        self.lru.remove(used);
        *used = clock;
        self.lru.insert(clock, id);
        Some(file.clone())
    }

    fn insert(&mut self, id: u64, file: Rc<SegmentFile>) {
        self.clock += 1;
        if let Some((_, used)) = self.by_id.insert(id, (file, self.clock)) {
            self.lru.remove(&used);
        }
        self.lru.insert(self.clock, id);
    }

    fn remove(&mut self, id: u64) -> Option<Rc<SegmentFile>> {
        let (file, used) = self.by_id.remove(&id)?;
        self.lru.remove(&used);
        Some(file)
    }

    /// The least recently used entry no read holds, taken out.
    fn take_idle(&mut self) -> Option<Rc<SegmentFile>> {
        let id = self
            .lru
            .values()
            .copied()
            .find(|id| self.by_id.get(id).is_some_and(|(f, _)| Rc::strong_count(f) == 1))?;
        self.remove(id)
    }

    /// The least recently used entry, taken out even though reads hold it.
    fn take_oldest(&mut self) -> Option<Rc<SegmentFile>> {
        let id = *self.lru.values().next()?;
        self.remove(id)
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::new(OPEN_SEGMENTS_MAX_DEFAULT));
}

/// Sets this shard's (this thread's) bound on descriptors of closed
/// segments; call on the shard at start, before it opens any partition.
pub fn set_open_segments_max(max: usize) {
    let max = max.max(1);
    CACHE.with(|c| *c.borrow_mut() = Cache::new(max));
}

/// Descriptors this shard holds for closed segments now (cached, or
/// evicted and still read).
pub fn open_segment_files() -> usize {
    CACHE.with(|c| {
        let c = c.borrow();
        c.max - c.slots.available() as usize
    })
}

/// Closes `file` (the last handle, or nothing).
async fn close(file: Rc<SegmentFile>) {
    Held::Closed(file).close().await
}

/// A slot for a new handle, without waiting: a free one, or one an idle
/// cached file gives back (closed first). `None` when every slot is held
/// by a read in progress.
async fn free_slot() -> Option<StaticPermit> {
    loop {
        let (slot, idle) = CACHE.with(|c| {
            let mut c = c.borrow_mut();
            match c.slots.try_acquire_static_permit(1) {
                Ok(slot) => (Some(slot), None),
                Err(_) => (None, c.take_idle()),
            }
        });
        match (slot, idle) {
            (Some(slot), _) => return Some(slot),
            (None, Some(idle)) => close(idle).await,
            (None, None) => return None,
        }
    }
}

/// The open log file of closed segment `id` at `path`: the cached one, or
/// opened now (evicting the least recently used if the shard is at its
/// bound). Fails only if the file cannot be opened; out of descriptors
/// (`EMFILE`), that is counted in `es_descriptors_exhausted_total{op="read"}`.
pub(crate) async fn open(id: u64, path: &Path) -> Result<Rc<SegmentFile>> {
    if let Some(f) = CACHE.with(|c| c.borrow_mut().get(id)) {
        return Ok(f);
    }
    let slot = match free_slot().await {
        Some(slot) => slot,
        None => {
            // Every slot is held by a read in progress: the oldest entry
            // leaves the cache, its slot comes back once its reads end.
            let (oldest, slots) = CACHE.with(|c| {
                let mut c = c.borrow_mut();
                (c.take_oldest(), c.slots.clone())
            });
            drop(oldest);
            slots
                .acquire_static_permit(1)
                .await
                .map_err(|_| StorageError::Invalid("the segment file cache closed".into()))?
        }
    };
    // Out of descriptors, another cached file gives its own back and the
    // open is tried again at once: a descriptor freed for this read may be
    // taken by a thread racing for it (another shard's accept), and the
    // read fails only once no idle file is left to close.
    let file = loop {
        match BufferedFile::open(path).await {
            Ok(file) => break file,
            Err(e) => {
                let e = crate::log::write_failure::os_error(e);
                if crate::log::write_failure::out_of_descriptors(&e) {
                    if let Some(idle) = CACHE.with(|c| c.borrow_mut().take_idle()) {
                        close(idle).await;
                        continue;
                    }
                    metrics::counter!("es_descriptors_exhausted_total", "op" => "read").increment(1);
                }
                return Err(StorageError::io(path, e));
            }
        }
    };
    let opened = Rc::new(SegmentFile { file, _slot: slot });
    // Another read may have opened it meanwhile: one handle is kept.
    let kept = CACHE.with(|c| {
        let mut c = c.borrow_mut();
        match c.get(id) {
            Some(first) => (first, Some(opened)),
            None => {
                c.insert(id, opened.clone());
                (opened, None)
            }
        }
    });
    if let Some(extra) = kept.1 {
        close(extra).await;
    }
    Ok(kept.0)
}

/// Takes the file of segment `id`, just closed (sealed by a roll, written
/// by compaction), into the cache if a slot is free without waiting; else
/// closes it (the next read opens it again).
pub(crate) async fn adopt(id: u64, file: BufferedFile) {
    match free_slot().await {
        Some(slot) => {
            let f = Rc::new(SegmentFile { file, _slot: slot });
            CACHE.with(|c| c.borrow_mut().insert(id, f));
        }
        None => {
            let _ = file.close().await;
        }
    }
}

/// Takes segment `id`'s cached file out (the segment left the log: the
/// caller frees the file once reads of it end).
pub(crate) fn take(id: u64) -> Option<Rc<SegmentFile>> {
    CACHE.with(|c| c.borrow_mut().remove(id))
}

/// Drops segment `id`'s cached file, if any (its partition closed, or a
/// read found the segment gone). Safe from a destructor, and while the
/// thread ends.
pub(crate) fn forget(id: u64) {
    let _ = CACHE.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.remove(id);
        }
    });
}

/// Moves segment `old`'s cached file to `new`: the same file under a new
/// segment value (its index was rebuilt).
pub(crate) fn rekey(old: u64, new: u64) {
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(f) = c.remove(old) {
            c.insert(new, f);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(test: impl std::future::Future<Output = ()> + 'static) {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(256 << 10)
            .make()
            .unwrap()
            .run(test);
    }

    fn files(n: usize) -> (tempfile::TempDir, Vec<std::path::PathBuf>) {
        let dir = tempfile::tempdir().unwrap();
        let paths = (0..n)
            .map(|i| {
                let p = dir.path().join(format!("{i}.log"));
                std::fs::write(&p, format!("segment {i}")).unwrap(); // blocking-ok: test setup
                p
            })
            .collect();
        (dir, paths)
    }

    /// Descriptors this process holds on files under `dir` (other tests of
    /// this binary open and close their own at the same time).
    fn open_fds(dir: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd") // blocking-ok: a test
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count()
    }

    /// Reading more closed segments than the bound keeps the bound: the
    /// least recently read is closed, the rest are served from the cache.
    #[test]
    fn more_segments_than_slots_keep_the_bound() {
        let (tmp, paths) = files(20);
        let dir = tmp.path().to_path_buf();
        run(async move {
            set_open_segments_max(4);
            for round in 0..3 {
                for (i, p) in paths.iter().enumerate() {
                    let f = open(i as u64, p).await.unwrap();
                    assert_eq!(
                        f.read_at(0, 64).await.unwrap().as_ref(),
                        format!("segment {i}").as_bytes()
                    );
                    assert!(open_segment_files() <= 4, "round {round}, file {i}");
                }
            }
            assert_eq!(open_segment_files(), 4);
            // The four most recently read are cached: no new descriptor.
            let before = open_fds(&dir);
            assert_eq!(before, 4);
            for (i, p) in paths.iter().enumerate().skip(16) {
                let _ = open(i as u64, p).await.unwrap();
            }
            assert_eq!(open_fds(&dir), before);
            for i in 0..20 {
                forget(i);
            }
            assert_eq!(open_segment_files(), 0);
        });
    }

    /// A file evicted while a read holds it stays open for that read, and
    /// keeps its slot until the read drops it; a read that finds every
    /// slot held waits for one.
    #[test]
    fn eviction_never_closes_a_file_under_a_read() {
        let (_dir, paths) = files(3);
        run(async move {
            set_open_segments_max(2);
            let a = open(0, &paths[0]).await.unwrap();
            let b = open(1, &paths[1]).await.unwrap();
            // Both slots held by reads: the third waits.
            let p = paths[2].clone();
            let third = glommio::spawn_local(async move { open(2, &p).await.unwrap() });
            glommio::executor().yield_task_queue_now().await;
            assert_eq!(open_segment_files(), 2);
            // `a` was evicted under its read: still readable.
            assert_eq!(a.read_at(0, 64).await.unwrap().as_ref(), b"segment 0");
            drop(a);
            let c = third.await;
            assert_eq!(c.read_at(0, 64).await.unwrap().as_ref(), b"segment 2");
            assert_eq!(b.read_at(0, 64).await.unwrap().as_ref(), b"segment 1");
            assert!(open_segment_files() <= 2);
            drop((b, c));
            for i in 0..3 {
                forget(i);
            }
        });
    }

    /// A segment sealed by a roll hands its file in; one taken out leaves
    /// the cache for its caller to free.
    #[test]
    fn adopted_and_taken_files() {
        let (_dir, paths) = files(2);
        run(async move {
            set_open_segments_max(1);
            adopt(7, BufferedFile::open(&paths[0]).await.unwrap()).await;
            assert_eq!(open_segment_files(), 1);
            let held = open(7, &paths[0]).await.unwrap();
            // No idle slot: the next adoption closes its file instead.
            adopt(8, BufferedFile::open(&paths[1]).await.unwrap()).await;
            assert!(take(8).is_none());
            let taken = take(7).expect("cached");
            assert!(Rc::ptr_eq(&taken, &held));
            drop(held);
            close(taken).await;
            assert_eq!(open_segment_files(), 0);
            rekey(7, 9);
            assert!(take(9).is_none());
        });
    }
}
