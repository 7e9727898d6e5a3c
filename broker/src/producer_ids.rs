//! Producer id allocation, on the controller shard: a new producer gets the
//! next id at epoch 0; a producer that re-initializes with its id gets the
//! next epoch, which fences its older instances on every partition.
//! `<data-dir>/producers/registry.json` (atomic) is fsynced before the
//! answer, so an id or epoch is never handed out twice.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// Most epochs a producer id can go through (epochs are i16 on disk).
const EPOCH_MAX: i16 = i16::MAX;

#[derive(Default, Serialize, Deserialize)]
pub struct Registry {
    next_id: i64,
    epochs: BTreeMap<i64, i16>,
}

/// Reads the registry's epochs at start-up, before any shard runs.
pub fn load_epochs(data_dir: &Path) -> Result<std::collections::HashMap<i64, i16>, String> {
    let path = data_dir.join("producers").join("registry.json");
    let read = std::fs::read(&path); // blocking-ok: start-up, before the shards run
    match read {
        Ok(bytes) => serde_json::from_slice::<Registry>(&bytes)
            .map(|r| r.epochs.into_iter().collect())
            .map_err(|e| format!("{} is damaged: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Default::default()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

impl Registry {
    pub async fn load(data_dir: &Path) -> Result<Registry, ApiError> {
        let path = data_dir.join("producers").join("registry.json");
        match crate::fsops::read_small(&path).await? {
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::internal(format!("{} is damaged: {e}", path.display()))),
            None => Ok(Registry::default()),
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
