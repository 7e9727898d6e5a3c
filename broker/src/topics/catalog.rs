//! The topic catalog every shard reads: an immutable snapshot swapped
//! atomically (lock-free reads) by the controller on shard 0, the only
//! writer. A shard never blocks to read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::topics::topic::TopicMeta;

pub type Topics = BTreeMap<String, Arc<TopicMeta>>;

/// Shared by all shards (`Send + Sync`).
pub struct Catalog {
    topics: ArcSwap<Topics>,
    /// The producer id registry as read at start-up (see producers/ids.rs).
    producer_start_view: crate::producers::ids::StartView,
    /// Cluster mode: the controller's replica assignment and node
    /// addresses, published by the reconciler (cluster/reconciler.rs);
    /// empty standalone.
    assignment: ArcSwap<crate::cluster::assignment::Assignment>,
}

impl Catalog {
    pub fn new(initial: Vec<TopicMeta>, producer_start_view: crate::producers::ids::StartView) -> Catalog {
        let map = initial
            .into_iter()
            .map(|m| (m.name.clone(), Arc::new(m)))
            .collect();
        Catalog {
            topics: ArcSwap::from_pointee(map),
            producer_start_view,
            assignment: ArcSwap::from_pointee(Default::default()),
        }
    }

    /// The controller's assignment as last published (cluster mode).
    pub fn assignment(&self) -> Arc<crate::cluster::assignment::Assignment> {
        self.assignment.load_full()
    }

    /// Publishes the assignment. Reconciler only.
    pub fn set_assignment(&self, a: crate::cluster::assignment::Assignment) {
        self.assignment.store(Arc::new(a));
    }

    pub fn producer_start_view(&self) -> &crate::producers::ids::StartView {
        &self.producer_start_view
    }

    pub fn get(&self, name: &str) -> Option<Arc<TopicMeta>> {
        self.topics.load().get(name).cloned()
    }

    pub fn snapshot(&self) -> Arc<Topics> {
        self.topics.load_full()
    }

    /// Publishes `meta` (new or changed). Controller only.
    pub fn put(&self, meta: TopicMeta) {
        let mut next = (**self.topics.load()).clone();
        next.insert(meta.name.clone(), Arc::new(meta));
        self.topics.store(Arc::new(next));
    }

    /// Removes a topic. Controller only.
    pub fn remove(&self, name: &str) {
        let mut next = (**self.topics.load()).clone();
        next.remove(name);
        self.topics.store(Arc::new(next));
    }
}
