//! `es key create|list|describe|revoke|whoami`: API keys (docs/security.md),
//! through the binary protocol's key requests (CreateKey ... WhoAmI,
//! docs/protocol.md). Tables for people, one JSON object per line with
//! `--json`.

use std::io::Write;

use es_protocol::client::ClientError;
use es_protocol::Kind;
use serde_json::{json, Value};

use crate::args::{Global, KeyCommand};
use crate::error::{code, CliError, Result, AUTH_HINT};
use crate::output::{cell, to_stdout, Table};
use crate::session::Session;

pub fn run(global: &Global, cmd: KeyCommand) -> Result<()> {
    // Arguments are checked before connecting.
    let request = match &cmd {
        KeyCommand::Create {
            name,
            admin,
            grants,
            produce_quota,
            fetch_quota,
        } => {
            let grants = grants
                .iter()
                .map(|g| parse_grant(g))
                .collect::<Result<Vec<_>>>()?;
            let quota = json!({
                "produce_bytes_per_sec": produce_quota.as_deref().map(parse_rate).transpose()?,
                "fetch_bytes_per_sec": fetch_quota.as_deref().map(parse_rate).transpose()?,
            });
            (
                Kind::CreateKey,
                json!({"name": name, "admin": admin, "grants": grants, "quota": quota}),
            )
        }
        KeyCommand::List => (Kind::ListKeys, json!({})),
        KeyCommand::Describe { id } => (Kind::DescribeKey, json!({ "id": id })),
        KeyCommand::Revoke { id } => (Kind::RevokeKey, json!({ "id": id })),
        KeyCommand::Whoami => (Kind::WhoAmI, json!({})),
    };
    let session = Session::open(global, false)?;
    let doc = session
        .client
        .admin(request.0, request.1)
        .map_err(|e| key_error(&session.addr, &cmd, e))?;
    if global.json {
        return to_stdout(|w| match &cmd {
            KeyCommand::List => {
                for k in doc["keys"].as_array().into_iter().flatten() {
                    writeln!(w, "{k}")?;
                }
                Ok(())
            }
            _ => writeln!(w, "{doc}"),
        });
    }
    to_stdout(|w| match &cmd {
        KeyCommand::Create { .. } => {
            writeln!(w, "{}", doc["key"].as_str().unwrap_or("-"))?;
            crate::output::note(&format!(
                "key {} created (id {}). It is shown only this once: store it now.",
                cell(&doc["name"]),
                cell(&doc["id"])
            ));
            Ok(())
        }
        KeyCommand::List => {
            let mut table = Table::new(&["ID", "NAME", "ADMIN", "GRANTS", "REVOKED"]);
            for k in doc["keys"].as_array().into_iter().flatten() {
                table.row(vec![
                    cell(&k["id"]),
                    cell(&k["name"]),
                    cell(&k["admin"]),
                    k["grants"].as_array().map_or(0, Vec::len).to_string(),
                    cell(&k["revoked"]),
                ]);
            }
            table.write(w)
        }
        KeyCommand::Revoke { id } => writeln!(w, "revoked key {id}"),
        KeyCommand::Describe { .. } | KeyCommand::Whoami => describe(&doc, w),
    })
}

