//! What the proxy's listeners and every connection share: the rules, the
//! live connections, the stop flag and the counters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::conn::Conn;
use super::{Link, NodeId, Rule};

#[derive(Default)]
pub(super) struct Counters {
    pub(super) accepted: AtomicU64,
    pub(super) bad_preamble: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) connect_failed: AtomicU64,
    pub(super) bytes: Mutex<HashMap<Link, u64>>,
}

/// What the listeners and every connection share.
pub(super) struct Shared {
    pub(super) rules: Mutex<HashMap<Link, Rule>>,
    pub(super) conns: Mutex<Vec<Weak<Conn>>>,
    pub(super) stop: AtomicBool,
    pub(super) counters: Counters,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A pump that panicked cannot leave a rule or a queue half-changed.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(super) fn rule(&self, link: Link) -> Rule {
        lock(&self.rules).get(&link).copied().unwrap_or(Rule::Ok)
    }

    pub(super) fn reset_between(&self, a: NodeId, b: NodeId) -> bool {
        let rules = lock(&self.rules);
        [(a, b), (b, a)]
            .iter()
            .any(|l| rules.get(l) == Some(&Rule::Reset))
    }

    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(super) fn live(&self) -> Vec<Arc<Conn>> {
        let mut conns = lock(&self.conns);
        conns.retain(|w| w.strong_count() > 0);
        conns.iter().filter_map(Weak::upgrade).collect()
    }
}
