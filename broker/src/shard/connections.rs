//! Client connections open on one shard, counted per listener: each
//! listener's limit is checked against its own count, and shutdown waits
//! for the total to drain. Lives on its shard.

use std::cell::Cell;

/// Client connections open on one shard, per listener.
#[derive(Default)]
pub struct Open {
    http: Cell<usize>,
    registry: Cell<usize>,
    binary: Cell<usize>,
    kafka: Cell<usize>,
    /// The id of the next connection (the `conn` field of its log lines).
    next_id: Cell<u64>,
}

impl Open {
    /// The count of `listener` (`http`, `registry`, `binary`, `kafka`),
    /// which its listener keeps.
    pub fn of(&self, listener: &str) -> &Cell<usize> {
        match listener {
            "http" => &self.http,
            "registry" => &self.registry,
            "kafka" => &self.kafka,
            _ => &self.binary,
        }
    }

    /// Open on `listener` (`http`, `registry`, `binary`, `kafka`).
    pub fn get(&self, listener: &str) -> usize {
        self.of(listener).get()
    }

    /// A new connection's id, unique on this shard.
    pub fn next_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Open on every listener.
    pub fn total(&self) -> usize {
        self.http.get() + self.registry.get() + self.binary.get() + self.kafka.get()
    }
}
