//! The in-process cluster the raft tests run: several `Raft<EsRaft>` on one
//! glommio executor, joined by a [`Router`] that delivers RPCs by calling
//! the target node directly, and can cut links (one direction or both) to
//! model a partition or a dead node.
#![allow(dead_code)]

mod suite;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use es_raft::openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError, Unreachable,
};
use es_raft::openraft::network::RPCOption;
use es_raft::openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use es_raft::openraft::storage::{RaftLogStorage, RaftStateMachine, Snapshot};
use es_raft::openraft::{Config, EmptyNode, Raft, RaftMetrics, RaftNetwork, RaftNetworkFactory, ServerState};
use es_raft::{EsRaft, NodeId, Proposal, Vote};

/// How long a wait on the cluster may take before the test gives up as
/// hung: a guard, not a limit on speed.
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// Runs `fut` on a fresh glommio executor.
pub fn run<T>(fut: impl Future<Output = T>) -> T {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("glommio executor (needs io_uring and >= 512 KiB memlock)")
        .run(fut)
}

/// Like [`run`], inside a tokio runtime's context whose only use is its
/// timer: openraft's storage suite sleeps with `tokio::time::sleep`. The
/// timer is driven by tokio's worker thread, which wakes the glommio task
/// (glommio takes wakes from other threads).
pub fn run_with_tokio_timer<T>(fut: impl Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("tokio timer runtime");
    let _context = rt.enter();
    run(fut)
}

/// The segment files of a node's log under `dir/log`, by name, with
/// their bytes.
pub fn log_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// openraft's config for the tests: timeouts generous for a loaded 2-core
/// machine running three nodes on one thread.
pub fn config() -> Arc<Config> {
    Arc::new(es_raft::partition_config("es-test", 50, 400).expect("valid config"))
}

#[derive(Default)]
struct RouterInner {
    nodes: BTreeMap<NodeId, Raft<EsRaft>>,
    /// Links that drop every message: (from, to).
    cut: BTreeSet<(NodeId, NodeId)>,
}

/// Delivers RPCs between the in-process nodes; clones share it.
#[derive(Clone, Default)]
pub struct Router(Rc<RefCell<RouterInner>>);

impl Router {
    pub fn add(&self, id: NodeId, raft: Raft<EsRaft>) {
        self.0.borrow_mut().nodes.insert(id, raft);
    }

    pub fn remove(&self, id: NodeId) -> Option<Raft<EsRaft>> {
        self.0.borrow_mut().nodes.remove(&id)
    }

    pub fn node(&self, id: NodeId) -> Option<Raft<EsRaft>> {
        self.0.borrow().nodes.get(&id).cloned()
    }

    /// Cuts every link to and from `id` (the node runs on, alone).
    pub fn isolate(&self, id: NodeId, all: &[NodeId]) {
        let mut inner = self.0.borrow_mut();
        for &o in all.iter().filter(|&&o| o != id) {
            inner.cut.insert((id, o));
            inner.cut.insert((o, id));
        }
    }

    /// Cuts the link `from -> to` only.
    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.0.borrow_mut().cut.insert((from, to));
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.0.borrow_mut().cut.clear();
    }

    fn target(&self, from: NodeId, to: NodeId) -> Result<Raft<EsRaft>, Unreachable> {
        let inner = self.0.borrow();
        let unreachable =
            |why: &str| Unreachable::new(&std::io::Error::other(format!("{from}->{to}: {why}")));
        if inner.cut.contains(&(from, to)) {
            return Err(unreachable("link cut"));
        }
        inner
            .nodes
            .get(&to)
            .cloned()
            .ok_or_else(|| unreachable("node down"))
    }

    /// The answer of `to` gets back to `from` only if the way back is open.
    fn back(&self, from: NodeId, to: NodeId) -> Result<(), Unreachable> {
        self.target(to, from).map(|_| ()).or_else(|e| {
            // `from` may be down (answering a dead node is harmless), but a
            // cut link drops the answer.
            if self.0.borrow().cut.contains(&(to, from)) {
                Err(e)
            } else {
                Ok(())
            }
        })
    }
}

/// A node's side of the router: openraft's network factory.
pub struct Net {
    pub from: NodeId,
    pub router: Router,
}

pub struct Link {
    from: NodeId,
    to: NodeId,
    router: Router,
}

impl RaftNetworkFactory<EsRaft> for Net {
    type Network = Link;

    async fn new_client(&mut self, target: NodeId, _: &EmptyNode) -> Link {
        Link {
            from: self.from,
            to: target,
            router: self.router.clone(),
        }
    }
}

type RpcResult<T> = Result<T, RPCError<NodeId, EmptyNode, RaftError<NodeId>>>;

impl RaftNetwork<EsRaft> for Link {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<EsRaft>,
        _: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let raft = self.router.target(self.from, self.to)?;
        let resp = raft
            .append_entries(rpc)
            .await
            .map_err(|e| RemoteError::new(self.to, e))?;
        self.router.back(self.from, self.to)?;
        Ok(resp)
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, _: RPCOption) -> RpcResult<VoteResponse<NodeId>> {
        let raft = self.router.target(self.from, self.to)?;
        let resp = raft.vote(rpc).await.map_err(|e| RemoteError::new(self.to, e))?;
        self.router.back(self.from, self.to)?;
        Ok(resp)
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot<EsRaft>,
        _cancel: impl Future<Output = ReplicationClosed> + 'static,
        _: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<EsRaft, Fatal<NodeId>>> {
        let raft = self.router.target(self.from, self.to)?;
        let resp = raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| RemoteError::new(self.to, e))?;
        self.router.back(self.from, self.to)?;
        Ok(resp)
    }
}

