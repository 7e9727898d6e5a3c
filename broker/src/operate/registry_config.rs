//! The schema registry's flags (docs/registry.md), flattened into
//! `Config`: where it listens and how large a schema it accepts.

use std::net::SocketAddr;

use clap::Args;

use crate::limits::{REGISTRY_SCHEMA_BYTES_MAX_DEFAULT, REGISTRY_SCHEMA_BYTES_MAX_LIMIT};
use crate::operate::config::{ESSENTIALS, LIMITS};

/// `--registry-addr`: an address, or `disabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryAddr(pub Option<SocketAddr>);

impl std::str::FromStr for RegistryAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<RegistryAddr, String> {
        if s == "disabled" {
            return Ok(RegistryAddr(None));
        }
        s.parse()
            .map(|a| RegistryAddr(Some(a)))
            .map_err(|e| format!("{e}: give an address such as 127.0.0.1:8081, or `disabled`"))
    }
}

impl std::fmt::Display for RegistryAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(a) => write!(f, "{a}"),
            None => f.write_str("disabled"),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct RegistryConfig {
    /// Address of the schema registry, Confluent's REST API at its root
    /// (docs/registry.md), or `disabled` for none.
    #[arg(long, env = "ES_REGISTRY_ADDR", default_value = "127.0.0.1:8081", help_heading = ESSENTIALS, value_name = "ADDR")]
    pub registry_addr: RegistryAddr,
    /// Largest schema the registry accepts, in bytes of its text; a larger
    /// one is refused with 42209 (docs/registry.md).
    #[arg(long, env = "ES_REGISTRY_SCHEMA_BYTES_MAX", default_value_t = REGISTRY_SCHEMA_BYTES_MAX_DEFAULT, help_heading = LIMITS, value_name = "BYTES")]
    pub registry_schema_bytes_max: usize,
}

impl RegistryConfig {
    pub fn validate(&self) -> Result<(), String> {
        let max = self.registry_schema_bytes_max;
        if !(1..=REGISTRY_SCHEMA_BYTES_MAX_LIMIT).contains(&max) {
            return Err(format!(
                "--registry-schema-bytes-max must be in 1..={REGISTRY_SCHEMA_BYTES_MAX_LIMIT}, got {max}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::operate::config::Config;
    use clap::Parser;

    #[test]
    fn the_registry_listens_on_8081_unless_disabled() {
        let c = Config::try_parse_from(["es-broker"]).unwrap();
        assert_eq!(
            c.registry.registry_addr.0,
            Some("127.0.0.1:8081".parse().unwrap())
        );
        assert_eq!(c.registry.registry_schema_bytes_max, 1 << 20);
        let c = Config::try_parse_from(["es-broker", "--registry-addr", "disabled"]).unwrap();
        assert_eq!(c.registry.registry_addr.0, None);
        assert_eq!(c.registry.registry_addr.to_string(), "disabled");
        assert!(Config::try_parse_from(["es-broker", "--registry-addr", "nowhere"]).is_err());
        for bad in ["0", "4194305"] {
            let c = Config::try_parse_from(["es-broker", "--registry-schema-bytes-max", bad]).unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.contains("--registry-schema-bytes-max"), "{e}");
        }
    }
}
