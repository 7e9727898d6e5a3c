//! `InflightBudget`: the bytes of raft frames a shard holds at once
//! (`--raft-inflight-shard-bytes`), requests it sends until answered and
//! requests it received until answered. Whoever would go over waits.

use std::rc::Rc;

use glommio::sync::{Semaphore, StaticPermit};

use crate::transport::error::TransportError;

/// A shard's byte budget; clones share it.
#[derive(Clone)]
pub struct InflightBudget {
    sem: Rc<Semaphore>,
    total: u64,
}

impl InflightBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> InflightBudget {
        InflightBudget {
            sem: Rc::new(Semaphore::new(bytes as u64)),
            total: bytes as u64,
        }
    }

    /// Room for `bytes`, once there is: held until the permit drops. A
    /// frame larger than the whole budget waits for all of it (it cannot
    /// be over the frame limit, which fits the default budget).
    pub async fn acquire(&self, bytes: usize) -> Result<StaticPermit, TransportError> {
        let units = (bytes as u64).clamp(1, self.total.max(1));
        self.sem
            .acquire_static_permit(units)
            .await
            .map_err(|_| TransportError::Closed)
    }

    /// Bytes free now.
    pub fn available(&self) -> u64 {
        self.sem.available()
    }

    /// Ends every wait (the shard is stopping).
    pub fn close(&self) {
        self.sem.close();
    }
}
