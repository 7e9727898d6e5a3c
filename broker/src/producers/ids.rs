//! Producer id allocation, on the controller shard: a new producer gets the
//! next id at epoch 0; a producer that re-initializes with its id gets the
//! next epoch, which fences its older instances on every partition.
//!
//! `<data-dir>/producers/registry.json` (atomic) holds what must survive a
//! crash, and nothing per id that need not:
//! - `next_id`, a high-water mark: no id at or above it was ever issued.
//!   It is reserved [`ID_BLOCK_IDS`] ids at a time and fsynced before the first
//!   id of a block is answered, so issuing an id writes nothing until its
//!   block runs out. A clean stop writes the exact next id (`"exact":
//!   true`). After a crash the next start cannot tell the ids issued from
//!   the rest of the block: it goes on past the block (never reissuing an
//!   id), and ids below the mark that no partition knows (issued and never
//!   used, or never issued) are taken as expired: refused, so the producer
//!   asks for a new id;
//! - the epochs given by re-initializing an id (an epoch is never handed
//!   out twice, and an older instance stays fenced after a restart), each
//!   with its time, until the id expires; epoch 0 is every id's first and
//!   is not written;
//! - `expired_below` and `retired_below`, the floors the shards refuse ids
//!   under (producers/known.rs), moved by the expiry sweep
//!   (producers/expiry.rs) and by a lost registry.
//!
//! Expiry of ids that never wrote needs no state per id: ids are issued in
//! order, so the registry keeps a few marks "ids below N were issued by
//! time T" (at most [`ISSUE_MARKS_MAX`] over one expiry), and every id
//! below the last mark older than the expiry was issued longer ago.
//!
//! An id is never issued again, even when the registry is lost: the next
//! id is at least one past the largest producer id that any partition's
//! producer state knows (its snapshot and the batch headers after it,
//! read when the partition opened), so the registry is first read once
//! every partition has opened. A registry that is missing while partitions
//! know producer ids, or that is damaged, was lost: it is rebuilt (a
//! damaged one is kept aside as `registry.json.damaged-<ms>`, said at
//! error level), its ids continue [`LOST_REGISTRY_GAP_IDS`] past the
//! largest id the partitions know, and every earlier id is retired: a
//! producer holding one is refused (`unknown_producer_id`) and asks for a
//! new one. Rebuilding the epochs from the partitions could hand out an
//! epoch a live instance already holds, whose batches would then be taken
//! for retries.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorCode};
use crate::limits::{ID_BLOCK_IDS, ISSUE_MARKS_MAX, LOST_REGISTRY_GAP_IDS, REGISTRY_READY_POLL_MS};
use crate::producers::known::Floors;
use crate::shard::Shard;

/// Most epochs a producer id can go through (epochs are i16 on disk).
const EPOCH_MAX: i16 = i16::MAX;
/// `not_owner`: `id` belongs to another key than `caller`'s.
pub fn not_owner(id: i64, caller: &crate::auth::Principal) -> ApiError {
    ApiError::new(
        ErrorCode::NotOwner,
        format!(
            "producer id {id} belongs to another key than {}: use that key, or ask for a new id",
            caller.id().unwrap_or("-")
        ),
    )
}

/// The registry's file, in `<data-dir>/producers/`.
const FILE: &str = "registry.json";

/// The largest producer id any partition's producer state held when it
/// opened, in this process (-1: none). Monotone: a deleted topic's ids
/// stay counted.
static LARGEST_PARTITION_PRODUCER_ID: AtomicI64 = AtomicI64::new(-1);

/// Called by each partition as it opens, with the largest producer id its
/// producer state knows.
pub fn note_partition_producer_id(id: i64) {
    LARGEST_PARTITION_PRODUCER_ID.fetch_max(id, Ordering::AcqRel);
}

/// An epoch given by re-initializing an id: `[epoch, at_ms]`; a registry
/// written before expiry existed has the epoch alone.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum EpochEntry {
    Timed(i16, i64),
    Untimed(i16),
}

