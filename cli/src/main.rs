//! `es`: the command-line client of the es broker. Every command talks to
//! the broker's binary protocol (docs/protocol.md) through es-protocol's
//! client; docs/cli.md documents the commands and flags.
//!
//! - `args`: the command line (clap)
//! - `session`: the connection and the requests every command makes
//! - `topic`: `es topic create|list|describe|delete|config`
//! - `produce`, `acks`: `es produce` and what it reports
//! - `idempotent`, `partitioner`, `link`: the idempotent producer behind
//!   `es produce` (partitions, sequences, reconnect and resend)
//! - `consume`, `printer`: `es consume` and how records are printed
//! - `group_consume`, `member`, `heartbeat`: `es consume --group`
//! - `group`: `es group list|describe|reset|delete`
//! - `topic_info`, `config_value`: reading describe answers, `key=value` entries
//! - `output`, `encoding`: tables, JSON lines, base64
//! - `error`: messages that say what to do

mod acks;
mod args;
mod config_value;
mod consume;
mod encoding;
mod error;
mod group;
mod group_consume;
mod heartbeat;
mod idempotent;
mod link;
mod member;
mod output;
mod partitioner;
mod printer;
mod produce;
mod session;
mod topic;
mod topic_info;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    es_protocol::client::keep_large_buffers();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topic(cmd) => topic::run(&cli.global, cmd),
        Command::Produce(args) => produce::run(&cli.global, args),
        Command::Consume(args) => consume::run(&cli.global, args),
        Command::Group(cmd) => group::run(&cli.global, cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_quiet() => ExitCode::SUCCESS,
        Err(e) => {
            output::note(&format!("es: {e}"));
            ExitCode::FAILURE
        }
    }
}
