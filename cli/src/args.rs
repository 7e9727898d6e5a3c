//! The command line: global flags, commands and their flags (clap derive).
//! docs/cli.md documents every one.

use clap::{Args, Parser, Subcommand};

use crate::config_value::ConfigPair;

/// The default broker address: es-broker's default `--binary-addr`.
pub const BROKER_DEFAULT: &str = "127.0.0.1:9090";

#[derive(Parser, Debug)]
#[command(
    name = "es",
    version,
    about = "es command-line client: topics, produce and consume over the binary protocol",
    after_help = "Exit codes: 0 success, 1 broker or usage error (with a message on stderr), 2 bad flags."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Broker address, host:port of its binary protocol listener (es-broker --binary-addr).
    #[arg(long, env = "ES_BROKER", default_value = BROKER_DEFAULT, global = true, help_heading = "Global options")]
    pub broker: String,
    /// Output for machines: one JSON object per line on stdout (default: aligned tables for people).
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// API key sent in the handshake. Reserved for authentication: the broker ignores it today.
    #[arg(
        long,
        env = "ES_API_KEY",
        hide_env_values = true,
        global = true,
        help_heading = "Global options"
    )]
    pub api_key: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create, list, describe, configure and delete topics.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Produce records read from stdin, one per line.
    Produce(ProduceArgs),
    /// Print records of a topic.
    Consume(ConsumeArgs),
}

#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        /// Topic name: 1-249 characters of [A-Za-z0-9._-], not "." or "..".
        name: String,
        /// Number of partitions (1 to 1024).
        #[arg(long)]
        partitions: u32,
        /// Replication factor (1 on a single broker).
        #[arg(long)]
        replication_factor: Option<u32>,
        /// A topic config entry, key=value (repeatable), e.g. --config segment_bytes=1048576.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<ConfigPair>,
    },
    /// List topics with their partition counts.
    List,
    /// Show a topic's partitions (log start offset, high watermark, leader, replicas) and config.
    Describe {
        /// Topic name.
        name: String,
    },
    /// Delete a topic and all its records.
    Delete {
        /// Topic name.
        name: String,
    },
    /// Change a topic's config: only the keys given change; key=null clears one.
    Config {
        /// Topic name.
        name: String,
        /// key=value entries; values that parse as integers are sent as integers.
        #[arg(value_name = "KEY=VALUE", required = true)]
        entries: Vec<ConfigPair>,
    },
}

#[derive(Args, Debug)]
pub struct ProduceArgs {
    /// Topic to produce to.
    pub topic: String,
    /// Key for every record (records with the same key go to the same partition).
    #[arg(long, conflicts_with = "key_separator")]
    pub key: Option<String>,
    /// Split each line at the first SEP into key and value; a line without SEP is an error.
    #[arg(long, value_name = "SEP")]
    pub key_separator: Option<String>,
    /// Partition for every record (default: the key's hash, or spread when there is no key).
    #[arg(long, value_name = "P")]
    pub partition: Option<u32>,
    /// Compress request frames with gzip.
    #[arg(long)]
    pub gzip: bool,
}

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    /// Topic to consume.
    pub topic: String,
    /// Read only this partition (default: every partition, round-robin).
    #[arg(long, value_name = "P")]
    pub partition: Option<u32>,
    /// Start at this offset (in every partition read).
    #[arg(long, value_name = "N", conflicts_with = "from_beginning")]
    pub offset: Option<u64>,
    /// Start at the log start offset (default: the high watermark, i.e. only new records).
    #[arg(long)]
    pub from_beginning: bool,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub max: Option<u64>,
    /// Keep waiting for new records (default: stop once caught up with every partition).
    #[arg(long)]
    pub follow: bool,
    /// Print the key, a tab, then the value (a record without a key prints "null" as its key).
    #[arg(long)]
    pub print_key: bool,
}
