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

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[test]
    fn a_request_waits_for_room_and_a_huge_one_takes_all() {
        glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(64 << 10)
            .make()
            .unwrap()
            .run(async {
                let b = InflightBudget::new(100);
                let first = b.acquire(60).await.unwrap();
                assert_eq!(b.available(), 40);
                let mut second = Box::pin(b.acquire(60));
                assert!(second.as_mut().now_or_never().is_none(), "no room yet");
                drop(first);
                let second = second.await.unwrap();
                assert_eq!(b.available(), 40);
                drop(second);
                let all = b.acquire(1 << 30).await.unwrap();
                assert_eq!(b.available(), 0, "larger than the budget: all of it");
                drop(all);
                b.close();
                assert!(b.acquire(1).await.is_err(), "closed");
            });
    }
}
