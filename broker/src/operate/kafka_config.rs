//! The Kafka listener's flags (docs/kafka.md), flattened into
//! `Config`: where it listens, what Metadata tells clients to connect
//! to, and how many requests one connection has in flight.

use std::net::SocketAddr;

use clap::Args;

use crate::limits::{KAFKA_INFLIGHT_REQUESTS_DEFAULT, KAFKA_INFLIGHT_REQUESTS_LIMIT};

const KAFKA: &str = "Kafka protocol";

/// `--kafka-addr`: an address, or `disabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaAddr(pub Option<SocketAddr>);

impl std::str::FromStr for KafkaAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<KafkaAddr, String> {
        if s == "disabled" {
            return Ok(KafkaAddr(None));
        }
        s.parse()
            .map(|a| KafkaAddr(Some(a)))
            .map_err(|e| format!("{e}: give HOST:PORT, or `disabled`"))
    }
}

impl std::fmt::Display for KafkaAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("disabled"),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct KafkaConfig {
    /// Address of the Kafka wire protocol (docs/kafka.md), on which Kafka
    /// clients (librdkafka, kcat, kafka-python, Java) produce, consume and
    /// join groups; `disabled` turns it off.
    #[arg(long, env = "ES_KAFKA_ADDR", default_value = "127.0.0.1:9092", help_heading = KAFKA, value_name = "ADDR")]
    pub kafka_addr: KafkaAddr,
    /// HOST:PORT that Metadata and FindCoordinator tell Kafka clients to
    /// connect to (behind NAT or a container's port mapping). Default:
    /// `--kafka-addr`.
    #[arg(long, env = "ES_KAFKA_ADVERTISED_ADDR", help_heading = KAFKA, value_name = "HOST:PORT")]
    pub kafka_advertised_addr: Option<String>,
    /// Requests one Kafka connection has in flight at once; the broker
    /// stops reading a connection that has this many unanswered. Answers
    /// go out in request order.
    #[arg(long, env = "ES_KAFKA_REQUESTS_INFLIGHT_MAX", default_value_t = KAFKA_INFLIGHT_REQUESTS_DEFAULT, help_heading = KAFKA, value_name = "N")]
    pub kafka_requests_inflight_max: usize,
    /// The cluster id Metadata reports: read from `<data-dir>/cluster.json`
    /// at start, made there at the first (not a flag).
    #[arg(skip)]
    pub cluster_id: String,
}

/// The cluster id in `<data-dir>/cluster.json`, made and written (and
/// fsynced) there at the first start. Runs on the main thread, before
/// the shards.
pub fn cluster_id(data_dir: &std::path::Path) -> Result<String, String> {
    let path = data_dir.join("cluster.json");
    let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    // blocking-ok: main thread, before the shards run
    match std::fs::read(&path) {
        Ok(bytes) => {
            let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| what(&e))?;
            return v
                .get("cluster_id")
                .and_then(|c| c.as_str())
                .map(String::from)
                .ok_or_else(|| what(&"no string \"cluster_id\""));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(what(&e)),
    }
    let mut raw = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw)
        .map_err(|_| what(&"no randomness"))?;
    let id = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, raw);
    let body = serde_json::json!({ "cluster_id": id }).to_string();
    let tmp = data_dir.join("cluster.json.tmp");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        // blocking-ok: main thread, before the shards run
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body.as_bytes())?;
        f.sync_all()?;
        // blocking-ok: main thread, before the shards run
        std::fs::rename(&tmp, &path)?;
        // blocking-ok: main thread, before the shards run
        std::fs::File::open(data_dir)?.sync_all()
    };
    write().map_err(|e| what(&e))?;
    Ok(id)
}

impl KafkaConfig {
    /// The host and port Metadata reports.
    pub fn advertised(&self) -> Option<(String, i32)> {
        let given = match (&self.kafka_advertised_addr, self.kafka_addr.0) {
            (Some(a), _) => a.clone(),
            (None, Some(a)) => a.to_string(),
            (None, None) => return None,
        };
        let (host, port) = given.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Some((host.to_string(), port.parse().ok()?))
    }

    pub fn validate(&self) -> Result<(), String> {
        if !(1..=KAFKA_INFLIGHT_REQUESTS_LIMIT).contains(&self.kafka_requests_inflight_max) {
            return Err(format!(
                "--kafka-requests-inflight-max must be in 1..={KAFKA_INFLIGHT_REQUESTS_LIMIT}, got {}",
                self.kafka_requests_inflight_max
            ));
        }
        if let Some(a) = &self.kafka_advertised_addr {
            let port = a.rsplit_once(':').and_then(|(h, p)| (!h.is_empty()).then_some(p));
            if port.and_then(|p| p.parse::<u16>().ok()).is_none() {
                return Err(format!("--kafka-advertised-addr {a:?} must be HOST:PORT"));
            }
        }
        Ok(())
    }
}
