//! The cluster's flags (docs/cluster.md), flattened into `Config`: who
//! the peers are, where this node listens for them and what it tells
//! clients to connect to, mutual TLS between brokers, and the Raft
//! timings and bounds. Without `--peers` the broker is standalone and
//! none of these is used (the ones without a default are refused then,
//! so that a half-configured cluster node never starts alone).

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use es_raft::transport::{PeerTls, TransportConfig};
use es_raft::NodeId;

use crate::limits::{
    CLUSTER_NODES_MAX, PRODUCE_TIMEOUT_MS_DEFAULT, PRODUCE_TIMEOUT_MS_MAX, RAFT_ELECTION_TIMEOUT_MS_DEFAULT,
    RAFT_ELECTION_TIMEOUT_MS_MAX, RAFT_ENTRY_BYTES_MAX_DEFAULT, RAFT_HEARTBEAT_COALESCE_US_MAX,
    RAFT_HEARTBEAT_MS_DEFAULT, RAFT_INFLIGHT_SHARD_BYTES_LIMIT, RAFT_INFLIGHT_SHARD_BYTES_MIN,
    RAFT_PROPOSALS_IN_FLIGHT_DEFAULT, RAFT_PROPOSALS_IN_FLIGHT_MAX, REPLICA_LAG_MS_DEFAULT,
    REPLICA_LAG_MS_MAX,
};
use crate::operate::config_check::{in_range, is_host_port};

const CLUSTER: &str = "Cluster";

/// `--peers 1=host:port,2=host:port,...`: every node's advertised raft
/// address by node id, this node's included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peers(pub BTreeMap<NodeId, String>);

impl std::str::FromStr for Peers {
    type Err = String;
    fn from_str(s: &str) -> Result<Peers, String> {
        let mut peers = BTreeMap::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (id, addr) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not ID=HOST:PORT"))?;
            let id: NodeId = id
                .trim()
                .parse()
                .map_err(|_| format!("{item:?}: the node id must be a whole number"))?;
            if id == 0 {
                return Err(format!("{item:?}: node ids start at 1"));
            }
            let addr = addr.trim();
            if !is_host_port(addr) {
                return Err(format!("{item:?}: the address must be HOST:PORT"));
            }
            if peers.insert(id, addr.to_string()).is_some() {
                return Err(format!("node {id} is given twice"));
            }
        }
        if peers.is_empty() {
            return Err("no node: give ID=HOST:PORT for every node, this one included".into());
        }
        Ok(Peers(peers))
    }
}

impl std::fmt::Display for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self.0.iter().map(|(id, a)| format!("{id}={a}")).collect();
        f.write_str(&items.join(","))
    }
}

