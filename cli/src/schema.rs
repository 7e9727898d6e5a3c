//! `es schema register|get|list|versions|check|config|delete`: the schema
//! registry (docs/registry.md) over its HTTP API (`--registry`, default
//! es-broker's `--registry-addr`). Tables for people, one JSON object per
//! line with `--json`; a registry error is `es: <message> (<code>)` with
//! the code named as the broker names it.

use std::io::Write;

use serde_json::{json, Value};

use crate::args::{Global, SchemaArgs, SchemaCommand};
use crate::error::{code, CliError, Result, AUTH_HINT, FORBIDDEN_HINT};
use crate::limits::BROKER_REGISTRY_SCHEMA_BYTES_MAX_LIMIT;
use crate::output::{cell, to_stdout, Table};
use crate::registry_http::{Answer, Registry};

pub fn run(global: &Global, args: SchemaArgs) -> Result<()> {
    let registry = Registry::new(&args.registry, global.api_key.clone(), global.tls_ca.clone())?;
    match args.command {
        SchemaCommand::Register {
            subject,
            file,
            r#type,
        } => {
            let body = schema_body(&file, &r#type)?;
            let a = ok(registry.call(
                "POST",
                &format!("subjects/{}/versions", enc(&subject)),
                Some(&body),
            )?)?;
            // The answer's version, or (from a registry that answers only
            // the id) the subject's version of that schema.
            let version = match a.get("version") {
                Some(v) => v.clone(),
                None => ok(registry.call("POST", &format!("subjects/{}", enc(&subject)), Some(&body))?)?
                    ["version"]
                    .clone(),
            };
            let out = json!({"subject": subject, "version": version, "id": a["id"]});
            print(global, &out, |w| {
                writeln!(
                    w,
                    "registered {subject} version {} (schema id {})",
                    cell(&version),
                    cell(&a["id"])
                )
            })
        }
        SchemaCommand::Get { id } => {
            let a = ok(registry.call("GET", &format!("schemas/ids/{id}"), None)?)?;
            let kind = a["schemaType"].as_str().unwrap_or("AVRO").to_string();
            let subjects = ok(registry.call("GET", &format!("schemas/ids/{id}/versions"), None)?)?;
            let out = json!({"id": id, "schemaType": kind, "schema": a["schema"], "references": a.get("references").cloned().unwrap_or(json!([])), "versions": subjects});
            print(global, &out, |w| {
                writeln!(w, "id:       {id}")?;
                writeln!(w, "type:     {kind}")?;
                let used: Vec<String> = subjects
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| format!("{} v{}", cell(&v["subject"]), cell(&v["version"])))
                    .collect();
                writeln!(
                    w,
                    "used by:  {}",
                    if used.is_empty() {
                        "-".into()
                    } else {
                        used.join(", ")
                    }
                )?;
                writeln!(w, "{}", pretty(a["schema"].as_str().unwrap_or_default()))
            })
        }
        SchemaCommand::List { prefix } => {
            let query = prefix
                .as_deref()
                .map(|p| format!("?subjectPrefix={}", enc(p)))
                .unwrap_or_default();
            let subjects = ok(registry.call("GET", &format!("subjects{query}"), None)?)?;
            let mut rows = Vec::new();
            for s in subjects
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let latest =
                    ok(registry.call("GET", &format!("subjects/{}/versions/latest", enc(s)), None)?)?;
                let level =
                    ok(registry.call("GET", &format!("config/{}?defaultToGlobal=true", enc(s)), None)?)?;
                rows.push(json!({
                    "subject": s, "version": latest["version"], "id": latest["id"],
                    "schemaType": latest["schemaType"].as_str().unwrap_or("AVRO"),
                    "compatibility": level["compatibilityLevel"],
                }));
            }
            lines_or_table(
                global,
                &rows,
                &["SUBJECT", "LATEST", "ID", "TYPE", "COMPATIBILITY"],
                |r| {
                    vec![
                        cell(&r["subject"]),
                        cell(&r["version"]),
                        cell(&r["id"]),
                        cell(&r["schemaType"]),
                        cell(&r["compatibility"]),
                    ]
                },
            )
        }
        SchemaCommand::Versions { subject, deleted } => {
            let q = if deleted { "?deleted=true" } else { "" };
            let versions =
                ok(registry.call("GET", &format!("subjects/{}/versions{q}", enc(&subject)), None)?)?;
            let mut rows = Vec::new();
            for v in versions.as_array().into_iter().flatten() {
                let got = ok(registry.call(
                    "GET",
                    &format!("subjects/{}/versions/{v}{q}", enc(&subject)),
                    None,
                )?)?;
                rows.push(json!({
                    "subject": subject, "version": v, "id": got["id"],
                    "schemaType": got["schemaType"].as_str().unwrap_or("AVRO"),
                }));
            }
            lines_or_table(global, &rows, &["VERSION", "ID", "TYPE"], |r| {
                vec![cell(&r["version"]), cell(&r["id"]), cell(&r["schemaType"])]
            })
        }
        SchemaCommand::Check {
            subject,
            file,
            r#type,
        } => {
            let body = schema_body(&file, &r#type)?;
            let path = format!(
                "compatibility/subjects/{}/versions/latest?verbose=true",
                enc(&subject)
            );
            let a = ok(registry.call("POST", &path, Some(&body))?)?;
            let compatible = a["is_compatible"].as_bool().unwrap_or(false);
            let messages = a.get("messages").cloned().unwrap_or(json!([]));
            let out = json!({"subject": subject, "is_compatible": compatible, "messages": messages});
            print(global, &out, |w| {
                if compatible {
                    return writeln!(w, "compatible with {subject}");
                }
                writeln!(w, "NOT compatible with {subject}:")?;
                for m in messages.as_array().into_iter().flatten() {
                    writeln!(w, "  - {}", cell(m))?;
                }
                Ok(())
            })?;
            if compatible {
                Ok(())
            } else {
                Err(CliError::new(
                    "incompatible_schema",
                    format!(
                        "the schema in {} is not compatible with {subject}",
                        file.display()
                    ),
                ))
            }
        }
        SchemaCommand::Config { subject, level } => {
            let path = match &subject {
                Some(s) => format!("config/{}", enc(s)),
                None => "config".to_string(),
            };
            let level = match level {
                Some(l) => {
                    let a = ok(registry.call("PUT", &path, Some(&json!({"compatibility": l})))?)?;
                    a["compatibility"].clone()
                }
                None => {
                    let q = if subject.is_some() {
                        "?defaultToGlobal=true"
                    } else {
                        ""
                    };
                    ok(registry.call("GET", &format!("{path}{q}"), None)?)?["compatibilityLevel"].clone()
                }
            };
            let out = json!({"subject": subject, "compatibility": level});
            print(global, &out, |w| match &subject {
                Some(s) => writeln!(w, "{s}: {}", cell(&level)),
                None => writeln!(w, "global: {}", cell(&level)),
            })
        }
        SchemaCommand::Delete {
            subject,
            version,
            permanent,
        } => {
            let q = if permanent { "?permanent=true" } else { "" };
            let path = match &version {
                Some(v) => format!("subjects/{}/versions/{}{q}", enc(&subject), enc(v)),
                None => format!("subjects/{}{q}", enc(&subject)),
            };
            let a = ok(registry.call("DELETE", &path, None)?)?;
            let versions = if a.is_array() { a } else { json!([a]) };
            let out = json!({"subject": subject, "deleted": versions, "permanent": permanent});
            print(global, &out, |w| {
                let list: Vec<String> = versions.as_array().into_iter().flatten().map(cell).collect();
                let how = if permanent {
                    "permanently deleted"
                } else {
                    "soft-deleted"
                };
                writeln!(w, "{how} {subject} version(s) {}", list.join(", "))
            })
        }
    }
}

