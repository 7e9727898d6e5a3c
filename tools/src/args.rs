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