#[derive(Args, Debug, Clone)]
pub struct ClusterConfig {
    /// Every node of the cluster as ID=HOST:PORT, comma-separated, this one
    /// included: the address each node's raft listener is reached at. The
    /// same list on every node. Without it the broker runs alone
    /// (standalone).
    #[arg(long, env = "ES_PEERS", help_heading = CLUSTER, value_name = "ID=HOST:PORT,...")]
    pub peers: Option<Peers>,
    /// Address this node's raft listener binds (cluster mode): where its
    /// peers connect. May differ from its own `--peers` entry (behind a
    /// proxy or NAT).
    #[arg(long, env = "ES_RAFT_ADDR", help_heading = CLUSTER, value_name = "ADDR")]
    pub raft_addr: Option<SocketAddr>,
    /// HOST:PORT of this node's HTTP API that other nodes give clients
    /// (in `not_leader` answers and `GET /v1/cluster`). Default:
    /// `--http-addr`.
    #[arg(long, env = "ES_ADVERTISED_HTTP_ADDR", help_heading = CLUSTER, value_name = "HOST:PORT")]
    pub advertised_http_addr: Option<String>,
    /// HOST:PORT of this node's binary protocol that other nodes give
    /// clients. Default: `--binary-addr`.
    #[arg(long, env = "ES_ADVERTISED_BINARY_ADDR", help_heading = CLUSTER, value_name = "HOST:PORT")]
    pub advertised_binary_addr: Option<String>,
    /// PEM file of this node's certificate chain for the raft transport
    /// (mutual TLS between brokers): its leaf names `es-node-<id>`.
    #[arg(long, env = "ES_PEER_CERT", help_heading = CLUSTER, value_name = "FILE")]
    pub peer_cert: Option<PathBuf>,
    /// PEM file of the private key of `--peer-cert`'s leaf.
    #[arg(long, env = "ES_PEER_KEY", help_heading = CLUSTER, value_name = "FILE")]
    pub peer_key: Option<PathBuf>,
    /// PEM file of the CA that signs every node's `--peer-cert`.
    #[arg(long, env = "ES_PEER_CA", help_heading = CLUSTER, value_name = "FILE")]
    pub peer_ca: Option<PathBuf>,
    /// Run the raft transport in plaintext, without `--peer-cert`,
    /// `--peer-key` and `--peer-ca` (a warning is logged): anyone who can
    /// reach `--raft-addr` can join the cluster's traffic.
    #[arg(long, env = "ES_RAFT_INSECURE", help_heading = CLUSTER)]
    pub raft_insecure: bool,
    /// Milliseconds between a Raft leader's heartbeats to its followers.
    #[arg(long, env = "ES_RAFT_HEARTBEAT_MS", default_value_t = RAFT_HEARTBEAT_MS_DEFAULT, help_heading = CLUSTER, value_name = "MS")]
    pub raft_heartbeat_ms: u64,
    /// Milliseconds a follower waits without hearing from a leader before
    /// it stands for election (randomized up to twice this).
    #[arg(long, env = "ES_RAFT_ELECTION_TIMEOUT_MS", default_value_t = RAFT_ELECTION_TIMEOUT_MS_DEFAULT, help_heading = CLUSTER, value_name = "MS")]
    pub raft_election_timeout_ms: u64,
    /// Milliseconds a Raft request to a peer (an append, a vote) is given
    /// before it is sent again, at least; above `--raft-heartbeat-ms`.
    #[arg(long, env = "ES_RAFT_RPC_TIMEOUT_MS", default_value_t = es_raft::limits::RPC_TIMEOUT_MS_DEFAULT, help_heading = CLUSTER, value_name = "MS")]
    pub raft_rpc_timeout_ms: u64,
    /// Microseconds the first heartbeat queued for a peer waits for the
    /// heartbeats of other partitions, which then travel in one frame.
    #[arg(long, env = "ES_RAFT_HEARTBEAT_COALESCE_US", default_value_t = es_raft::limits::HEARTBEAT_COALESCE_US_DEFAULT, help_heading = CLUSTER, value_name = "US")]
    pub raft_heartbeat_coalesce_us: u64,
    /// Largest AppendEntries sent to a follower with more than one entry,
    /// in bytes; one entry always goes.
    #[arg(long, env = "ES_RAFT_APPEND_BYTES_MAX", default_value_t = es_raft::limits::APPEND_BYTES_MAX_DEFAULT, help_heading = CLUSTER, value_name = "BYTES")]
    pub raft_append_bytes_max: usize,
    /// Bytes of produced batches a partition's leader gathers into one
    /// Raft entry (a larger batch goes alone).
    #[arg(long, env = "ES_RAFT_ENTRY_BYTES_MAX", default_value_t = RAFT_ENTRY_BYTES_MAX_DEFAULT, help_heading = CLUSTER, value_name = "BYTES")]
    pub raft_entry_bytes_max: usize,
    /// Raft entries of one partition being replicated at once; produces
    /// that arrive meanwhile join the next entry.
    #[arg(long, env = "ES_RAFT_PROPOSALS_IN_FLIGHT", default_value_t = RAFT_PROPOSALS_IN_FLIGHT_DEFAULT, help_heading = CLUSTER, value_name = "N")]
    pub raft_proposals_in_flight: usize,
    /// Bytes of raft frames each shard sends or receives at once; more
    /// wait for room.
    #[arg(long, env = "ES_RAFT_INFLIGHT_SHARD_BYTES", default_value_t = es_raft::limits::INFLIGHT_SHARD_BYTES_DEFAULT, help_heading = CLUSTER, value_name = "BYTES")]
    pub raft_inflight_shard_bytes: usize,
    /// Bytes of stored records per chunk when a leader streams a snapshot
    /// to a follower behind its purge point (a larger batch goes alone).
    #[arg(long, env = "ES_RAFT_SNAPSHOT_CHUNK_BYTES", default_value_t = es_raft::limits::SNAPSHOT_CHUNK_BYTES_DEFAULT, help_heading = CLUSTER, value_name = "BYTES")]
    pub raft_snapshot_chunk_bytes: usize,
    /// Bytes per second a leader streams a snapshot to each follower, so
    /// producers are not starved; 0 is unlimited.
    #[arg(long, env = "ES_RAFT_RECOVERY_BYTES_PER_SEC", default_value_t = es_raft::limits::RECOVERY_BYTES_PER_SEC_DEFAULT, help_heading = CLUSTER, value_name = "BYTES")]
    pub raft_recovery_bytes_per_sec: u64,
    /// Milliseconds a follower may stay behind its leader's last entry and
    /// still count as in sync (`in_sync_replicas`).
    #[arg(long, env = "ES_REPLICA_LAG_MS", default_value_t = REPLICA_LAG_MS_DEFAULT, help_heading = CLUSTER, value_name = "MS")]
    pub replica_lag_ms: u64,
    /// Milliseconds a produce waits for its records to be committed by a
    /// majority; then it is answered `outcome_unknown`.
    #[arg(long, env = "ES_PRODUCE_TIMEOUT_MS", default_value_t = PRODUCE_TIMEOUT_MS_DEFAULT, help_heading = CLUSTER, value_name = "MS")]
    pub produce_timeout_ms: u64,
    /// Replicas of a topic created without `replication_factor`. Default:
    /// 3, or the node count if smaller.
    #[arg(long, env = "ES_DEFAULT_REPLICATION_FACTOR", help_heading = CLUSTER, value_name = "N")]
    pub default_replication_factor: Option<u32>,
    /// The transport's settings, made at start by `resolve` (not a flag).
    #[arg(skip)]
    pub transport: Option<TransportConfig>,
    /// The cluster id `cluster.json` held at start (`None` before the
    /// controller agreed on one; not a flag).
    #[arg(skip)]
    pub cluster_id: Option<String>,
}