/// The body of a register or check: the file's text and its type.
fn schema_body(file: &std::path::Path, kind: &str) -> Result<Value> {
    let meta = std::fs::metadata(file).map_err(|e| unreadable(file, &e))?;
    if meta.len() > BROKER_REGISTRY_SCHEMA_BYTES_MAX_LIMIT as u64 {
        return Err(CliError::new(
            code::INVALID_INPUT,
            format!("{} is {} bytes, more than any broker takes for a schema ({BROKER_REGISTRY_SCHEMA_BYTES_MAX_LIMIT})", file.display(), meta.len()),
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|e| unreadable(file, &e))?;
    let mut body = json!({"schema": text});
    if kind != "AVRO" {
        body["schemaType"] = json!(kind);
    }
    Ok(body)
}

fn unreadable(file: &std::path::Path, e: &std::io::Error) -> CliError {
    CliError::new(
        code::INVALID_INPUT,
        format!("cannot read {}: {e}", file.display()),
    )
}

/// The body of a 2xx answer; a registry error as the error it is.
fn ok(a: Answer) -> Result<Value> {
    if (200..300).contains(&a.status) {
        return Ok(a.body);
    }
    let n = a.body["error_code"].as_i64().unwrap_or(a.status as i64);
    let message = a.body["message"]
        .as_str()
        .map_or_else(|| a.body.to_string(), String::from);
    let name = code_name(n);
    let hint = match a.status {
        401 => format!(" {AUTH_HINT}"),
        403 => FORBIDDEN_HINT.to_string(),
        _ => String::new(),
    };
    Err(CliError::new(name, format!("{message} (error_code {n}){hint}")))
}

/// The broker's name for a registry `error_code` (broker/src/error.rs).
fn code_name(n: i64) -> &'static str {
    match n {
        40101 => "unauthenticated",
        40301 => "forbidden",
        40401 => "subject_not_found",
        40402 => "version_not_found",
        40403 => "schema_not_found",
        40404 => "subject_soft_deleted",
        40405 => "subject_not_soft_deleted",
        40406 => "version_soft_deleted",
        40407 => "version_not_soft_deleted",
        40408 => "subject_config_not_found",
        409 | 40901 => "incompatible_schema",
        42201 => "invalid_schema",
        42202 => "invalid_version",
        42203 => "invalid_compatibility_level",
        42204 => "invalid_mode",
        42205 => "operation_not_permitted",
        42206 => "reference_exists",
        42208 => "invalid_subject",
        42209 => "schema_too_large",
        50001 => "internal",
        503 => "unavailable",
        _ => "registry_error",
    }
}

/// Percent-encodes a path segment or query value (all but unreserved
/// characters), as Confluent's clients do.
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A JSON schema indented for people; another text as it is.
fn pretty(schema: &str) -> String {
    serde_json::from_str::<Value>(schema)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| schema.to_string())
}

fn print(
    global: &Global,
    out: &Value,
    table: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    if global.json {
        return to_stdout(|w| writeln!(w, "{out}"));
    }
    to_stdout(table)
}

fn lines_or_table(
    global: &Global,
    rows: &[Value],
    headers: &[&str],
    cells: impl Fn(&Value) -> Vec<String>,
) -> Result<()> {
    if global.json {
        return to_stdout(|w| {
            for r in rows {
                writeln!(w, "{r}")?;
            }
            Ok(())
        });
    }
    to_stdout(|w| {
        let mut table = Table::new(headers);
        for r in rows {
            table.row(cells(r));
        }
        table.write(w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_escaped_and_codes_named() {
        assert_eq!(enc("orders-value"), "orders-value");
        assert_eq!(enc("a b/c\n"), "a%20b%2Fc%0A");
        assert_eq!(code_name(40401), "subject_not_found");
        assert_eq!(code_name(40901), "incompatible_schema");
        assert_eq!(code_name(1), "registry_error");
    }
}
