//! Nodes for the transport tests: each on its own glommio executor thread,
//! its groups reached over real loopback TCP through `es_raft::transport`;
//! a TCP proxy that can cut every connection through it; and certificates
//! for mutual TLS.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use es_raft::mem_store::{MemLog, MemSm};
use es_raft::openraft::{EmptyNode, Raft, RaftMetrics, ServerState};
use es_raft::transport::{
    GroupRegistry, InflightBudget, RaftServer, ShardNetwork, TransportConfig, TransportStats,
};
use es_raft::{EsRaft, GroupConfig, GroupId, LogStore, NodeId, PartitionRaft, PartitionSm};
use es_storage::{FsyncBatcher, LogConfig, PartitionLog};
use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use glommio::net::TcpListener;

pub use crate::common::HANG_GUARD;

/// A free loopback address (bound with SO_REUSEPORT again by the node).
pub fn free_addr() -> SocketAddr {
    let l = StdListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

type Job = Box<dyn FnOnce(Rc<Ctx>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// What a node holds on its thread.
pub struct Ctx {
    pub id: NodeId,
    pub net: ShardNetwork,
    pub server: RaftServer,
    pub registry: GroupRegistry,
    pub stats: Rc<TransportStats>,
    pub rafts: RefCell<BTreeMap<GroupId, Raft<EsRaft>>>,
    pub logs: RefCell<BTreeMap<GroupId, (LogStore, PartitionSm)>>,
    pub mems: RefCell<BTreeMap<GroupId, (MemLog, MemSm)>>,
}

impl Ctx {
    pub fn raft(&self, group: GroupId) -> Raft<EsRaft> {
        self.rafts.borrow()[&group].clone()
    }

    /// Starts `group` on the in-memory store.
    pub async fn start_mem(&self, group: GroupId) {
        let (log, sm) = (MemLog::default(), MemSm::default());
        let raft = Raft::new(
            self.id,
            crate::common::config(),
            self.net.group(group),
            log.clone(),
            sm.clone(),
        )
        .await
        .expect("raft starts");
        self.mems.borrow_mut().insert(group, (log, sm));
        self.registry.insert(group, raft.clone());
        self.rafts.borrow_mut().insert(group, raft);
    }

    /// Starts `group` on a partition log under `dir` (reopened if there).
    pub async fn start_log(&self, group: GroupId, dir: &Path) {
        self.registry.opening(group);
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let store = LogStore::open(&dir.join("log"), &dir.join("raft"), config, FsyncBatcher::new())
            .await
            .expect("open the replica");
        let sm = PartitionSm::new(&store).expect("state machine");
        let raft = Raft::new(
            self.id,
            crate::common::config(),
            self.net.group(group),
            store.clone(),
            sm.clone(),
        )
        .await
        .expect("raft starts");
        self.logs.borrow_mut().insert(group, (store, sm));
        self.registry.insert(group, raft.clone());
        self.rafts.borrow_mut().insert(group, raft);
    }

    /// Opens the partition log under `dir/log` and a replica of `group`
    /// over it, its Raft state under `dir/raft`, with `ids` the members
    /// should it have to start the group (as the broker opens one).
    pub async fn open_replica(
        &self,
        group: GroupId,
        dir: &Path,
        ids: &[NodeId],
        log_config: LogConfig,
        cfg: &GroupConfig,
    ) -> PartitionRaft {
        let (log, _) = PartitionLog::open(&dir.join("log"), log_config, FsyncBatcher::new())
            .await
            .expect("open the partition log");
        PartitionRaft::open(
            self.id,
            group,
            log,
            &dir.join("raft"),
            es_raft::Initialize::from_replicas(ids),
            &self.net,
            &self.registry,
            cfg,
        )
        .await
        .expect("open the replica")
    }

    /// Stops every group, closes the logs and the transport.
    pub async fn shutdown(&self) {
        let rafts = std::mem::take(&mut *self.rafts.borrow_mut());
        for (g, r) in rafts {
            self.registry.remove(g);
            r.shutdown().await.expect("shutdown");
        }
        self.server.close();
        self.net.close();
        let logs = std::mem::take(&mut *self.logs.borrow_mut());
        for (_, (store, _)) in logs {
            store.close().await.expect("close");
        }
    }
}

/// Every record of `p`'s log below its high watermark: (offset, value).
pub async fn committed_records(p: &PartitionRaft) -> Vec<(u64, String)> {
    let hw = p.high_watermark();
    p.log()
        .read(es_storage::Offset(0), usize::MAX, es_storage::Offset(hw))
        .await
        .expect("read the log")
        .into_iter()
        .map(|r| (r.offset.0, String::from_utf8(r.value).unwrap()))
        .collect()
}

/// A node on its own thread and executor.
pub struct Node {
    pub id: NodeId,
    tx: Option<mpsc::UnboundedSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Node {
    /// Starts node `config.node_id`, listening on `listen`.
    pub fn start(config: TransportConfig, listen: SocketAddr) -> Node {
        let id = config.node_id;
        let (tx, mut rx) = mpsc::unbounded::<Job>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("node-{id}"))
            .spawn(move || {
                glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
                    .io_memory(256 << 10)
                    .make()
                    .expect("glommio executor")
                    .run(async move {
                        let stats = Rc::new(TransportStats::default());
                        let budget = InflightBudget::new(config.inflight_shard_bytes);
                        let registry = GroupRegistry::default();
                        let net = ShardNetwork::new(&config, 0, stats.clone(), budget.clone());
                        let server =
                            RaftServer::new(config.clone(), 0, registry.clone(), stats.clone(), budget);
                        server.start(TcpListener::bind(listen).expect("bind the raft listener"));
                        let ctx = Rc::new(Ctx {
                            id,
                            net,
                            server,
                            registry,
                            stats,
                            rafts: RefCell::default(),
                            logs: RefCell::default(),
                            mems: RefCell::default(),
                        });
                        ready_tx.send(()).unwrap();
                        while let Some(job) = rx.next().await {
                            glommio::spawn_local(job(ctx.clone())).detach();
                        }
                        ctx.shutdown().await;
                    })
            })
            .unwrap();
        ready_rx.recv().unwrap();
        Node {
            id,
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Runs `f` on the node's thread and returns its result.
    pub fn call<R, F, Fut>(&self, f: F) -> R
    where
        R: Send + 'static,
        F: FnOnce(Rc<Ctx>) -> Fut + Send + 'static,
        Fut: Future<Output = R> + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |ctx| {
            Box::pin(async move {
                let _ = tx.send(f(ctx).await);
            })
        });
        self.tx.as_ref().unwrap().unbounded_send(job).unwrap();
        futures::executor::block_on(rx).expect("the node's job ended without an answer")
    }

    /// Stops the node: its groups shut down, its logs close, its thread ends.
    pub fn stop(mut self) {
        self.tx.take();
        self.thread.take().unwrap().join().unwrap();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.tx.take();
        if std::thread::panicking() {
            // The test failed: a node that hangs must not hide why.
            return;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Waits on `node`'s thread until `raft(group)`'s metrics satisfy `cond`.
pub fn wait_metrics(
    node: &Node,
    group: GroupId,
    what: &str,
    cond: impl Fn(&RaftMetrics<NodeId, EmptyNode>) -> bool + Send + 'static,
) {
    let what = what.to_string();
    node.call(move |ctx| async move {
        ctx.raft(group)
            .wait(Some(HANG_GUARD))
            .metrics(cond, &what)
            .await
            .unwrap_or_else(|e| panic!("gave up waiting for {what}: {e}"));
    })
}

/// Waits until one of `nodes` leads `group`, as all of them see it.
pub fn wait_leader(nodes: &[&Node], group: GroupId) -> NodeId {
    let start = Instant::now();
    loop {
        let mut seen = BTreeSet::new();
        let mut leader = None;
        for n in nodes {
            let (state, current) = n.call(move |ctx| async move {
                let m = ctx.raft(group).metrics().borrow().clone();
                (m.state, m.current_leader)
            });
            seen.insert(current);
            if state == ServerState::Leader {
                leader = Some(n.id);
            }
        }
        if let (Some(l), 1) = (leader, seen.len()) {
            if seen.contains(&Some(l)) {
                return l;
            }
        }
        assert!(
            start.elapsed() < HANG_GUARD,
            "no leader of group {group} after {HANG_GUARD:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until every node of `nodes` applied `group` up to `index`.
pub fn wait_applied(nodes: &[&Node], group: GroupId, index: u64) {
    for n in nodes {
        wait_metrics(
            n,
            group,
            &format!("node {} applied {index} of group {group}", n.id),
            move |m| m.last_applied.is_some_and(|l| l.index >= index),
        );
    }
}

/// Waits (on the test thread) until `cond` holds.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < HANG_GUARD, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// --- A TCP proxy that can cut its connections ---------------------------------

/// Forwards connections from its address to `target`; [`Proxy::cut`]
/// breaks every connection open through it (both sockets shut down), as a
/// lost link would.
pub struct Proxy {
    pub addr: SocketAddr,
    open: Arc<Mutex<Vec<StdStream>>>,
}

impl Proxy {
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let open: Arc<Mutex<Vec<StdStream>>> = Arc::default();
        let open2 = open.clone();
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { return };
                let Ok(outbound) = StdStream::connect(target) else {
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                {
                    let mut o = open2.lock().unwrap();
                    o.push(inbound.try_clone().unwrap());
                    o.push(outbound.try_clone().unwrap());
                }
                pipe(inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
                pipe(outbound, inbound);
            }
        });
        Proxy { addr, open }
    }

    /// Breaks every connection open through the proxy; how many sockets.
    pub fn cut(&self) -> usize {
        let mut o = self.open.lock().unwrap();
        for s in o.iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let n = o.len();
        o.clear();
        n
    }
}

fn pipe(mut from: StdStream, mut to: StdStream) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

// --- Certificates ---------------------------------------------------------------

/// A CA that signs node certificates, in DER.
pub struct Ca {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

/// A certificate chain and its key, in DER and PEM.
pub struct Leaf {
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        Ca {
            issuer: rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub fn der(&self) -> Vec<u8> {
        self.issuer.der().to_vec()
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for the DNS name `name` (client and server use).
    pub fn leaf(&self, name: &str) -> Leaf {
        let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// Writes `leaf` and `ca` as PEM files under `dir`; their paths (cert, key, ca).
pub fn write_pem(dir: &Path, name: &str, leaf: &Leaf, ca: &Ca) -> (PathBuf, PathBuf, PathBuf) {
    let cert = dir.join(format!("{name}.pem"));
    let key = dir.join(format!("{name}-key.pem"));
    let ca_path = dir.join("ca.pem");
    std::fs::write(&cert, &leaf.cert_pem).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    std::fs::write(&ca_path, ca.pem()).unwrap();
    (cert, key, ca_path)
}

// --- A link that can be blocked or slowed ---------------------------------------

/// Forwards connections from its address to `target`, like [`Proxy`];
/// while [`blocked`](LinkProxy::block) it breaks every connection through
/// it and refuses new ones at once, as a link that is down. One per
/// (source, destination) pair isolates a node: block its links both ways.
/// [`set_delay`](LinkProxy::set_delay) holds every chunk of bytes that far
/// behind (each way), in order: a slow link.
pub struct LinkProxy {
    pub addr: SocketAddr,
    open: Arc<Mutex<Vec<StdStream>>>,
    blocked: Arc<std::sync::atomic::AtomicBool>,
    delay_us: Arc<std::sync::atomic::AtomicU64>,
}

impl LinkProxy {
    pub fn start(target: SocketAddr) -> LinkProxy {
        use std::sync::atomic::Ordering;
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let open: Arc<Mutex<Vec<StdStream>>> = Arc::default();
        let blocked: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let delay_us: Arc<std::sync::atomic::AtomicU64> = Arc::default();
        let (open2, blocked2, delay2) = (open.clone(), blocked.clone(), delay_us.clone());
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { return };
                if blocked2.load(Ordering::SeqCst) {
                    let _ = inbound.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(outbound) = StdStream::connect(target) else {
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                {
                    let mut o = open2.lock().unwrap();
                    o.push(inbound.try_clone().unwrap());
                    o.push(outbound.try_clone().unwrap());
                }
                pipe_delayed(
                    inbound.try_clone().unwrap(),
                    outbound.try_clone().unwrap(),
                    delay2.clone(),
                );
                pipe_delayed(outbound, inbound, delay2.clone());
            }
        });
        LinkProxy {
            addr,
            open,
            blocked,
            delay_us,
        }
    }

    /// Takes the link down: open connections broken, new ones refused.
    pub fn block(&self) {
        self.blocked.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut o = self.open.lock().unwrap();
        for s in o.iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
        o.clear();
    }

    /// Brings the link back up.
    pub fn unblock(&self) {
        self.blocked.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Delays every byte through the link by `delay` each way from now on
    /// (zero: none).
    pub fn set_delay(&self, delay: Duration) {
        self.delay_us
            .store(delay.as_micros() as u64, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Copies `from` to `to` like [`pipe`], each chunk written `delay_us`
/// after it was read (in order: a reader thread queues, a writer thread
/// waits out each chunk's due time).
fn pipe_delayed(mut from: StdStream, mut to: StdStream, delay_us: Arc<std::sync::atomic::AtomicU64>) {
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    let (from2, to2) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let delay = Duration::from_micros(delay_us.load(std::sync::atomic::Ordering::SeqCst));
                    if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        for (due, bytes) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to2.shutdown(Shutdown::Both);
        let _ = from2.shutdown(Shutdown::Both);
    });
}
