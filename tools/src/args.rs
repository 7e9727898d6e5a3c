//! The command line (clap). A usage error exits 2, as clap does.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Offline tools for an es data dir. Run them on a stopped broker's dir.
#[derive(Parser, Debug)]
#[command(name = "es-tools", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every batch of one segment file, one line each (kafka-dump-log).
    DumpLog(DumpLogArgs),
    /// Offline fsck of a stopped broker's data dir: segments, indexes, metadata, groups.
    Check(CheckArgs),
    /// A data dir (or part of it) as one tar archive, for backup or migration.
    Dump(DumpArgs),
    /// An archive's integrity: tar structure, every entry's SHA-256, completeness.
    Verify(VerifyArgs),
    /// An archive back into a new (or empty) data dir, or beside the topics of a stopped broker's (--merge).
    Restore(RestoreArgs),
    /// API keys of a stopped broker's data dir, offline: the recovery path for a lost admin key.
    #[command(subcommand)]
    Key(KeyCommand),
}

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// A new admin key in D/api_keys.json, printed once on stdout.
    Create(KeyCreateArgs),
    /// Every key's id, name, admin flag and state; never a secret.
    List(KeyListArgs),
    /// Revoke the key ID (it stays in the file, for audit).
    Revoke(KeyRevokeArgs),
}

#[derive(Args, Debug)]
pub struct KeyCreateArgs {
    /// The data dir (the broker's --data-dir); its broker must be stopped.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The key's name: 1-128 characters of A-Z, a-z, 0-9, '.', '_', '-'.
    #[arg(long)]
    pub name: String,
    /// Make an admin key. Required: offline keys are admin keys (the
    /// recovery path); keys with grants are made with `es key create`.
    #[arg(long, required = true)]
    pub admin: bool,
    /// Machine output: one JSON document (with the key).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct KeyListArgs {
    /// The data dir (the broker's --data-dir); its broker must be stopped.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Machine output: one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct KeyRevokeArgs {
    /// The data dir (the broker's --data-dir); its broker must be stopped.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The key's id (16 characters, as `key list` shows).
    pub id: String,
    /// Machine output: one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// The data dir (the broker's --data-dir); its broker must be stopped.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The cold tier's directory (default: <data-dir>/cold).
    #[arg(long)]
    pub cold_dir: Option<PathBuf>,
    /// The archive to write, `-` for stdout.
    #[arg(short = 'o', long = "output")]
    pub output: String,
    /// Only this topic (repeatable).
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Only topics whose name starts with this.
    #[arg(long)]
    pub topic_prefix: Option<String>,
    /// Only this partition of each topic (repeatable).
    #[arg(long = "partition")]
    pub partitions: Vec<u32>,
    /// Only batches with offsets at or past this (whole batches: a superset).
    #[arg(long)]
    pub from_offset: Option<u64>,
    /// Only batches with offsets at or below this (whole batches: a superset).
    #[arg(long)]
    pub to_offset: Option<u64>,
    /// Only batches with a timestamp at or past this, ms since the epoch.
    #[arg(long)]
    pub from_time: Option<i64>,
    /// Only batches with a timestamp at or below this, ms since the epoch.
    #[arg(long)]
    pub to_time: Option<i64>,
    /// Cut the range's two boundary batches to the records in the range.
    #[arg(long)]
    pub exact: bool,
    /// Leave the groups' committed offsets out.
    #[arg(long)]
    pub no_groups: bool,
    /// Leave api_keys.json out.
    #[arg(long)]
    pub no_keys: bool,
    /// Leave the cold tier out.
    #[arg(long)]
    pub no_cold: bool,
    /// tar: the archive (verify, restore); jsonl: one JSON line per record, for inspection.
    #[arg(long, value_enum, default_value = "tar")]
    pub format: crate::dump::Format,
    /// Compress the archive.
    #[arg(long, value_enum, default_value = "none")]
    pub compress: crate::dump::Compress,
    /// What corruption (not a torn tail) does.
    #[arg(long, value_enum, default_value = "fail")]
    pub on_corrupt: crate::dump_plan::OnCorrupt,
    /// Machine output: one JSON document (on stderr with `-o -`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The archive to read, `-` for stdin (plain or gzip'd).
    #[arg(short = 'i', long = "input")]
    pub input: String,
    /// Also re-check every batch's CRC and each partition's offsets.
    #[arg(long)]
    pub deep: bool,
    /// Machine output: one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The archive to read, `-` for stdin (plain or gzip'd).
    #[arg(short = 'i', long = "input")]
    pub input: String,
    /// The data dir to create; it must not exist, or be empty (with --merge: a stopped broker's dir).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The cold tier's directory to create (default: <data-dir>/cold); it must not exist, or be empty.
    #[arg(long)]
    pub cold_dir: Option<PathBuf>,
    /// Only this topic of the archive (repeatable).
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Restore topic OLD under the name NEW (repeatable); group commits follow.
    #[arg(long = "rename", value_parser = parse_rename)]
    pub renames: Vec<(String, String)>,
    /// Add the archive's topics to a stopped broker's data dir: only those it does not hold.
    #[arg(long)]
    pub merge: bool,
    /// Machine output: one JSON document.
    #[arg(long)]
    pub json: bool,
}

fn parse_rename(s: &str) -> Result<(String, String), String> {
    let (a, b) = s.split_once('=').ok_or("expected OLD=NEW")?;
    if a.is_empty() || b.is_empty() {
        return Err("expected OLD=NEW".into());
    }
    Ok((a.to_string(), b.to_string()))
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The data dir (the broker's --data-dir); its broker must be stopped.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The cold tier's directory (default: <data-dir>/cold).
    #[arg(long)]
    pub cold_dir: Option<PathBuf>,
    /// Machine output: one JSON document.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DumpLogArgs {
    /// The segment's `.log` file.
    pub file: PathBuf,
    /// Also print every record (offset, timestamp, key and value as UTF-8 or hex).
    #[arg(long)]
    pub records: bool,
    /// Machine output: one JSON document.
    #[arg(long)]
    pub json: bool,
}
