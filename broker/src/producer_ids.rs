//! Producer id allocation, on the controller shard: a new producer gets the
//! next id at epoch 0; a producer that re-initializes with its id gets the
//! next epoch, which fences its older instances on every partition.
//! `<data-dir>/producers/registry.json` (atomic) is fsynced before the
//! answer, so an id or epoch is never handed out twice.
//!
//! An id is never issued again, even when the registry is lost: the next id
//! is at least one past the largest producer id that any partition's
//! producer state knows (its snapshot and the batch headers after it, read
//! when the partition opened), so the registry is first read once every
//! partition has opened. A registry that is missing while partitions know
//! producer ids, or that is damaged, was lost: it is rebuilt (a damaged one
//! is kept aside as `registry.json.damaged-<ms>`, said at error level), its
//! ids continue [`LOST_REGISTRY_ID_GAP`] past the largest id the partitions
//! know, and the epochs it held are gone: a producer holding an earlier id
//! is refused (`unknown_producer_id`) and asks for a new one. Rebuilding
//! the epochs from the partitions could hand out an epoch a live instance
//! already holds, whose batches would then be taken for retries.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::shard::Shard;

/// Most epochs a producer id can go through (epochs are i16 on disk).
const EPOCH_MAX: i16 = i16::MAX;
/// Ids skipped past the largest one the partitions know when the registry
/// was lost: room for ids that were issued but never reached a partition
/// still on disk (a producer that had not written yet, or wrote only to
/// topics since deleted), whose holders may still be running.
pub const LOST_REGISTRY_ID_GAP: i64 = 1 << 32;
/// How often the first registry read looks whether every shard has opened
/// its partitions.
const READY_POLL_MS: u64 = 20;

/// The largest producer id any partition's producer state held when it
/// opened, in this process (-1: none). Monotone: a deleted topic's ids
/// stay counted.
static LARGEST_PARTITION_PRODUCER_ID: AtomicI64 = AtomicI64::new(-1);

/// Called by each partition as it opens, with the largest producer id its
/// producer state knows.
pub fn note_partition_producer_id(id: i64) {
    LARGEST_PARTITION_PRODUCER_ID.fetch_max(id, Ordering::AcqRel);
}

#[derive(Default, Serialize, Deserialize)]
pub struct Registry {
    next_id: i64,
    epochs: BTreeMap<i64, i16>,
}

/// Reads the registry's epochs at start-up, before any shard runs. A
/// damaged registry is said at error level and read as empty: the
/// controller keeps it aside and rebuilds it at the first producer init
/// (see the module comment).
pub fn load_epochs(data_dir: &Path) -> Result<std::collections::HashMap<i64, i16>, String> {
    let path = data_dir.join("producers").join("registry.json");
    let read = std::fs::read(&path); // blocking-ok: start-up, before the shards run
    match read {
        Ok(bytes) => match serde_json::from_slice::<Registry>(&bytes) {
            Ok(r) => Ok(r.epochs.into_iter().collect()),
            Err(e) => {
                tracing::error!(
                    path = %path.display(),
                    error = %e,
                    "producer id registry is damaged: producers holding earlier ids are refused \
                     (unknown_producer_id) and must ask for a new id; new ids continue past every \
                     id the partitions know, and the damaged file is kept aside at the first producer init"
                );
                Ok(Default::default())
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

impl Registry {
    /// The registry, on the controller shard, once every shard has opened
    /// its partitions (their producer state bounds the next id); rebuilt
    /// when it was lost or damaged.
    pub async fn load(shard: &Shard) -> Result<Registry, ApiError> {
        while !shard.state.is_ready(shard.shards) {
            if shard.is_shutting_down() || shard.state.is_shutting_down() {
                return Err(ApiError::unavailable("broker is shutting down"));
            }
            glommio::timer::sleep(Duration::from_millis(READY_POLL_MS)).await;
        }
        let largest = LARGEST_PARTITION_PRODUCER_ID.load(Ordering::Acquire);
        Registry::load_known(shard.data_dir(), largest).await
    }

    /// The registry at `data_dir`, given the largest producer id the
    /// partitions know (-1: none).
    async fn load_known(data_dir: &Path, largest: i64) -> Result<Registry, ApiError> {
        let dir = data_dir.join("producers");
        let path = dir.join("registry.json");
        let Some(bytes) = crate::fsops::read_small(&path).await? else {
            if largest < 0 {
                // A new data directory, or one where no producer wrote.
                return Ok(Registry::default());
            }
            let rebuilt = Registry::rebuilt(largest);
            tracing::error!(
                path = %path.display(),
                largest_known_id = largest,
                next_id = rebuilt.next_id,
                "producer id registry is missing while partitions hold batches of producer ids: \
                 rebuilt; producers holding earlier ids must ask for a new one"
            );
            return Ok(rebuilt);
        };
        match serde_json::from_slice::<Registry>(&bytes) {
            Ok(mut r) => {
                if r.next_id <= largest {
                    tracing::warn!(
                        path = %path.display(),
                        next_id = r.next_id,
                        largest_known_id = largest,
                        "producer id registry is behind the partitions (restored from an old copy?); \
                         ids continue past the largest one they know"
                    );
                    r.next_id = largest + 1;
                }
                Ok(r)
            }
            Err(e) => {
                let ms = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let aside = dir.join(format!("registry.json.damaged-{ms}"));
                glommio::io::rename(&path, &aside)
                    .await
                    .map_err(|e| ApiError::internal(format!("moving {} aside: {e}", path.display())))?;
                es_storage::sync_dir(&dir).await.map_err(ApiError::storage)?;
                let rebuilt = Registry::rebuilt(largest);
                tracing::error!(
                    path = %path.display(),
                    kept_as = %aside.display(),
                    error = %e,
                    largest_known_id = largest,
                    next_id = rebuilt.next_id,
                    "producer id registry is damaged: kept aside and rebuilt; producers holding \
                     earlier ids must ask for a new one"
                );
                Ok(rebuilt)
            }
        }
    }

    /// A registry that was lost: no epochs, ids past every id that may
    /// have been issued.
    fn rebuilt(largest: i64) -> Registry {
        Registry {
            next_id: largest
                .max(-1)
                .saturating_add(1)
                .saturating_add(LOST_REGISTRY_ID_GAP),
            epochs: BTreeMap::new(),
        }
    }

    /// A new id (`None`) or the next epoch of an existing one; durable
    /// before it returns.
    pub async fn init(&mut self, data_dir: &Path, existing: Option<i64>) -> Result<(i64, i16), ApiError> {
        let (id, epoch) = match existing {
            None => (self.next_id, 0),
            Some(id) => {
                let current = *self.epochs.get(&id).ok_or_else(|| {
                    ApiError::new(
                        hyper::StatusCode::NOT_FOUND,
                        "unknown_producer_id",
                        format!("producer id {id} was never issued by this broker"),
                    )
                })?;
                if current == EPOCH_MAX {
                    return Err(ApiError::invalid(format!(
                        "producer {id} used every epoch; ask for a new id"
                    )));
                }
                (id, current + 1)
            }
        };
        let mut next = Registry {
            next_id: self.next_id.max(id + 1),
            epochs: self.epochs.clone(),
        };
        next.epochs.insert(id, epoch);
        let bytes = serde_json::to_vec(&next).expect("registry serializes");
        crate::fsops::write_atomic(&data_dir.join("producers"), "registry.json", bytes).await?;
        *self = next;
        Ok((id, epoch))
    }
}
