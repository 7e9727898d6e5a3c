//! What clients have seen of each partition: the highest offset
//! acknowledged, polled or below a reported high watermark (the nemesis
//! adds what a restarted broker recovered). A torn tail may only cut above
//! it (what no client saw may never have been synced);
//! the gate lets the nemesis wait until no operation is in flight, so that
//! no answer arrives after it read the bound.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use crate::checker::Part;

#[derive(Default)]
pub struct Observed {
    highest: Mutex<HashMap<Part, u64>>,
    gate: RwLock<()>,
}

impl Observed {
    /// Held by a worker for the whole of one operation.
    pub fn operation(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Offset `offset` of `part` was seen by a client.
    pub fn saw(&self, topic: &str, partition: u32, offset: u64) {
        let mut map = self.highest.lock().expect("observed lock");
        let slot = map.entry((topic.to_string(), partition)).or_insert(offset);
        *slot = (*slot).max(offset);
    }

    /// A client was told the high watermark is `hw`: every offset below it
    /// exists.
    pub fn saw_hw(&self, topic: &str, partition: u32, hw: u64) {
        if hw > 0 {
            self.saw(topic, partition, hw - 1);
        }
    }

    /// The highest offset seen of `part`, once no operation is in flight
    /// (with every broker down, none starts that could see more).
    pub fn settled(&self, part: &Part) -> Option<u64> {
        let _quiet = self.gate.write().unwrap_or_else(|e| e.into_inner());
        self.highest.lock().expect("observed lock").get(part).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_highest_offset_seen() {
        let o = Observed::default();
        let part = ("t".to_string(), 1);
        assert_eq!(o.settled(&part), None);
        o.saw("t", 1, 4);
        o.saw("t", 1, 2);
        assert_eq!(o.settled(&part), Some(4));
        o.saw_hw("t", 1, 9);
        o.saw_hw("t", 1, 0);
        assert_eq!(o.settled(&part), Some(8));
    }
}
