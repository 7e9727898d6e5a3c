//! Checking the broker's flags (`Config::validate`): each value in its
//! range, and the relations between flags that must hold; the checks the
//! registry's, the Kafka listener's and the cluster's flags share.

use crate::auth::AuthMode;
use crate::limits::{
    CLEANUP_INTERVAL_MS_MAX, CONNECTIONS_MAX_LIMIT, CONNECTIONS_MAX_MIN, CONNECTION_IDLE_MS_MAX,
    FRAME_BYTES_MAX_MIN, FRAME_STALL_MS_MAX, GROUPS_MAX_LIMIT, GROUP_OFFSETS_RETENTION_MS_MAX,
    INFLIGHT_REQUESTS_MAX_LIMIT, OPEN_SEGMENTS_MAX_LIMIT, PARTITIONS_MAX_LIMIT, PRODUCER_ID_EXPIRY_MS_MAX,
    PRODUCER_ID_EXPIRY_MS_MIN, QUOTA_BURST_MS_MAX, QUOTA_BYTES_PER_SEC_MAX, QUOTA_THROTTLE_MAX_MS_MAX,
    REQUEST_SHARD_BYTES_LIMIT, SEGMENT_BYTES_FLAG_MIN, SHARDS_MAX, TLS_HANDSHAKE_TIMEOUT_MS_MAX,
};
use crate::operate::config::Config;

impl Config {
    /// Refuses values outside each flag's range, naming the flag and the
    /// range, and relations between flags that cannot hold.
    pub fn validate(&self) -> Result<(), String> {
        let shards = self.shards.unwrap_or_else(|| self.shard_count()) as u64;
        in_range("--shards", shards, 1, SHARDS_MAX as u64)?;
        in_range(
            "--frame-bytes-max",
            self.frame_bytes_max as u64,
            FRAME_BYTES_MAX_MIN as u64,
            es_format::limits::BATCH_BYTES_MAX as u64,
        )?;
        in_range(
            "--inflight-requests-max",
            self.inflight_requests_max as u64,
            1,
            INFLIGHT_REQUESTS_MAX_LIMIT as u64,
        )?;
        in_range(
            "--request-shard-bytes",
            self.request_shard_bytes as u64,
            1,
            REQUEST_SHARD_BYTES_LIMIT as u64,
        )?;
        if self.request_shard_bytes < self.frame_bytes_max {
            return Err(format!(
                "--request-shard-bytes ({}) must be at least --frame-bytes-max ({}): a largest frame must fit",
                self.request_shard_bytes, self.frame_bytes_max
            ));
        }
        in_range(
            "--response-connection-bytes",
            self.response_connection_bytes() as u64,
            self.fetch_bytes_max as u64,
            REQUEST_SHARD_BYTES_LIMIT as u64,
        )
        .map_err(|e| format!("{e} (at least --fetch-bytes-max: a largest fetch must fit)"))?;
        in_range("--frame-stall-ms", self.frame_stall_ms, 1, FRAME_STALL_MS_MAX)?;
        in_range(
            "--connection-idle-ms",
            self.connection_idle_ms,
            1,
            CONNECTION_IDLE_MS_MAX,
        )?;
        in_range(
            "--http-body-bytes-max",
            self.http_body_bytes_max as u64,
            1,
            es_format::limits::BATCH_BYTES_MAX as u64,
        )?;
        in_range(
            "--fetch-bytes-max",
            self.fetch_bytes_max as u64,
            1,
            es_format::limits::BATCH_BYTES_MAX as u64,
        )?;
        in_range(
            "--connections-max",
            self.connections_max as u64,
            CONNECTIONS_MAX_MIN as u64,
            CONNECTIONS_MAX_LIMIT as u64,
        )?;
        in_range("--groups-max", self.groups_max as u64, 1, GROUPS_MAX_LIMIT as u64)?;
        in_range(
            "--group-offsets-retention-ms",
            self.group_offsets_retention_ms,
            1,
            GROUP_OFFSETS_RETENTION_MS_MAX,
        )?;
        in_range(
            "--producer-id-expiry-ms",
            self.producer_id_expiry_ms,
            PRODUCER_ID_EXPIRY_MS_MIN,
            PRODUCER_ID_EXPIRY_MS_MAX,
        )?;
        in_range(
            "--http-connections-max",
            self.http_connections_max() as u64,
            1,
            self.connections_max as u64 - 1,
        )
        .map_err(|e| format!("{e} (below --connections-max: the binary listener gets the rest)"))?;
        in_range(
            "--open-segments-max",
            self.open_segments_max as u64,
            1,
            OPEN_SEGMENTS_MAX_LIMIT as u64,
        )?;
        in_range(
            "--partitions-max",
            self.partitions_max as u64,
            1,
            PARTITIONS_MAX_LIMIT as u64,
        )?;
        in_range(
            "--segment-bytes",
            self.segment_bytes,
            SEGMENT_BYTES_FLAG_MIN,
            es_storage::limits::SEGMENT_BYTES_MAX,
        )?;
        in_range(
            "--cleanup-interval-ms",
            self.cleanup_interval_ms,
            1,
            CLEANUP_INTERVAL_MS_MAX,
        )?;
        let slices = es_storage::limits::THREAD_SLICE_US_MIN..=es_storage::limits::THREAD_SLICE_US_MAX;
        if self.disk_thread_slice_us != 0 && !slices.contains(&self.disk_thread_slice_us) {
            return Err(format!(
                "--disk-thread-slice-us must be 0 (the kernel's default) or in {}..={}, got {}",
                slices.start(),
                slices.end(),
                self.disk_thread_slice_us
            ));
        }
        for (flag, rate) in [
            ("--quota-produce-default", self.quota_produce_default),
            ("--quota-fetch-default", self.quota_fetch_default),
        ] {
            if let Some(rate) = rate {
                in_range(flag, rate, 1, QUOTA_BYTES_PER_SEC_MAX)?;
            }
        }
        in_range("--quota-burst-ms", self.quota_burst_ms, 1, QUOTA_BURST_MS_MAX)?;
        in_range(
            "--quota-throttle-max-ms",
            self.quota_throttle_max_ms,
            1,
            QUOTA_THROTTLE_MAX_MS_MAX,
        )?;
        self.validate_tls()?;
        self.registry.validate()?;
        self.kafka.validate()?;
        self.cluster.validate(self.node_id)?;
        if self.cold_dir().starts_with(self.data_dir.join("topics")) {
            return Err("--cold-dir must not be inside <data-dir>/topics".into());
        }
        self.plaintext_guard()
    }

