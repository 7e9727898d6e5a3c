//! The Kafka listener's flags (docs/kafka.md), flattened into
//! `Config`: where it listens, what Metadata tells clients to connect
//! to, and how many requests one connection has in flight.

use std::net::SocketAddr;

use clap::Args;

use crate::limits::{KAFKA_INFLIGHT_REQUESTS_DEFAULT, KAFKA_INFLIGHT_REQUESTS_LIMIT};
use crate::operate::config_check::is_host_port;

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
    /// at start (cluster/identity.rs), made there at the first (not a flag).
    #[arg(skip)]
    pub cluster_id: String,
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
        if let Some(a) = self.kafka_advertised_addr.as_deref().filter(|a| !is_host_port(a)) {
            return Err(format!("--kafka-advertised-addr {a:?} must be HOST:PORT"));
        }
        Ok(())
    }
}
