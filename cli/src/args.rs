//! The command line: global flags, commands and their flags (clap derive).
//! docs/cli.md documents every one.

use clap::{ArgGroup, Args, Parser, Subcommand};

use crate::config_value::ConfigPair;

/// The default broker address: es-broker's default `--binary-addr`.
pub const BROKER_DEFAULT: &str = "127.0.0.1:9090";

#[derive(Parser, Debug)]
#[command(
    name = "es",
    version,
    about = "es command-line client: topics, produce, consume and consumer groups over the binary protocol",
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
    /// Broker address, host:port of its binary protocol listener (es-broker --binary-addr). For a cluster, several: comma-separated or the flag repeated; the first that takes a connection is used, and requests follow the cluster to a partition's leader.
    #[arg(
        long,
        env = "ES_BROKER",
        default_value = BROKER_DEFAULT,
        value_delimiter = ',',
        global = true,
        help_heading = "Global options"
    )]
    pub broker: Vec<String>,
    /// Output for machines: one JSON object per line on stdout (default: aligned tables for people).
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// API key (esk_...) sent in the handshake; needed when the broker runs with --auth required.
    #[arg(
        long,
        env = "ES_API_KEY",
        hide_env_values = true,
        global = true,
        help_heading = "Global options"
    )]
    pub api_key: Option<String>,
    /// Speak TLS to the broker (es-broker --tls-cert), trusting the system's CA certificates unless --tls-ca is given.
    #[arg(long, env = "ES_TLS", global = true, help_heading = "Global options")]
    pub tls: bool,
    /// PEM file of the CA certificates that signed the broker's certificate; implies --tls.
    #[arg(
        long,
        env = "ES_TLS_CA",
        global = true,
        value_name = "FILE",
        help_heading = "Global options"
    )]
    pub tls_ca: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create, list, describe, configure and delete topics.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Produce records read from stdin, one per line.
    Produce(ProduceArgs),
    /// Print records of a topic (alone, or as a member of a consumer group with --group).
    Consume(ConsumeArgs),
    /// List, describe, reset and delete consumer groups.
    #[command(subcommand)]
    Group(GroupCommand),
    /// Create, list, describe and revoke API keys (admin), or show your own (whoami).
    #[command(subcommand)]
    Key(KeyCommand),
    /// Register, read, check and delete schemas in the schema registry (es-broker --registry-addr).
    Schema(SchemaArgs),
    /// A cluster's nodes, controller and partitions (es-broker --peers).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Print a shell completion script, e.g. `es completions bash > ~/.local/share/bash-completion/completions/es`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Show the cluster's nodes (addresses, state, which leads the controller) and its partitions' health.
    Status,
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
    /// Show a topic's config, or change it: only the keys given change;
    /// key=null clears one.
    Config {
        /// Topic name.
        name: String,
        /// key=value entries; values that parse as integers are sent as
        /// integers. None: print the config as it is.
        #[arg(value_name = "KEY=VALUE")]
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
    /// Split each line at the first SEP into key and value; a line without SEP is an error. '\t' is a tab.
    #[arg(long, value_name = "SEP")]
    pub key_separator: Option<String>,
    /// Partition for every record (default: the key's hash, or spread when there is no key).
    #[arg(long, value_name = "P")]
    pub partition: Option<u32>,
    /// Compress request frames with gzip.
    #[arg(long)]
    pub gzip: bool,
    /// Produce without an idempotent producer. By default es gets a producer id, sends each batch to one
    /// partition with a sequence number, and on a lost connection or an `unavailable` error reconnects (up
    /// to 30 times, backing off from 100 ms to 1 s) and resends every unacknowledged batch, which the broker
    /// writes once. Without it, nothing is retried and the broker picks keyless records' partitions.
    #[arg(long)]
    pub no_idempotence: bool,
}