impl ClusterConfig {
    /// Whether this node runs in a cluster (`--peers` given).
    pub fn enabled(&self) -> bool {
        self.peers.is_some()
    }

    /// Checks the flags against each other. `node_id` is `--node-id`.
    pub fn validate(&self, node_id: NodeId) -> Result<(), String> {
        let Some(peers) = &self.peers else {
            let given = [
                ("--raft-addr", self.raft_addr.is_some()),
                ("--advertised-http-addr", self.advertised_http_addr.is_some()),
                ("--advertised-binary-addr", self.advertised_binary_addr.is_some()),
                ("--peer-cert", self.peer_cert.is_some()),
                ("--peer-key", self.peer_key.is_some()),
                ("--peer-ca", self.peer_ca.is_some()),
                ("--raft-insecure", self.raft_insecure),
                (
                    "--default-replication-factor",
                    self.default_replication_factor.is_some(),
                ),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
                return Err(format!(
                    "{flag} is a cluster flag, but --peers is not given: give --peers to run a cluster \
                     node, or leave {flag} out to run standalone"
                ));
            }
            return Ok(());
        };
        if peers.0.len() > CLUSTER_NODES_MAX {
            return Err(format!(
                "--peers lists {} nodes; a cluster has at most {CLUSTER_NODES_MAX} (every node votes)",
                peers.0.len()
            ));
        }
        if !peers.0.contains_key(&node_id) {
            return Err(format!(
                "--peers must list this node (--node-id {node_id}) with the address its peers reach it at; \
                 it lists nodes {:?}",
                peers.0.keys().collect::<Vec<_>>()
            ));
        }
        if self.raft_addr.is_none() {
            return Err("--raft-addr is needed in cluster mode (--peers): the address this node's raft listener binds".into());
        }
        let tls = [&self.peer_cert, &self.peer_key, &self.peer_ca];
        let given = tls.iter().filter(|f| f.is_some()).count();
        if given != 0 && given != 3 {
            return Err(
                "--peer-cert, --peer-key and --peer-ca go together: give all three for mutual TLS between brokers"
                    .into(),
            );
        }
        if given == 3 && self.raft_insecure {
            return Err("--raft-insecure with --peer-cert/--peer-key/--peer-ca: choose one".into());
        }
        if given == 0 && !self.raft_insecure {
            return Err(
                "cluster mode needs mutual TLS between brokers: give --peer-cert, --peer-key and --peer-ca, \
                 or --raft-insecure to run the raft transport in plaintext (docs/cluster.md)"
                    .into(),
            );
        }
        for (flag, a) in [
            ("--advertised-http-addr", &self.advertised_http_addr),
            ("--advertised-binary-addr", &self.advertised_binary_addr),
        ] {
            if let Some(a) = a.as_deref().filter(|a| !is_host_port(a)) {
                return Err(format!("{flag} {a:?} must be HOST:PORT"));
            }
        }
        in_range(
            "--raft-heartbeat-ms",
            self.raft_heartbeat_ms,
            1,
            RAFT_ELECTION_TIMEOUT_MS_MAX,
        )?;
        in_range(
            "--raft-election-timeout-ms",
            self.raft_election_timeout_ms,
            1,
            RAFT_ELECTION_TIMEOUT_MS_MAX,
        )?;
        if self.raft_heartbeat_ms >= self.raft_election_timeout_ms {
            return Err(format!(
                "--raft-heartbeat-ms ({}) must be below --raft-election-timeout-ms ({}): followers would \
                 stand for election between heartbeats",
                self.raft_heartbeat_ms, self.raft_election_timeout_ms
            ));
        }
        in_range(
            "--raft-rpc-timeout-ms",
            self.raft_rpc_timeout_ms,
            1,
            RAFT_ELECTION_TIMEOUT_MS_MAX,
        )?;
        if self.raft_rpc_timeout_ms <= self.raft_heartbeat_ms {
            return Err(format!(
                "--raft-rpc-timeout-ms ({}) must be above --raft-heartbeat-ms ({}): an append whose round \
                 trip takes a heartbeat would time out and be sent again, and nothing would commit",
                self.raft_rpc_timeout_ms, self.raft_heartbeat_ms
            ));
        }
        in_range(
            "--raft-heartbeat-coalesce-us",
            self.raft_heartbeat_coalesce_us,
            0,
            RAFT_HEARTBEAT_COALESCE_US_MAX,
        )?;
        let frame = es_raft::limits::FRAME_BYTES_MAX as u64;
        in_range(
            "--raft-append-bytes-max",
            self.raft_append_bytes_max as u64,
            1,
            frame,
        )?;
        in_range(
            "--raft-entry-bytes-max",
            self.raft_entry_bytes_max as u64,
            1,
            es_format::limits::BATCH_BYTES_MAX as u64,
        )?;
        in_range(
            "--raft-proposals-in-flight",
            self.raft_proposals_in_flight as u64,
            1,
            RAFT_PROPOSALS_IN_FLIGHT_MAX as u64,
        )?;
        in_range(
            "--raft-inflight-shard-bytes",
            self.raft_inflight_shard_bytes as u64,
            RAFT_INFLIGHT_SHARD_BYTES_MIN as u64,
            RAFT_INFLIGHT_SHARD_BYTES_LIMIT as u64,
        )
        .map_err(|e| format!("{e} (at least a largest raft frame)"))?;
        in_range(
            "--raft-snapshot-chunk-bytes",
            self.raft_snapshot_chunk_bytes as u64,
            1,
            es_raft::limits::SNAPSHOT_CHUNK_BYTES_MAX as u64,
        )?;
        in_range("--replica-lag-ms", self.replica_lag_ms, 1, REPLICA_LAG_MS_MAX)?;
        in_range(
            "--produce-timeout-ms",
            self.produce_timeout_ms,
            1,
            PRODUCE_TIMEOUT_MS_MAX,
        )?;
        if let Some(rf) = self.default_replication_factor {
            in_range("--default-replication-factor", rf as u64, 1, peers.0.len() as u64)
                .map_err(|e| format!("{e} (at most the nodes in --peers)"))?;
        }
        Ok(())
    }

