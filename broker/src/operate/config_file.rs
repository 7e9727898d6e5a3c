//! `--config FILE`: a TOML file of flag values. Precedence, highest first:
//! the command line, `ES_*` variables, the file, the built-in defaults.
//!
//! Each key is a flag's long name without `--` (`data-dir = "/var/lib/es"`,
//! `shards = 4`, `early-writes = false`). The file's values become the
//! flags' defaults, so clap parses and checks them exactly as it does a
//! flag, and `--help` shows them as the defaults in force.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches};

use crate::operate::config::Config;

/// Why the command line could not become a `Config`.
pub enum ParseError {
    /// A flag or value clap refused (or `--help`/`--version`: `exit` prints
    /// them and exits 0).
    Clap(clap::Error),
    /// The config file could not be read or holds something that is not a
    /// flag.
    File(String),
}

/// Parses `args` (the first is the program name) with `ES_*` variables and,
/// when `--config` or `ES_CONFIG` names one, the TOML file below them.
pub fn parse(args: Vec<OsString>) -> Result<Config, ParseError> {
    let mut command = Config::command();
    if let Some(path) = config_path(&args) {
        for (id, value) in file_values(&command, &path).map_err(ParseError::File)? {
            command = command.mut_arg(id, |arg| arg.default_value(value));
        }
    }
    let matches = command.try_get_matches_from(args).map_err(ParseError::Clap)?;
    Config::from_arg_matches(&matches).map_err(ParseError::Clap)
}

/// The file `--config FILE`, `--config=FILE` or `ES_CONFIG` names; the
/// command line wins. Read before clap parses, since the file's values
/// become the defaults clap parses with.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let Some(arg) = arg.to_str() else { continue };
        if arg == "--" {
            break;
        }
        if arg == "--config" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("ES_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The file's keys as (clap argument id, value), each key checked to be a
/// flag.
fn file_values(command: &clap::Command, path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?; // blocking-ok: start-up, before the executors run
    parse_file(command, &text).map_err(|e| format!("--config {}: {e}", path.display()))
}

/// The checked (argument id, value) pairs of a config file's text.
fn parse_file(command: &clap::Command, text: &str) -> Result<Vec<(String, String)>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let flags: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| l != "help" && l != "version"))
        .collect();
    let mut values = Vec::with_capacity(table.len());
    for (key, value) in &table {
        if key == "config" {
            return Err("`config`: a config file cannot name another".into());
        }
        let Some(arg) = flags.iter().find(|a| a.get_long() == Some(key.as_str())) else {
            let dashed = key.replace('_', "-");
            let hint = if flags.iter().any(|a| a.get_long() == Some(dashed.as_str())) {
                format!("did you mean `{dashed}`? keys are the flags' names without `--`")
            } else {
                "keys are the flags' names without `--` (es-broker --help lists them)".to_string()
            };
            return Err(format!("unknown key `{key}`: {hint}"));
        };
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!(
                    "`{key}`: expected a string, an integer or true/false, got {}",
                    other.type_str()
                ))
            }
        };
        values.push((arg.get_id().to_string(), value));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        std::iter::once("es-broker")
            .chain(list.iter().copied())
            .map(OsString::from)
            .collect()
    }

    fn parse_with(text: &str, flags: &[&str]) -> Result<Config, String> {
        let mut command = Config::command();
        for (id, value) in parse_file(&command, text)? {
            command = command.mut_arg(id, |arg| arg.default_value(value));
        }
        let matches = command
            .try_get_matches_from(args(flags))
            .map_err(|e| e.to_string())?;
        Config::from_arg_matches(&matches).map_err(|e| e.to_string())
    }

    #[test]
    fn file_values_apply_and_flags_win() {
        let text =
            "data-dir = \"/var/lib/es\"\nshards = 3\nearly-writes = false\nhttp-addr = \"127.0.0.1:18080\"\n";
        let config = parse_with(text, &[]).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/var/lib/es"));
        assert_eq!(config.shards, Some(3));
        assert!(!config.early_writes);
        assert_eq!(config.http_addr.port(), 18080);
        let config = parse_with(text, &["--shards", "5", "--early-writes", "true"]).unwrap();
        assert_eq!(config.shards, Some(5), "a flag wins over the file");
        assert!(config.early_writes);
        assert_eq!(config.data_dir, PathBuf::from("/var/lib/es"), "the rest stays");
    }

    #[test]
    fn unknown_keys_and_values_are_refused_by_name() {
        let e = parse_with("data_dir = \"x\"", &[]).unwrap_err();
        assert!(
            e.contains("data_dir") && e.contains("did you mean `data-dir`"),
            "{e}"
        );
        let e = parse_with("bogus = 1", &[]).unwrap_err();
        assert!(e.contains("unknown key `bogus`"), "{e}");
        let e = parse_with("config = \"other.toml\"", &[]).unwrap_err();
        assert!(e.contains("cannot name another"), "{e}");
        let e = parse_with("shards = [1]", &[]).unwrap_err();
        assert!(e.contains("`shards`") && e.contains("array"), "{e}");
        let e = parse_with("shards = \"many\"", &[]).unwrap_err();
        assert!(e.contains("--shards") && e.contains("many"), "{e}");
        let e = parse_with("shards = ", &[]).unwrap_err();
        assert!(e.contains("line 1"), "a TOML syntax error says where: {e}");
    }

    /// The sample in the repository parses, and shows every flag as a key
    /// (set, or commented with its default).
    #[test]
    fn the_sample_file_parses_and_names_every_flag() {
        let sample = include_str!("../../../scripts/deploy/es.toml");
        let config = parse_with(sample, &[]).expect("the sample parses");
        assert!(config.validate().is_ok());
        for arg in Config::command().get_arguments() {
            let Some(name) = arg.get_long() else { continue };
            if ["help", "version", "config"].contains(&name) {
                continue;
            }
            let shown = sample
                .lines()
                .any(|l| l.trim_start_matches(['#', ' ']).starts_with(&format!("{name} =")));
            assert!(shown, "scripts/deploy/es.toml does not show `{name}`");
        }
    }

    #[test]
    fn the_config_path_comes_from_the_command_line_first() {
        assert_eq!(
            config_path(&args(&["--config", "a.toml"])),
            Some(PathBuf::from("a.toml"))
        );
        assert_eq!(
            config_path(&args(&["--shards", "2", "--config=b.toml"])),
            Some(PathBuf::from("b.toml"))
        );
        assert_eq!(
            config_path(&args(&["--", "--config", "c.toml"])).as_deref(),
            std::env::var_os("ES_CONFIG").map(PathBuf::from).as_deref()
        );
    }
}