#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("start")
        .multiple(false)
        .args(["offset", "from_beginning", "from_time", "last"])
))]
pub struct ConsumeArgs {
    /// Topic to consume.
    pub topic: String,
    /// Read only this partition (default: every partition, round-robin).
    #[arg(long, value_name = "P")]
    pub partition: Option<u32>,
    /// Start at this offset (in every partition read).
    #[arg(long, value_name = "N")]
    pub offset: Option<u64>,
    /// Start at the log start offset (default: the high watermark, i.e. only new records). With --group:
    /// where a partition the group never committed starts.
    #[arg(long)]
    pub from_beginning: bool,
    /// Start each partition at its first record with a timestamp at or after TIME: RFC 3339
    /// (2024-05-01T12:00:00Z, 2024-05-01T14:00:00+02:00, 2024-05-01) or milliseconds since the Unix epoch.
    /// Found by a binary search that assumes timestamps grow with offsets (see docs/cli.md).
    #[arg(long, value_name = "TIME", value_parser = crate::time::parse_time)]
    pub from_time: Option<i64>,
    /// Print the last N records of each partition (from its high watermark minus N, not before its log start).
    #[arg(long, value_name = "N")]
    pub last: Option<u64>,
    /// Consume as a member of consumer group G: only the partitions the group assigns to this member,
    /// from the group's committed offsets, committing after each page is printed and on exit (Ctrl-C or
    /// SIGTERM: finish the page, commit, leave). Delivery is at-least-once: after a rebalance or a crash,
    /// records printed but not yet committed are printed again (by this member or another), never skipped.
    #[arg(long, value_name = "G", conflicts_with_all = ["partition", "offset", "from_time", "last"])]
    pub group: Option<String>,
    /// With --group: the member's session timeout; the broker drops a member silent this long
    /// (es heartbeats every third of it). 100 to 300000.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 10_000,
        requires = "group",
        value_parser = clap::value_parser!(u64).range(100..=300_000)
    )]
    pub session_timeout_ms: u64,
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

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Create an API key; the key is printed once, store it.
    #[command(after_help = "\
A grant is RESOURCE:PATTERN:NAME:OPERATIONS (repeat --grant for several):
  RESOURCE    topic, group, subject or cluster (cluster takes no pattern or name: cluster:create)
  PATTERN     literal (exact name; * means every name) or prefixed (names starting with NAME)
  OPERATIONS  read, write, create, delete, describe, alter or all, comma-separated
              (read, write, delete and alter also allow describe)

A prefix is plain bytes: `orders` also matches `orders-eu` and `ordersX`. End a
prefix with a separator, like `orders.` or `orders-`, to mean one family of names.

Examples:
  es key create orders-service --grant topic:prefixed:orders.:read,write --grant group:prefixed:orders-:read
  es key create ops --admin")]
    Create {
        /// Key name: 1-128 characters of [A-Za-z0-9._-] (a label; the id names the key).
        name: String,
        /// An admin key: may do everything, including managing keys.
        #[arg(long)]
        admin: bool,
        /// A grant, RESOURCE:PATTERN:NAME:OPS, e.g. topic:prefixed:orders.:read,write (repeatable).
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
        /// Produce quota, bytes per second per broker (e.g. 10MiB); past it answers are delayed.
        #[arg(long, value_name = "RATE")]
        produce_quota: Option<String>,
        /// Fetch quota, bytes per second per broker (e.g. 50MiB); past it fetches wait.
        #[arg(long, value_name = "RATE")]
        fetch_quota: Option<String>,
    },
    /// List every key (without secrets).
    List,
    /// Show one key: name, grants, quota, whether revoked.
    Describe {
        /// Key id (16 characters, the part after esk_).
        id: String,
    },
    /// Revoke a key: every connection using it fails on its next request.
    Revoke {
        /// Key id.
        id: String,
    },
    /// Show the key this command runs with (--api-key / ES_API_KEY).
    Whoami,
}