    /// Resolves `--peers` and reads the peer TLS files: the transport's
    /// settings, kept in `self.transport`. On the main thread, before the
    /// shards run (resolving names and reading files block).
    pub fn resolve(&mut self, node_id: NodeId, cluster_hash: u64) -> Result<(), String> {
        let Some(peers) = &self.peers else {
            return Ok(());
        };
        let mut addrs = BTreeMap::new();
        for (&id, a) in &peers.0 {
            // blocking-ok: main thread, before the shards run
            let resolved = a
                .to_socket_addrs()
                .map_err(|e| format!("--peers: node {id} at {a}: {e}"))?
                .next()
                .ok_or_else(|| format!("--peers: node {id} at {a}: the name resolves to no address"))?;
            addrs.insert(id, resolved);
        }
        let mut t = TransportConfig::new(node_id, addrs, cluster_hash);
        if let (Some(cert), Some(key), Some(ca)) = (&self.peer_cert, &self.peer_key, &self.peer_ca) {
            t.tls = Some(Arc::new(PeerTls::from_pem_files(cert, key, ca)?));
        }
        t.heartbeat_coalesce = Duration::from_micros(self.raft_heartbeat_coalesce_us);
        t.append_bytes_max = self.raft_append_bytes_max;
        t.inflight_shard_bytes = self.raft_inflight_shard_bytes;
        t.rpc_timeout = Duration::from_millis(self.raft_rpc_timeout_ms);
        self.transport = Some(t);
        Ok(())
    }