/// Starts node `id` on `log` and `sm`, and adds it to the router.
pub async fn start<LS, SM>(router: &Router, id: NodeId, log: LS, sm: SM) -> Raft<EsRaft>
where
    LS: RaftLogStorage<EsRaft>,
    SM: RaftStateMachine<EsRaft>,
{
    start_with(router, id, log, sm, config()).await
}

/// [`start`] with another openraft config.
pub async fn start_with<LS, SM>(
    router: &Router,
    id: NodeId,
    log: LS,
    sm: SM,
    config: Arc<Config>,
) -> Raft<EsRaft>
where
    LS: RaftLogStorage<EsRaft>,
    SM: RaftStateMachine<EsRaft>,
{
    let net = Net {
        from: id,
        router: router.clone(),
    };
    let raft = Raft::new(id, config, net, log, sm).await.expect("raft starts");
    router.add(id, raft.clone());
    raft
}

/// Makes `ids` one group: node `ids[0]` initializes it with all of them.
pub async fn initialize(router: &Router, ids: &[NodeId]) {
    let members: BTreeSet<NodeId> = ids.iter().copied().collect();
    router
        .node(ids[0])
        .expect("node is up")
        .initialize(members)
        .await
        .expect("initialize");
}

/// `ids` without `id`.
pub fn others(ids: &[NodeId], id: NodeId) -> Vec<NodeId> {
    ids.iter().copied().filter(|&i| i != id).collect()
}

/// The index of the last entry in `raft`'s log.
pub fn last_index(raft: &Raft<EsRaft>) -> u64 {
    raft.metrics()
        .borrow()
        .last_log_index
        .expect("the log holds an entry")
}

/// Cuts leader `old` off from the rest of `ids` and proposes `proposals`
/// to it, which it appends and cannot commit; returns once they are all
/// in its log.
pub async fn isolate_with_writes(router: &Router, old: NodeId, ids: &[NodeId], proposals: Vec<Proposal>) {
    let raft = router.node(old).expect("node is up");
    let before = last_index(&raft);
    let n = proposals.len() as u64;
    router.isolate(old, ids);
    for proposal in proposals {
        let r = raft.clone();
        glommio::spawn_local(async move {
            // Never committed: the answer is an error once it steps down.
            let _ = r.client_write(proposal).await;
        })
        .detach();
    }
    wait_metrics(&raft, "the isolated leader appended its writes", |m| {
        m.last_log_index >= Some(before + n)
    })
    .await;
}

/// Stops node `id` as a kill would: it leaves the router, its tasks end.
pub async fn kill(router: &Router, id: NodeId) {
    if let Some(raft) = router.remove(id) {
        raft.shutdown().await.expect("shutdown");
    }
}

/// Waits until `raft`'s metrics satisfy `cond`.
pub async fn wait_metrics(
    raft: &Raft<EsRaft>,
    what: &str,
    cond: impl Fn(&RaftMetrics<NodeId, EmptyNode>) -> bool,
) -> RaftMetrics<NodeId, EmptyNode> {
    raft.wait(Some(HANG_GUARD))
        .metrics(cond, what)
        .await
        .unwrap_or_else(|e| panic!("gave up waiting for {what}: {e}"))
}

/// Waits until one of `ids` is leader, seen by all of them, and returns it.
pub async fn wait_leader(router: &Router, ids: &[NodeId]) -> NodeId {
    wait_leader_by_term(router, ids, u64::MAX).await
}

/// [`wait_leader`], giving up as soon as a node of `ids` passes term
/// `max_term`: elections that keep splitting the vote fail there, whatever
/// the time they take.
pub async fn wait_leader_by_term(router: &Router, ids: &[NodeId], max_term: u64) -> NodeId {
    let start = std::time::Instant::now();
    loop {
        let mut leaders = BTreeSet::new();
        let mut is_leader = None;
        for &id in ids {
            let Some(r) = router.node(id) else { continue };
            let m = r.metrics().borrow().clone();
            leaders.insert(m.current_leader);
            if m.state == ServerState::Leader {
                is_leader = Some(id);
            }
        }
        if let (Some(l), 1) = (is_leader, leaders.len()) {
            if leaders.contains(&Some(l)) {
                return l;
            }
        }
        let term = ids
            .iter()
            .filter_map(|&id| Some(router.node(id)?.metrics().borrow().current_term))
            .max();
        let past_term = term.is_some_and(|t| t > max_term);
        if past_term || start.elapsed() >= HANG_GUARD {
            let seen: Vec<String> = ids
                .iter()
                .filter_map(|&id| {
                    let m = router.node(id)?.metrics().borrow().clone();
                    Some(format!(
                        "node {id}: {:?}, leader {:?}, vote {}, last log {:?}, applied {:?}",
                        m.state, m.current_leader, m.vote, m.last_log_index, m.last_applied
                    ))
                })
                .collect();
            let when = if past_term {
                format!("past term {max_term}")
            } else {
                format!("after {HANG_GUARD:?}")
            };
            panic!("no leader among {ids:?} {when}: {}", seen.join("; "));
        }
        glommio::timer::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every node of `ids` applied up to `index`.
pub async fn wait_applied(router: &Router, ids: &[NodeId], index: u64) {
    for &id in ids {
        let r = router.node(id).expect("node is up");
        wait_metrics(&r, &format!("node {id} applied {index}"), |m| {
            m.last_applied.is_some_and(|l| l.index >= index)
        })
        .await;
    }
}

/// A network error, for links that must fail the RPC at once.
pub fn network_error(what: &str) -> NetworkError {
    NetworkError::new(&std::io::Error::other(what.to_string()))
}
