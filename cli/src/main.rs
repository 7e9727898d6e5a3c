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
//! - `key`: `es key create|list|describe|revoke|whoami`
//! - `schema`, `registry_http`: `es schema ...`, over the schema registry's
//!   HTTP API
//! - `topic_info`, `config_value`: reading describe answers, `key=value` entries
//! - `output`, `encoding`: tables, JSON lines, base64
//! - `error`: messages that say what to do (and their codes, for `--json`)
//! - `limits`: every bound the command keeps, and their relations
//! - `addr`: `--broker HOST:PORT` checked before connecting
//! - `time`, `timeseek`: `es consume --from-time` (parsing, and finding the
//!   start of each partition)
//! - `main`: parsing, errors (as JSON with `--json`), `es completions`

mod acks;
mod addr;
mod args;
mod cluster;
mod config_value;
mod consume;
mod encoding;
mod error;
mod group;
mod group_consume;
mod heartbeat;
mod idempotent;
mod key;
mod limits;
mod link;
mod member;
mod output;
mod partitioner;
mod printer;
mod produce;
mod registry_http;
mod schema;
mod session;
mod time;
mod timeseek;
mod topic;
mod topic_info;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

use crate::args::{Cli, Command};
use crate::error::{code, error_json, CliError};

fn main() -> ExitCode {
    es_protocol::client::keep_large_buffers();
    let argv: Vec<OsString> = std::env::args_os().collect();
    let json = wants_json(&argv);
    let parsed = Cli::command()
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => return usage_error(e, json),
    };
    let result = match cli.command {
        Command::Completions { shell } => completions(shell),
        command => match broker_addrs(&cli.global)
            .iter()
            .find_map(|b| broker_problem(b, &matches))
        {
            Some(e) => Err(e),
            None => run(&cli.global, command),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_quiet() => ExitCode::SUCCESS,
        Err(e) => {
            if cli.global.json {
                output::note(&e.to_json().to_string());
            } else {
                output::note(&format!("es: {e}"));
            }
            ExitCode::FAILURE
        }
    }
}

fn run(global: &args::Global, command: Command) -> error::Result<()> {
    match command {
        Command::Topic(cmd) => topic::run(global, cmd),
        Command::Produce(args) => produce::run(global, args),
        Command::Consume(args) => consume::run(global, args),
        Command::Group(cmd) => group::run(global, cmd),
        Command::Key(cmd) => key::run(global, cmd),
        Command::Schema(args) => schema::run(global, args),
        Command::Cluster(cmd) => cluster::run(global, cmd),
        Command::Completions { shell } => completions(shell),
    }
}

/// `--json` among the arguments (before a `--`): clap's own errors are
/// then JSON too, even when parsing failed before it got to `--json`.
fn wants_json(argv: &[OsString]) -> bool {
    argv.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// A clap error: help and version as clap prints them; a usage error
/// as clap prints it, or with `--json` as `{"error":{"code":"usage",...}}`
/// on stderr; exit code 2 either way.
fn usage_error(e: clap::Error, json: bool) -> ExitCode {
    if !json || !e.use_stderr() {
        e.exit();
    }
    let text = e.to_string();
    let text = text.trim_start_matches("error: ");
    // The first paragraph (the tips and usage follow a blank line), on one line.
    let first = text.split("\n\n").next().unwrap_or_default();
    let message = first.split_whitespace().collect::<Vec<_>>().join(" ");
    output::note(&error_json(code::USAGE, &message).to_string());
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Whether `--broker` (or `ES_BROKER`) is not HOST:PORT, checked before
/// anything connects.
/// The broker addresses to check: those given, or the empty one (said as
/// missing) when none is.
fn broker_addrs(global: &args::Global) -> Vec<String> {
    let brokers = global.brokers();
    if brokers.is_empty() {
        vec![String::new()]
    } else {
        brokers
    }
}

fn broker_problem(broker: &str, matches: &clap::ArgMatches) -> Option<CliError> {
    let problem = addr::problem(broker)?;
    let from_env = matches.value_source("broker") == Some(ValueSource::EnvVariable)
        || matches
            .subcommand()
            .is_some_and(|(_, m)| m.value_source("broker") == Some(ValueSource::EnvVariable));
    let given = if from_env {
        format!("ES_BROKER={broker:?}")
    } else {
        format!("--broker {broker:?}")
    };
    Some(CliError::new(
        code::INVALID_ARGUMENT,
        format!("{given}: {problem}"),
    ))
}

/// `es completions SHELL`: the completion script on stdout.
fn completions(shell: clap_complete::Shell) -> error::Result<()> {
    output::to_stdout(|w| {
        clap_complete::generate(shell, &mut Cli::command(), "es", w);
        Ok(())
    })
}