#[derive(Subcommand, Debug)]
pub enum GroupCommand {
    /// List consumer groups: members, generation and topics.
    List,
    /// Show a group's members, and per partition its owner, committed offset, high watermark and lag.
    Describe {
        /// Group name.
        group: String,
    },
    /// Move a group's committed offsets for a topic (the group must have no members).
    Reset(ResetArgs),
    /// Delete a group and its committed offsets (the group must have no members).
    Delete {
        /// Group name.
        group: String,
    },
}

#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("to")
        .required(true)
        .args(["to_earliest", "to_latest", "to_offset", "to_timestamp"])
))]
pub struct ResetArgs {
    /// Group name.
    pub group: String,
    /// The topic whose offsets move (every partition of it).
    #[arg(long)]
    pub topic: String,
    /// To the log start offset of each partition (re-read everything stored).
    #[arg(long)]
    pub to_earliest: bool,
    /// To the high watermark of each partition (skip everything stored).
    #[arg(long)]
    pub to_latest: bool,
    /// To offset N in each partition (clamped to the partition's log start and high watermark).
    #[arg(long, value_name = "N")]
    pub to_offset: Option<u64>,
    /// To the first record at or after MS (milliseconds since the Unix epoch) in each partition.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub to_timestamp: Option<i64>,
}

/// The schema registry's address, and the command.
#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// The schema registry's URL (es-broker --registry-addr); https:// trusts --tls-ca or the system's CAs.
    #[arg(long, env = "ES_REGISTRY", default_value = REGISTRY_DEFAULT, value_name = "URL")]
    pub registry: String,
    #[command(subcommand)]
    pub command: SchemaCommand,
}

/// The default registry URL: es-broker's default `--registry-addr`.
pub const REGISTRY_DEFAULT: &str = "http://127.0.0.1:8081";

#[derive(Subcommand, Debug)]
pub enum SchemaCommand {
    /// Register the schema in FILE under SUBJECT (its version and id are printed; a schema the subject has already keeps its id).
    Register {
        /// Subject, e.g. orders-value.
        subject: String,
        /// File holding the schema (an .avsc, a JSON Schema).
        #[arg(long, value_name = "FILE")]
        file: std::path::PathBuf,
        /// The schema's type.
        #[arg(long = "type", default_value = "AVRO", value_parser = ["AVRO", "JSON", "PROTOBUF"])]
        r#type: String,
    },
    /// Print the schema with id ID, its type and the subject versions using it.
    Get {
        /// Schema id.
        id: u32,
    },
    /// List subjects (those starting with PREFIX), each with its latest version, id, type and compatibility.
    List {
        /// Only subjects starting with this.
        prefix: Option<String>,
    },
    /// List a subject's versions with their ids and types.
    Versions {
        /// Subject.
        subject: String,
        /// Soft-deleted versions too.
        #[arg(long)]
        deleted: bool,
    },
    /// Check whether the schema in FILE could be registered under SUBJECT (exit code 1 and the reasons when not).
    Check {
        /// Subject.
        subject: String,
        /// File holding the schema.
        #[arg(long, value_name = "FILE")]
        file: std::path::PathBuf,
        /// The schema's type.
        #[arg(long = "type", default_value = "AVRO", value_parser = ["AVRO", "JSON", "PROTOBUF"])]
        r#type: String,
    },
    /// Show the compatibility level (global, or SUBJECT's), or set it to LEVEL.
    Config {
        /// Subject; without it, the global level.
        subject: Option<String>,
        /// BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE or NONE.
        level: Option<String>,
    },
    /// Soft-delete a subject (or one --version); --permanent deletes for good what was soft-deleted.
    Delete {
        /// Subject.
        subject: String,
        /// Only this version (a number, or latest).
        #[arg(long, value_name = "V")]
        version: Option<String>,
        /// Delete for good (the subject or version must be soft-deleted first).
        #[arg(long)]
        permanent: bool,
    },
}

impl Global {
    /// The broker addresses given, each once, in order (`--broker a,b`,
    /// `--broker a --broker b`, `ES_BROKER=a,b`).
    pub fn brokers(&self) -> Vec<String> {
        es_protocol::client::brokers::parse_list(&self.broker)
    }
}