/// `registry.json`.
#[derive(Default, Serialize, Deserialize)]
struct RegistryFile {
    /// No id at or above this was ever issued.
    next_id: i64,
    /// Whether every id below `next_id` was issued (written at a clean
    /// stop; a registry of the earlier format, written per id, was).
    #[serde(default = "exact_by_default")]
    exact: bool,
    #[serde(default)]
    retired_below: i64,
    #[serde(default)]
    expired_below: i64,
    /// Ids with an epoch past 0.
    #[serde(default)]
    epochs: BTreeMap<i64, EpochEntry>,
    /// The key id that owns each producer id issued with `--auth required`
    /// (docs/security.md); absent from registries written before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    owners: BTreeMap<i64, String>,
}

fn exact_by_default() -> bool {
    true
}

impl RegistryFile {
    /// The expired floor this file gives: after a crash, every id below
    /// the mark that no partition knows.
    fn expired_below(&self) -> i64 {
        if self.exact {
            self.expired_below
        } else {
            self.expired_below.max(self.next_id)
        }
    }

    /// The epochs past 0, timed (`now_ms` for an untimed one).
    fn epochs(&self, now_ms: i64) -> BTreeMap<i64, (i16, i64)> {
        self.epochs
            .iter()
            .filter_map(|(id, e)| match *e {
                EpochEntry::Timed(epoch, at) if epoch > 0 => Some((*id, (epoch, at.min(now_ms)))),
                EpochEntry::Untimed(epoch) if epoch > 0 => Some((*id, (epoch, now_ms))),
                _ => None,
            })
            .collect()
    }
}

/// What the shards learn of the registry before they run.
#[derive(Clone, Debug, Default)]
pub struct StartView {
    pub floors: Floors,
    /// (id, epoch, at_ms) of each id with an epoch past 0.
    pub epochs: Vec<(i64, i16, i64)>,
    /// The owner of each owned id.
    pub owners: std::collections::HashMap<i64, std::sync::Arc<str>>,
}

impl StartView {
    /// A shard's view of producer ids before its partitions open.
    pub fn known(&self) -> crate::producers::known::KnownProducers {
        let mut k = crate::producers::known::KnownProducers::new(self.floors);
        for &(id, epoch, at_ms) in &self.epochs {
            k.note(id, epoch, at_ms);
        }
        k
    }
}