fn describe(k: &Value, w: &mut dyn Write) -> std::io::Result<()> {
    writeln!(w, "id:       {}", cell(&k["id"]))?;
    writeln!(w, "name:     {}", cell(&k["name"]))?;
    writeln!(w, "admin:    {}", cell(&k["admin"]))?;
    writeln!(w, "revoked:  {}", cell(&k["revoked"]))?;
    let rate = |v: &Value| {
        v.as_u64()
            .map_or("unlimited".to_string(), |n| format!("{n} bytes/s"))
    };
    writeln!(
        w,
        "quota:    produce {}, fetch {}",
        rate(&k["quota"]["produce_bytes_per_sec"]),
        rate(&k["quota"]["fetch_bytes_per_sec"])
    )?;
    let grants = k["grants"].as_array().cloned().unwrap_or_default();
    if grants.is_empty() {
        return writeln!(w, "grants:   none");
    }
    let mut table = Table::new(&["RESOURCE", "PATTERN", "NAME", "OPERATIONS"]);
    for g in &grants {
        let ops: Vec<String> = g["operations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(cell)
            .collect();
        table.row(vec![
            cell(&g["resource"]),
            cell(&g["pattern"]),
            cell(&g["name"]),
            ops.join(","),
        ]);
    }
    writeln!(w, "grants:")?;
    table.write(w)
}

/// A failure, saying which key, what it tried and what to do.
fn key_error(addr: &str, cmd: &KeyCommand, e: ClientError) -> CliError {
    let what = match cmd {
        KeyCommand::Create { .. } => "create a key",
        KeyCommand::List => "list keys",
        KeyCommand::Describe { .. } => "describe a key",
        KeyCommand::Revoke { .. } => "revoke a key",
        KeyCommand::Whoami => "show its key",
    };
    match e {
        ClientError::Broker { code, message, .. } => {
            let hint = match code.as_str() {
                "forbidden" => {
                    " Managing keys takes an admin key: run it with one (--api-key or ES_API_KEY)."
                        .to_string()
                }
                "unauthenticated" => format!(" {AUTH_HINT}"),
                "key_not_found" => " See the keys with: es key list".to_string(),
                "last_admin" => " Create another admin key first: es key create NAME --admin".to_string(),
                _ => String::new(),
            };
            CliError::new(&code, format!("could not {what}: {message} ({code}).{hint}"))
        }
        other => crate::error::request_error(addr, "", other),
    }
}

/// `RESOURCE:PATTERN:NAME:OPS` (or `cluster:OPS`) as the broker's JSON grant.
fn parse_grant(s: &str) -> Result<Value> {
    let bad = |why: &str| {
        CliError::new(
            code::INVALID_ARGUMENT,
            format!("--grant {s:?}: {why}; the form is RESOURCE:PATTERN:NAME:OPS, e.g. topic:prefixed:orders.:read,write"),
        )
    };
    let ops = |o: &str| -> Vec<String> { o.split(',').filter(|x| !x.is_empty()).map(String::from).collect() };
    if let Some(rest) = s.strip_prefix("cluster:") {
        return Ok(json!({"resource": "cluster", "operations": ops(rest)}));
    }
    let (resource, rest) = s.split_once(':').ok_or_else(|| bad("no resource"))?;
    let (pattern, rest) = rest.split_once(':').ok_or_else(|| bad("no pattern"))?;
    // The name may hold ':'? Names do not ([A-Za-z0-9._-]); the last ':' ends it.
    let (name, operations) = rest.rsplit_once(':').ok_or_else(|| bad("no operations"))?;
    if !matches!(pattern, "literal" | "prefixed") {
        return Err(bad("the pattern is literal or prefixed"));
    }
    Ok(json!({"resource": resource, "pattern": pattern, "name": name, "operations": ops(operations)}))
}

/// A rate in bytes per second: a number with an optional unit (B, KiB,
/// MiB, GiB, KB, MB, GB).
fn parse_rate(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => {
            return Err(CliError::new(
                code::INVALID_ARGUMENT,
                format!(
                    "{s:?} is not a rate: a number of bytes per second with an optional unit (10MiB, 500KB)"
                ),
            ))
        }
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|&n| n > 0)
        .ok_or_else(|| CliError::new(code::INVALID_ARGUMENT, format!("{s:?} is not a positive rate")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse() {
        assert_eq!(
            parse_grant("topic:prefixed:orders.:read,write").unwrap(),
            json!({"resource": "topic", "pattern": "prefixed", "name": "orders.", "operations": ["read", "write"]})
        );
        assert_eq!(
            parse_grant("cluster:create").unwrap(),
            json!({"resource": "cluster", "operations": ["create"]})
        );
        for bad in ["topic", "topic:glob:x:read", "topic:literal"] {
            assert!(parse_grant(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rate("10MiB").unwrap(), 10 << 20);
        assert_eq!(parse_rate("500").unwrap(), 500);
        assert_eq!(parse_rate("2 GB").unwrap(), 2_000_000_000);
        for bad in ["", "x", "0", "10XB", "99999999999999999999GiB"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }
}
