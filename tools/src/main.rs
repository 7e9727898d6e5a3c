//! es-tools: offline tools for a stopped broker's data dir, with std I/O
//! only (no glommio: DESIGN.md allows it for offline tools). The batch and
//! index formats, the segment scan and the index rule are es-format's, the
//! very code the broker's storage runs, so what these tools find is what
//! recovery would find.
//!
//! - `dump-log`: every batch of one segment file (`dump_log.rs`).
//! - `check`: an offline fsck of a data dir (`check.rs`), which scans each
//!   partition as recovery does (`partition.rs`, `index_check.rs`).
//!
//! Shared: the data dir's layout and lock (`datadir.rs`), the groups'
//! committed offsets (`groups.rs`), reports (`report.rs`), a segment read
//! with std I/O (`source.rs`, `segscan.rs`), bytes shown (`show.rs`).
//!
//! Exit codes: 0 clean; 1 problems found, with the report; 2 usage, I/O,
//! or the data dir's lock held (`fail.rs`). docs/tools.md is the reference.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod args;
mod check;
mod datadir;
mod dump_log;
mod fail;
mod groups;
mod index_check;
mod partition;
mod report;
mod segscan;
mod show;
mod source;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::fail::{Fail, Outcome, FAIL_EXIT};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result: Result<Outcome, Fail> = match cli.command {
        Command::DumpLog(a) => dump_log::run(&a.file, a.records, a.json, &mut out),
        Command::Check(a) => check::run(&a.data_dir, a.cold_dir.as_deref(), a.json, &mut out),
    };
    match result {
        Ok(outcome) => outcome.exit_code(),
        Err(Fail(msg)) => {
            eprintln!("es-tools: {msg}");
            ExitCode::from(FAIL_EXIT)
        }
    }
}