/// Reads the registry at start-up, before any shard runs. A damaged
/// registry is said at error level and read as empty (every id refused
/// until the controller rebuilds it, see the module comment).
pub fn load_start_view(data_dir: &Path) -> Result<StartView, String> {
    let path = data_dir.join("producers").join(FILE);
    let read = std::fs::read(&path); // blocking-ok: start-up, before the shards run
    match read {
        Ok(bytes) => match serde_json::from_slice::<RegistryFile>(&bytes) {
            Ok(r) => Ok(StartView {
                floors: Floors {
                    issued_below: r.next_id,
                    retired_below: r.retired_below,
                    expired_below: r.expired_below(),
                },
                epochs: r
                    .epochs(crate::operate::clock::now_ms())
                    .into_iter()
                    .map(|(id, (epoch, at))| (id, epoch, at))
                    .collect(),
                owners: r
                    .owners
                    .iter()
                    .map(|(id, o)| (*id, std::sync::Arc::from(o.as_str())))
                    .collect(),
            }),
            Err(e) => {
                tracing::error!(
                    path = %path.display(),
                    error = %e,
                    "producer id registry is damaged: producers holding earlier ids are refused \
                     (unknown_producer_id) and must ask for a new id; new ids continue past every \
                     id the partitions know, and the damaged file is kept aside once the broker is ready"
                );
                Ok(StartView::default())
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StartView::default()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The registry, on the controller shard.
#[derive(Debug, Default)]
pub struct Registry {
    /// The next id to issue.
    next_id: i64,
    /// The durable high-water mark (`next_id` of the file).
    reserved_below: i64,
    retired_below: i64,
    expired_below: i64,
    /// Ids with an epoch past 0: (epoch, when it was issued).
    epochs: BTreeMap<i64, (i16, i64)>,
    /// (ms, n): every id below n was issued by ms. Oldest first.
    issue_marks: VecDeque<(i64, i64)>,
    /// The largest n of the marks used up by `expired_floor`.
    marked_below: i64,
    /// The key that owns each owned id.
    owners: BTreeMap<i64, std::sync::Arc<str>>,
}

impl Registry {
    /// The registry, on the controller shard, once every shard has opened
    /// its partitions (their producer state bounds the next id); rebuilt
    /// (and made durable) when it was lost, damaged or behind.
    pub async fn load(shard: &Shard) -> Result<Registry, ApiError> {
        while !shard.state.is_ready(shard.shards) {
            if shard.is_shutting_down() || shard.state.is_shutting_down() {
                return Err(ApiError::unavailable("broker is shutting down"));
            }
            glommio::timer::sleep(Duration::from_millis(REGISTRY_READY_POLL_MS)).await;
        }
        let largest = LARGEST_PARTITION_PRODUCER_ID.load(Ordering::Acquire);
        Registry::load_known(shard.data_dir(), largest, crate::operate::clock::now_ms()).await
    }

    /// The registry at `data_dir`, given the largest producer id the
    /// partitions know (-1: none), at `now_ms`.
    async fn load_known(data_dir: &Path, largest: i64, now_ms: i64) -> Result<Registry, ApiError> {
        let dir = data_dir.join("producers");
        let path = dir.join(FILE);
        let Some(bytes) = crate::topics::fsops::read_small(&path).await? else {
            if largest < 0 {
                // A new data directory, or one where no producer wrote.
                return Ok(Registry::default());
            }
            let mut rebuilt = Registry::rebuilt(largest, now_ms);
            tracing::error!(
                path = %path.display(),
                largest_known_id = largest,
                next_id = rebuilt.next_id,
                "producer id registry is missing while partitions hold batches of producer ids: \
                 rebuilt; producers holding earlier ids must ask for a new one"
            );
            rebuilt.persist(data_dir, rebuilt.next_id).await?;
            rebuilt.reserved_below = rebuilt.next_id;
            return Ok(rebuilt);
        };
        match serde_json::from_slice::<RegistryFile>(&bytes) {
            Ok(file) => {
                let mut r = Registry {
                    next_id: file.next_id,
                    reserved_below: file.next_id,
                    retired_below: file.retired_below,
                    expired_below: file.expired_below(),
                    epochs: file.epochs(now_ms),
                    issue_marks: VecDeque::new(),
                    marked_below: 0,
                    owners: file
                        .owners
                        .iter()
                        .map(|(id, o)| (*id, std::sync::Arc::from(o.as_str())))
                        .collect(),
                };
                if r.next_id <= largest {
                    tracing::warn!(
                        path = %path.display(),
                        next_id = r.next_id,
                        largest_known_id = largest,
                        "producer id registry is behind the partitions (restored from an old copy?); \
                         ids continue past the largest one they know"
                    );
                    r.next_id = largest + 1;
                    r.persist(data_dir, r.next_id).await?;
                    r.reserved_below = r.next_id;
                }
                // Every id below the mark was issued by now, at the latest.
                r.issue_marks.push_back((now_ms, r.next_id));
                Ok(r)
            }
            Err(e) => {
                let ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let aside = dir.join(format!("{FILE}.damaged-{ms}"));
                glommio::io::rename(&path, &aside)
                    .await
                    .map_err(|e| ApiError::internal(format!("moving {} aside: {e}", path.display())))?;
                es_storage::sync_dir(&dir).await.map_err(ApiError::storage)?;
                let mut rebuilt = Registry::rebuilt(largest, now_ms);
                tracing::error!(
                    path = %path.display(),
                    kept_as = %aside.display(),
                    error = %e,
                    largest_known_id = largest,
                    next_id = rebuilt.next_id,
                    "producer id registry is damaged: kept aside and rebuilt; producers holding \
                     earlier ids must ask for a new one"
                );
                rebuilt.persist(data_dir, rebuilt.next_id).await?;
                rebuilt.reserved_below = rebuilt.next_id;
                Ok(rebuilt)
            }
        }
    }

    /// A registry that was lost: no epochs, ids past every id that may
    /// have been issued, and every earlier id retired.
    fn rebuilt(largest: i64, now_ms: i64) -> Registry {
        let next_id = largest
            .max(-1)
            .saturating_add(1)
            .saturating_add(LOST_REGISTRY_GAP_IDS);
        Registry {
            next_id,
            reserved_below: 0,
            retired_below: next_id,
            expired_below: next_id,
            epochs: BTreeMap::new(),
            issue_marks: VecDeque::from([(now_ms, next_id)]),
            marked_below: 0,
            owners: BTreeMap::new(),
        }
    }

    /// Writes the registry with `reserved_below` as its high-water mark;
    /// durable before it returns.
    async fn persist(&self, data_dir: &Path, reserved_below: i64) -> Result<(), ApiError> {
        assert!(reserved_below >= self.next_id, "the mark covers every id issued");
        let file = RegistryFile {
            next_id: reserved_below,
            // Every id below the mark issued (or, after a crash, expired).
            exact: reserved_below == self.next_id,
            retired_below: self.retired_below,
            expired_below: self.expired_below,
            epochs: self
                .epochs
                .iter()
                .map(|(id, (epoch, at))| (*id, EpochEntry::Timed(*epoch, *at)))
                .collect(),
            owners: self.owners.iter().map(|(id, o)| (*id, o.to_string())).collect(),
        };
        let bytes = serde_json::to_vec(&file).expect("registry serializes");
        crate::topics::fsops::write_atomic(&data_dir.join("producers"), FILE, bytes).await
    }

    /// The floors every shard refuses ids under.
    pub fn floors(&self) -> Floors {
        Floors {
            issued_below: self.next_id,
            retired_below: self.retired_below,
            expired_below: self.expired_below,
        }
    }

    /// A new id at epoch 0; durable before it returns (a new block is
    /// reserved when the last one is used up).
    pub async fn issue(&mut self, data_dir: &Path) -> Result<i64, ApiError> {
        let id = self.next_id;
        if id >= self.reserved_below {
            let reserved = id.saturating_add(ID_BLOCK_IDS);
            self.persist(data_dir, reserved).await?;
            self.reserved_below = reserved;
        }
        self.next_id = id + 1;
        Ok(id)
    }

    /// A new id at epoch 0 owned by `owner` (if any); durable, owner
    /// included, before it returns.
    pub async fn issue_owned(
        &mut self,
        data_dir: &Path,
        owner: Option<std::sync::Arc<str>>,
    ) -> Result<i64, ApiError> {
        let id = self.issue(data_dir).await?;
        if let Some(owner) = owner {
            self.owners.insert(id, owner);
            if let Err(e) = self
                .persist(data_dir, self.reserved_below.max(self.next_id))
                .await
            {
                self.owners.remove(&id);
                return Err(e);
            }
        }
        Ok(id)
    }

    /// The key that owns `id`, if any.
    pub fn owner(&self, id: i64) -> Option<std::sync::Arc<str>> {
        self.owners.get(&id).cloned()
    }

    /// Whether `caller` may re-initialize `id`: its owner, an admin, or
    /// anyone for an id without owner.
    pub fn may_use(&self, id: i64, caller: &crate::auth::Principal) -> bool {
        caller.is_admin() || self.owners.get(&id).is_none_or(|o| Some(&**o) == caller.id())
    }

    /// The next epoch of `id` at `now_ms`, given the newest epoch any shard
    /// knows for it (`None`: no shard has state for it); durable before it
    /// returns. An id without owner is claimed by `claim`.
    pub async fn next_epoch(
        &mut self,
        data_dir: &Path,
        id: i64,
        shards_know: Option<i16>,
        now_ms: i64,
        claim: Option<std::sync::Arc<str>>,
    ) -> Result<i16, ApiError> {
        let current = self.epoch_of(id, shards_know)?;
        if current == EPOCH_MAX {
            return Err(ApiError::invalid(format!(
                "producer {id} used every epoch; ask for a new id"
            )));
        }
        let epoch = current + 1;
        let claimed = match claim {
            Some(c) if !self.owners.contains_key(&id) => {
                self.owners.insert(id, c);
                true
            }
            _ => false,
        };
        let before = self.epochs.insert(id, (epoch, now_ms));
        if let Err(e) = self
            .persist(data_dir, self.reserved_below.max(self.next_id))
            .await
        {
            match before {
                Some(b) => self.epochs.insert(id, b),
                None => self.epochs.remove(&id),
            };
            if claimed {
                self.owners.remove(&id);
            }
            return Err(e);
        }
        Ok(epoch)
    }

    /// The current epoch of `id`, or why it has none.
    fn epoch_of(&self, id: i64, shards_know: Option<i16>) -> Result<i16, ApiError> {
        let unknown = |why: String| ApiError::new(ErrorCode::UnknownProducerId, why);
        if id >= self.next_id {
            return Err(unknown(format!(
                "producer id {id} was never issued by this broker"
            )));
        }
        if id < self.retired_below {
            return Err(unknown(format!(
                "producer id {id} was issued before the producer id registry was lost: ask for a new id"
            )));
        }
        let mine = self.epochs.get(&id).map(|(e, _)| *e);
        match mine.max(shards_know) {
            Some(epoch) => Ok(epoch),
            None if id < self.expired_below => Err(unknown(format!(
                "producer id {id} expired: it wrote nothing for longer than --producer-id-expiry-ms \
                 (or it was handed out just before the broker crashed, and not used); ask for a new id"
            ))),
            None => Ok(0),
        }
    }

    /// Whether `id` has an epoch past 0 here.
    pub fn has_epoch(&self, id: i64) -> bool {
        self.epochs.contains_key(&id)
    }

    /// Notes at `now_ms` that every id below the next one is issued, at
    /// most [`ISSUE_MARKS_MAX`] marks per `expiry_ms`.
    pub fn mark_issued(&mut self, now_ms: i64, expiry_ms: u64) {
        let step = (expiry_ms as i64 / ISSUE_MARKS_MAX).max(1);
        let due = match self.issue_marks.back() {
            None => true,
            Some(&(ms, n)) => n < self.next_id && now_ms.saturating_sub(ms) >= step,
        };
        if due {
            self.issue_marks.push_back((now_ms, self.next_id));
        }
    }

    /// The expired floor at `cutoff_ms`: every id below it was issued
    /// before the cut-off (marks older than it are used up).
    pub fn expired_floor(&mut self, cutoff_ms: i64) -> i64 {
        while let Some(&(ms, n)) = self.issue_marks.front() {
            if ms >= cutoff_ms {
                break;
            }
            self.marked_below = self.marked_below.max(n);
            self.issue_marks.pop_front();
        }
        self.expired_below.max(self.marked_below).min(self.next_id)
    }

    /// Forgets the epochs of the expired `ids` and moves the expired floor
    /// to `floor`; durable before it returns when anything changed.
    pub async fn expire(&mut self, data_dir: &Path, ids: &[i64], floor: i64) -> Result<(), ApiError> {
        let mut changed = floor > self.expired_below;
        for id in ids {
            changed |= self.epochs.remove(id).is_some();
            changed |= self.owners.remove(id).is_some();
        }
        self.expired_below = self.expired_below.max(floor);
        if changed {
            self.persist(data_dir, self.reserved_below.max(self.next_id))
                .await?;
        }
        Ok(())
    }

    /// At a clean stop: the exact next id becomes the high-water mark, so
    /// the next start goes on one by one.
    pub async fn close(&mut self, data_dir: &Path) -> Result<(), ApiError> {
        self.persist(data_dir, self.next_id).await?;
        self.reserved_below = self.next_id;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join("producers").join(FILE)).expect("registry")) // blocking-ok: a test
            .expect("json")
    }

    #[test]
    fn ids_are_reserved_a_block_at_a_time_and_never_reissued() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        crate::test_executor::run(async move {
            let mut r = Registry::load_known(&dir, -1, 0).await.unwrap();
            for want in 0..(ID_BLOCK_IDS + 5) {
                assert_eq!(r.issue(&dir).await.unwrap(), want);
                // Written when a block starts, never in between.
                let mark = file(&dir)["next_id"].as_i64().unwrap();
                assert_eq!(mark, (want / ID_BLOCK_IDS + 1) * ID_BLOCK_IDS, "after id {want}");
            }
            assert_eq!(file(&dir)["exact"], false, "ids of the block are not all issued");
            // A crash: the next start goes on past the whole block, and ids
            // below it that no partition knows are refused (expired).
            let mut after_crash = Registry::load_known(&dir, 3, 0).await.unwrap();
            assert_eq!(after_crash.floors().expired_below, 2 * ID_BLOCK_IDS);
            assert_eq!(
                after_crash.epoch_of(3, Some(0)).unwrap(),
                0,
                "a partition knows it"
            );
            assert_eq!(
                after_crash.epoch_of(4, None).unwrap_err().code,
                "unknown_producer_id"
            );
            assert_eq!(after_crash.issue(&dir).await.unwrap(), 2 * ID_BLOCK_IDS);
            // A clean stop writes the exact next id.
            after_crash.close(&dir).await.unwrap();
            assert_eq!(file(&dir)["exact"], true);
            let mut after_stop = Registry::load_known(&dir, 3, 0).await.unwrap();
            assert_eq!(after_stop.floors().expired_below, 2 * ID_BLOCK_IDS, "kept");
            assert_eq!(
                after_stop.epoch_of(2 * ID_BLOCK_IDS, None).unwrap(),
                0,
                "issued before the stop"
            );
            assert_eq!(after_stop.issue(&dir).await.unwrap(), 2 * ID_BLOCK_IDS + 1);
        });
    }

    #[test]
    fn a_registry_of_the_earlier_format_is_read() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        std::fs::create_dir_all(dir.join("producers")).unwrap(); // blocking-ok: test setup
        std::fs::write(
            // blocking-ok: a test
            dir.join("producers").join(FILE),
            br#"{"next_id": 3, "epochs": {"0": 2, "1": 0, "2": 0}}"#,
        )
        .unwrap();
        let view = load_start_view(&dir).unwrap();
        assert_eq!(view.floors.issued_below, 3);
        assert_eq!(view.epochs, vec![(0, 2, view.epochs[0].2)], "epoch 0 is not kept");
        crate::test_executor::run(async move {
            let mut r = Registry::load_known(&dir, 2, 50).await.unwrap();
            assert_eq!(r.next_epoch(&dir, 0, None, 60, None).await.unwrap(), 3);
            assert_eq!(r.next_epoch(&dir, 1, None, 60, None).await.unwrap(), 1);
            assert_eq!(r.issue(&dir).await.unwrap(), 3);
            let err = r.next_epoch(&dir, 99, None, 60, None).await.unwrap_err();
            assert_eq!(err.code, "unknown_producer_id");
        });
    }

    #[test]
    fn ids_that_never_wrote_expire_by_their_issue_marks() {
        let mut r = Registry::default();
        let expiry = 1_280;
        // Ids 0..10 issued by t=0, 10..20 by t=100, 20..30 by t=105.
        r.next_id = 10;
        r.mark_issued(0, expiry);
        r.next_id = 20;
        r.mark_issued(100, expiry);
        r.next_id = 30;
        r.mark_issued(105, expiry); // within a step of the last mark: not kept
        assert_eq!(r.issue_marks.len(), 2);
        assert_eq!(r.expired_floor(0), 0, "nothing issued before the cut-off");
        assert_eq!(r.expired_floor(50), 10);
        assert_eq!(r.expired_floor(150), 20, "ids 20..30 have no mark yet");
        r.mark_issued(300, expiry);
        assert_eq!(r.expired_floor(301), 30);
        assert_eq!(r.expired_floor(10_000), 30, "never past what was issued");
    }

    #[test]
    fn an_expired_or_retired_id_has_no_next_epoch() {
        let mut r = Registry {
            next_id: 100,
            retired_below: 10,
            expired_below: 50,
            ..Registry::default()
        };
        r.epochs.insert(20, (3, 0));
        assert_eq!(r.epoch_of(5, None).unwrap_err().code, "unknown_producer_id");
        assert_eq!(r.epoch_of(30, None).unwrap_err().code, "unknown_producer_id");
        assert_eq!(
            r.epoch_of(30, Some(0)).unwrap(),
            0,
            "a shard holds its state: live"
        );
        assert_eq!(r.epoch_of(20, None).unwrap(), 3);
        assert_eq!(r.epoch_of(60, None).unwrap(), 0, "issued lately");
        assert_eq!(r.epoch_of(100, None).unwrap_err().code, "unknown_producer_id");
    }
}
