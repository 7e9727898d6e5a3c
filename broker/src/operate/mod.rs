//! Operator plumbing: flags (`config`, checked in `config_check`) and the
//! config file, logging, the process limits checked at start (locked
//! memory, file descriptors), the allocator, the wall clock of producer expiry, and the metrics that are
//! exported (help text and the live series of `GET /metrics`), the
//! registry's, the Kafka listener's and the cluster's flags, and the
//! signal thread (shutdown, SIGHUP reloads).

pub mod allocator;
pub mod clock;
pub mod cluster_config;
pub mod config;
pub mod config_check;
pub mod config_file;
pub mod kafka_config;
pub mod logging;
pub mod memlock;
pub mod metrics_help;
pub mod metrics_live;
pub mod nofile;
pub mod registry_config;
pub mod signals;
