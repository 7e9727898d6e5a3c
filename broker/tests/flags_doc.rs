//! The flag reference (docs/cli.md, "es-broker") says what `es-broker
//! --help` says: the same flags, each with its environment variable and
//! default, and the synopsis above the table lists them all. docs/api.md and
//! docs/operations.md name only flags that exist. A flag added, renamed or
//! given a new default without its docs fails here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// A flag as `--help` shows it: its environment variable and default.
#[derive(Debug, Default, PartialEq)]
struct Flag {
    env: Option<String>,
    default: Option<String>,
}

fn docs(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every long flag of `es-broker --help` but help and version.
fn help_flags() -> BTreeMap<String, Flag> {
    let out = Command::new(env!("CARGO_BIN_EXE_es-broker"))
        .arg("--help")
        .env_clear()
        .output()
        .expect("es-broker --help runs");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).expect("utf-8 help");
    let mut flags = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in help.lines() {
        let trimmed = line.trim_start();
        let after_short = trimmed.split_once(", ").map_or(trimmed, |(short, rest)| {
            if short.len() == 2 && short.starts_with('-') {
                rest
            } else {
                trimmed
            }
        });
        if let Some(rest) = after_short.strip_prefix("--") {
            if line.starts_with("  ") {
                let name = rest.split([' ', '=']).next().unwrap_or(rest).to_string();
                current = (name != "help" && name != "version").then(|| name.clone());
                if let Some(name) = &current {
                    flags.insert(name.clone(), Flag::default());
                }
                continue;
            }
        }
        let Some(name) = &current else { continue };
        let flag = flags.get_mut(name).expect("inserted");
        if let Some(env) = trimmed.strip_prefix("[env: ") {
            flag.env = Some(env.trim_end_matches(']').trim_end_matches('=').to_string());
        } else if let Some(default) = trimmed.strip_prefix("[default: ") {
            flag.default = Some(default.trim_end_matches(']').to_string());
        }
    }
    assert!(flags.len() > 10, "parsed too few flags from --help:\n{help}");
    flags
}

/// The es-broker section of docs/cli.md: the table's rows as flags, and
/// the synopsis.
fn documented() -> (BTreeMap<String, (String, String)>, String) {
    let cli = docs("cli.md");
    let section = cli
        .split("\n## es-broker")
        .nth(1)
        .expect("docs/cli.md has an `## es-broker` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let synopsis = section
        .split("```")
        .nth(1)
        .expect("the es-broker section opens with a synopsis block")
        .to_string();
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `--")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // ["", flag, env, default, meaning, ""]
        assert!(cells.len() >= 5, "a flag row has 4 cells: {line}");
        let flag = cells[1].trim_matches('`').trim_start_matches("--").to_string();
        let previous = rows.insert(flag.clone(), (cells[2].to_string(), cells[3].to_string()));
        assert!(previous.is_none(), "--{flag} has two rows in docs/cli.md");
    }
    (rows, synopsis)
}

#[test]
fn the_flag_table_in_docs_cli_matches_es_broker_help() {
    let help = help_flags();
    let (rows, synopsis) = documented();
    let in_help: Vec<&String> = help.keys().collect();
    let in_docs: Vec<&String> = rows.keys().collect();
    assert_eq!(
        in_help, in_docs,
        "docs/cli.md's es-broker table must list exactly the flags of es-broker --help"
    );
    for (name, flag) in &help {
        let (env, default) = &rows[name];
        let env_doc = env.trim_matches('`');
        assert_eq!(
            Some(env_doc),
            flag.env.as_deref(),
            "--{name}: docs/cli.md says env {env}, --help says {:?}",
            flag.env
        );
        if let Some(value) = &flag.default {
            assert!(
                default.starts_with(&format!("`{value}`")),
                "--{name}: the documented default {default:?} must start with `{value}` (as --help says)"
            );
        } else {
            assert!(
                !default.starts_with('`') || default.starts_with("`<"),
                "--{name} has no default in --help, yet docs/cli.md gives {default:?}"
            );
        }
        assert!(
            synopsis.contains(&format!("[--{name} ")) || synopsis.contains(&format!("[--{name}]")),
            "the es-broker synopsis in docs/cli.md does not show --{name}"
        );
    }
}

/// Every `--flag` that docs/api.md and docs/operations.md mention, outside
/// code blocks of other commands, is an es-broker flag.
#[test]
fn other_docs_name_only_flags_that_exist() {
    let help = help_flags();
    for doc in ["api.md", "operations.md"] {
        let text = docs(doc);
        for (i, piece) in text.split("`--").enumerate().skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            // `--` alone, and flags of other programs: docker's and the es CLI's.
            if name.is_empty()
                || [
                    "ulimit",
                    "security-opt",
                    "time",
                    "broker",
                    "json",
                    "from-beginning",
                ]
                .contains(&name.as_str())
            {
                continue;
            }
            assert!(
                help.contains_key(&name),
                "docs/{doc} mentions `--{name}` (occurrence {i}), which es-broker --help does not list"
            );
        }
    }
}
