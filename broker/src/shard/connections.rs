//! Client connections open on one shard, counted per listener: each
//! listener's limit is checked against its own count, and shutdown waits
//! for the total to drain. Lives on its shard.

use std::cell::Cell;

/// Client connections open on one shard, per listener.
#[derive(Default)]
pub struct Open {
    http: Cell<usize>,
    binary: Cell<usize>,
}

impl Open {
    /// The count of `listener` (`http`, `binary`), which its listener
    /// keeps.
    pub fn of(&self, listener: &str) -> &Cell<usize> {
        if listener == "http" {
            &self.http
        } else {
            &self.binary
        }
    }

    /// Open on `listener` (`http`, `binary`).
    pub fn get(&self, listener: &str) -> usize {
        self.of(listener).get()
    }

    /// Open on both.
    pub fn total(&self) -> usize {
        self.http.get() + self.binary.get()
    }
}
