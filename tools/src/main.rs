//! es-tools: offline tools for a stopped broker's data dir, with std I/O
//! only (no glommio: DESIGN.md allows it for offline tools). The batch and
//! index formats, the segment scan and the index rule are es-format's, the
//! very code the broker's storage runs, so what these tools find is what
//! recovery would find.
//!
//! - `dump-log`: every batch of one segment file (`dump_log.rs`).
//! - `check`: an offline fsck of a data dir (`check.rs`), which scans each
//!   partition as recovery does (`partition.rs`, `index_check.rs`).
//! - `dump`, `verify`, `restore`: a data dir as one tar archive and back
//!   (`archive.rs` the format, `dump_plan.rs` + `dump_range.rs` +
//!   `dump_exact.rs` + `dump.rs`, `dump_jsonl.rs` for `--format jsonl`,
//!   `archive_read.rs` + `verify.rs`, `restore.rs` + `restore_entry.rs` +
//!   `merge.rs` (`--merge`),
//!   `staged.rs` and `durable.rs` for the crash-safe writes).
//! - `key create|list|revoke`: API keys of a stopped broker's dir, offline
//!   (`key.rs`, over es-keys, the broker's own key format and key file).
//!
//! Shared: every bound (`limits.rs`), the data dir's layout and lock (`datadir.rs`), the groups'
//! committed offsets (`groups.rs`), reports (`report.rs`), entries' SHA-256
//! beside the copy (`sha.rs`), a segment read
//! with std I/O (`source.rs`, `segscan.rs`), bytes shown (`show.rs`).
//!
//! Exit codes: 0 clean; 1 problems found, with the report; 2 usage, I/O,
//! or the data dir's lock held (`fail.rs`). docs/tools.md is the reference.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod archive;
mod archive_read;
mod args;
mod check;
mod datadir;
mod dump;
mod dump_exact;
mod dump_jsonl;
mod dump_log;
mod dump_plan;
mod dump_range;
mod durable;
mod fail;
mod groups;
mod index_check;
mod key;
mod limits;
mod merge;
mod partition;
mod report;
mod restore;
mod restore_entry;
mod segscan;
mod sha;
mod show;
mod source;
mod staged;
mod verify;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command, KeyCommand};
use crate::fail::{Fail, Outcome, FAIL_EXIT};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result: Result<Outcome, Fail> = match cli.command {
        Command::DumpLog(a) => dump_log::run(&a.file, a.records, a.json, &mut out),
        Command::Check(a) => check::run(&a.data_dir, a.cold_dir.as_deref(), a.json, &mut out),
        Command::Dump(a) => {
            let o = dump::DumpOptions {
                data_dir: a.data_dir,
                format: a.format,
                cold_dir: a.cold_dir,
                output: a.output,
                selection: dump_plan::Selection {
                    topics: a.topics,
                    topic_prefix: a.topic_prefix,
                    partitions: a.partitions,
                    range: dump_range::Range {
                        from_offset: a.from_offset,
                        to_offset: a.to_offset,
                        from_time: a.from_time,
                        to_time: a.to_time,
                        exact: a.exact,
                    },
                },
                no_groups: a.no_groups,
                no_keys: a.no_keys,
                no_cold: a.no_cold,
                compress: a.compress,
                on_corrupt: a.on_corrupt,
                json: a.json,
            };
            dump::run(&o, &mut out)
        }
        Command::Verify(a) => verify::run(&a.input, a.deep, a.json, &mut out),
        Command::Restore(a) => {
            let o = restore::RestoreOptions {
                input: a.input,
                data_dir: a.data_dir,
                cold_dir: a.cold_dir,
                topics: a.topics,
                renames: a.renames,
                merge: a.merge,
                json: a.json,
            };
            restore::run(&o, &mut out)
        }
        Command::Key(KeyCommand::Create(a)) => key::create(&a.data_dir, &a.name, a.json, &mut out),
        Command::Key(KeyCommand::List(a)) => key::list(&a.data_dir, a.json, &mut out),
        Command::Key(KeyCommand::Revoke(a)) => key::revoke(&a.data_dir, &a.id, a.json, &mut out),
    };
    match result {
        Ok(outcome) => outcome.exit_code(),
        Err(Fail(msg)) => {
            eprintln!("es-tools: {msg}");
            ExitCode::from(FAIL_EXIT)
        }
    }
}