    /// `--auth required` on a listener that is not loopback and without TLS
    /// would send keys in clear text over the network: refused, naming the
    /// listener, unless `--allow-plaintext-auth`.
    fn plaintext_guard(&self) -> Result<(), String> {
        if self.auth != AuthMode::Required || self.allow_plaintext_auth || self.client_tls_configured() {
            return Ok(());
        }
        let registry = self.registry.registry_addr.0.map(|a| (a, "--registry-addr"));
        let kafka = self.kafka.kafka_addr.0.map(|a| (a, "--kafka-addr"));
        for (addr, flag) in [
            (self.http_addr, "--http-addr"),
            (self.binary_addr, "--binary-addr"),
        ]
        .into_iter()
        .chain(registry)
        .chain(kafka)
        {
            if !addr.ip().is_loopback() {
                return Err(format!(
                    "--auth required on {flag} {addr}, which is not loopback, without TLS: API keys would \
                     cross the network in clear text; configure TLS, listen on loopback, or pass \
                     --allow-plaintext-auth"
                ));
            }
        }
        Ok(())
    }
}

impl Config {
    /// The TLS flags: a certificate and its key together, a client CA only
    /// with them, the handshake timeout in its range.
    fn validate_tls(&self) -> Result<(), String> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => {
                return Err(
                    "--tls-cert needs --tls-key: give the private key of the certificate too \
                            (or neither, for plaintext listeners)"
                        .into(),
                )
            }
            (None, Some(_)) => {
                return Err("--tls-key needs --tls-cert: give the certificate chain too \
                            (or neither, for plaintext listeners)"
                    .into())
            }
            _ => {}
        }
        if self.tls_client_ca.is_some() && self.tls_cert.is_none() {
            return Err(
                "--tls-client-ca needs --tls-cert and --tls-key: client certificates are \
                        checked in a TLS handshake"
                    .into(),
            );
        }
        in_range(
            "--tls-handshake-timeout-ms",
            self.tls_handshake_timeout_ms,
            1,
            TLS_HANDSHAKE_TIMEOUT_MS_MAX,
        )
    }
}

/// `Err` naming `flag`, its allowed range and the value given, unless
/// `lo <= value <= hi`.
pub(crate) fn in_range(flag: &str, value: u64, lo: u64, hi: u64) -> Result<(), String> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(format!("{flag} must be in {lo}..={hi}, got {value}"))
    }
}