    /// The node ids of `--peers` (empty when standalone).
    pub fn node_ids(&self) -> Vec<NodeId> {
        self.peers
            .as_ref()
            .map_or_else(Vec::new, |p| p.0.keys().copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::operate::config::Config;
    use clap::Parser;

    const CLUSTER: &[&str] = &[
        "es-broker",
        "--node-id",
        "2",
        "--peers",
        "1=127.0.0.1:7001,2=127.0.0.1:7002,3=localhost:7003",
        "--raft-addr",
        "127.0.0.1:7002",
        "--raft-insecure",
    ];

    fn validate(extra: &[&str]) -> Result<(), String> {
        let mut argv = CLUSTER.to_vec();
        argv.extend_from_slice(extra);
        Config::try_parse_from(argv).expect("parses").validate()
    }

    fn without(flag: &str) -> Vec<&'static str> {
        let mut argv = CLUSTER.to_vec();
        let at = argv.iter().position(|a| *a == flag).expect("flag");
        let takes_value = flag != "--raft-insecure";
        argv.drain(at..at + 1 + takes_value as usize);
        argv
    }

    #[test]
    fn a_cluster_node_is_in_its_peers_and_listens_for_them() {
        assert_eq!(validate(&[]), Ok(()));
        let c = Config::try_parse_from(CLUSTER).unwrap();
        let peers = c.cluster.peers.as_ref().unwrap();
        assert_eq!(peers.0.len(), 3);
        assert_eq!(
            peers.to_string(),
            "1=127.0.0.1:7001,2=127.0.0.1:7002,3=localhost:7003"
        );
        assert_eq!(c.cluster.raft_heartbeat_ms, 150);
        assert_eq!(c.cluster.raft_election_timeout_ms, 1500);

        let mut argv = CLUSTER.to_vec();
        argv[2] = "4";
        let e = Config::try_parse_from(argv).unwrap().validate().unwrap_err();
        assert!(e.contains("--peers must list this node (--node-id 4)"), "{e}");
        let e = Config::try_parse_from(without("--raft-addr"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.contains("--raft-addr is needed"), "{e}");
        let e = Config::try_parse_from(without("--raft-insecure"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.contains("--peer-cert") && e.contains("--raft-insecure"), "{e}");
        let e = validate(&["--peer-cert", "c.pem"]).unwrap_err();
        assert!(e.contains("go together"), "{e}");
        let e = validate(&[
            "--peer-cert",
            "c.pem",
            "--peer-key",
            "k.pem",
            "--peer-ca",
            "ca.pem",
        ])
        .unwrap_err();
        assert!(e.contains("choose one"), "{e}");
        let e = validate(&["--raft-heartbeat-ms", "1500"]).unwrap_err();
        assert!(e.contains("--raft-heartbeat-ms (1500) must be below"), "{e}");
        let e = validate(&["--raft-rpc-timeout-ms", "150"]).unwrap_err();
        assert!(
            e.contains("--raft-rpc-timeout-ms (150) must be above --raft-heartbeat-ms (150)"),
            "{e}"
        );
        let e = validate(&["--default-replication-factor", "4"]).unwrap_err();
        assert!(e.contains("--default-replication-factor must be in 1..=3"), "{e}");
        let e = validate(&["--advertised-http-addr", "nowhere"]).unwrap_err();
        assert!(e.contains("--advertised-http-addr"), "{e}");
    }

    #[test]
    fn peers_are_id_equals_host_port() {
        for bad in ["1", "x=a:1", "0=a:1", "1=a", "1=a:1,1=b:2", "1=:5", ""] {
            assert!(
                Config::try_parse_from(["es-broker", "--peers", bad]).is_err(),
                "{bad:?} parses"
            );
        }
    }

    #[test]
    fn standalone_refuses_cluster_flags() {
        assert_eq!(Config::try_parse_from(["es-broker"]).unwrap().validate(), Ok(()));
        for extra in [
            &["--raft-addr", "127.0.0.1:7001"][..],
            &["--raft-insecure"],
            &["--peer-ca", "ca.pem"],
        ] {
            let mut argv = vec!["es-broker"];
            argv.extend_from_slice(extra);
            let e = Config::try_parse_from(argv).unwrap().validate().unwrap_err();
            assert!(e.contains(extra[0]) && e.contains("--peers is not given"), "{e}");
        }
    }
}