/// Whether `a` is `HOST:PORT`: a host, then a port number.
pub(crate) fn is_host_port(a: &str) -> bool {
    let port = a.rsplit_once(':').and_then(|(h, p)| (!h.is_empty()).then_some(p));
    port.and_then(|p| p.parse::<u16>().ok()).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn validate(args: &[&str]) -> Result<(), String> {
        let mut argv = vec!["es-broker"];
        argv.extend_from_slice(args);
        Config::try_parse_from(argv).expect("parses").validate()
    }

    #[test]
    fn the_request_budget_holds_a_largest_frame() {
        assert!(validate(&[]).is_ok(), "the defaults");
        let e = validate(&["--frame-bytes-max", "2097152", "--request-shard-bytes", "1048576"]).unwrap_err();
        assert!(
            e.contains("--request-shard-bytes") && e.contains("--frame-bytes-max"),
            "{e}"
        );
        assert!(validate(&["--frame-bytes-max", "1048576", "--request-shard-bytes", "1048576"]).is_ok());
    }

    #[test]
    fn a_connections_budget_holds_a_largest_fetch() {
        let e = validate(&[
            "--fetch-bytes-max",
            "2097152",
            "--response-connection-bytes",
            "1048576",
        ])
        .unwrap_err();
        assert!(
            e.contains("--response-connection-bytes") && e.contains("--fetch-bytes-max"),
            "{e}"
        );
        let c = Config::try_parse_from(["es-broker", "--fetch-bytes-max", "1048576"]).unwrap();
        assert_eq!(c.response_connection_bytes(), 2 << 20, "twice --fetch-bytes-max");
    }

    #[test]
    fn each_listener_has_a_share_of_the_connections() {
        let c = Config::try_parse_from(["es-broker", "--connections-max", "1000"]).unwrap();
        assert_eq!((c.http_connections_max(), c.binary_connections_max()), (500, 500));
        let c = Config::try_parse_from([
            "es-broker",
            "--connections-max",
            "1000",
            "--http-connections-max",
            "100",
        ])
        .unwrap();
        assert_eq!((c.http_connections_max(), c.binary_connections_max()), (100, 900));
        for bad in [
            &["--connections-max", "1"][..],
            &["--connections-max", "10", "--http-connections-max", "10"],
            &["--http-connections-max", "0"],
        ] {
            let e = validate(bad).unwrap_err();
            assert!(e.contains("connections-max"), "{e}");
        }
        assert!(validate(&["--connections-max", "2"]).is_ok());
    }

    #[test]
    fn quota_flags_are_in_their_ranges() {
        let c = Config::try_parse_from(["es-broker"]).unwrap();
        let q = c.quotas();
        assert_eq!((q.produce_default, q.fetch_default), (None, None), "unlimited");
        assert_eq!((q.burst_ms, q.throttle_max_ms), (1000, 30_000));
        for bad in [
            &["--quota-produce-default", "0"][..],
            &["--quota-fetch-default", "1099511627777"],
            &["--quota-burst-ms", "0"],
            &["--quota-burst-ms", "60001"],
            &["--quota-throttle-max-ms", "0"],
        ] {
            let e = validate(bad).unwrap_err();
            assert!(e.contains(bad[0]), "{e}");
        }
        assert!(validate(&[
            "--quota-produce-default",
            "1",
            "--quota-fetch-default",
            "1099511627776"
        ])
        .is_ok());
    }

    #[test]
    fn auth_on_a_network_address_needs_tls_or_the_override() {
        assert!(validate(&["--auth", "required"]).is_ok(), "loopback");
        let e = validate(&["--auth", "required", "--http-addr", "0.0.0.0:8080"]).unwrap_err();
        assert!(
            e.contains("--http-addr 0.0.0.0:8080") && e.contains("--allow-plaintext-auth"),
            "{e}"
        );
        let e = validate(&["--auth", "required", "--binary-addr", "10.0.0.1:9090"]).unwrap_err();
        assert!(e.contains("--binary-addr"), "{e}");
        let e = validate(&["--auth", "required", "--registry-addr", "0.0.0.0:8081"]).unwrap_err();
        assert!(e.contains("--registry-addr 0.0.0.0:8081"), "{e}");
        assert!(validate(&["--auth", "required", "--registry-addr", "disabled"]).is_ok());
        assert!(validate(&[
            "--auth",
            "required",
            "--http-addr",
            "0.0.0.0:8080",
            "--allow-plaintext-auth"
        ])
        .is_ok());
        assert!(
            validate(&["--http-addr", "0.0.0.0:8080"]).is_ok(),
            "auth disabled"
        );
        assert!(
            validate(&[
                "--auth",
                "required",
                "--http-addr",
                "0.0.0.0:8080",
                "--tls-cert",
                "c.pem",
                "--tls-key",
                "k.pem"
            ])
            .is_ok(),
            "TLS carries the keys"
        );
    }

    #[test]
    fn a_tls_certificate_comes_with_its_key() {
        assert!(validate(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]).is_ok());
        let e = validate(&["--tls-cert", "c.pem"]).unwrap_err();
        assert!(e.contains("--tls-cert needs --tls-key"), "{e}");
        let e = validate(&["--tls-key", "k.pem"]).unwrap_err();
        assert!(e.contains("--tls-key needs --tls-cert"), "{e}");
        let e = validate(&["--tls-client-ca", "ca.pem"]).unwrap_err();
        assert!(e.contains("--tls-client-ca needs --tls-cert"), "{e}");
        for bad in ["0", "60001"] {
            let e = validate(&["--tls-handshake-timeout-ms", bad]).unwrap_err();
            assert!(
                e.contains("--tls-handshake-timeout-ms must be in 1..=60000"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_disk_thread_slice_is_one_linux_grants_or_none() {
        for ok in ["0", "100", "2000", "100000"] {
            assert!(validate(&["--disk-thread-slice-us", ok]).is_ok(), "{ok}");
        }
        for bad in ["1", "99", "100001"] {
            let e = validate(&["--disk-thread-slice-us", bad]).unwrap_err();
            assert!(e.contains("--disk-thread-slice-us"), "{e}");
        }
    }
}
