//! `es topic create|list|describe|delete|config`.

use std::io::Write;

use es_protocol::Kind;
use serde_json::{json, Map, Value};

use crate::args::{Global, TopicCommand};
use crate::config_value::to_object;
use crate::error::{code, request_error_in, CliError, Missing, Result};
use crate::output::{cell, note, plural, to_stdout, Table};
use crate::session::Session;
use crate::topic_info::TopicInfo;

pub fn run(global: &Global, cmd: TopicCommand) -> Result<()> {
    let session = Session::open(global, false)?;
    let json = global.json;
    match cmd {
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            config,
        } => {
            let mut body = Map::new();
            body.insert("name".into(), Value::from(name.as_str()));
            body.insert("partitions".into(), Value::from(partitions));
            if let Some(rf) = replication_factor {
                body.insert("replication_factor".into(), Value::from(rf));
            }
            if !config.is_empty() {
                body.insert("config".into(), Value::Object(to_object(&config)));
            }
            let doc = session.admin(Kind::CreateTopic, Value::Object(body), &name)?;
            if json {
                return print_doc(&doc);
            }
            to_stdout(|w| {
                let partitions = match doc.get("partitions").and_then(Value::as_u64) {
                    Some(n) => plural(n, "partition"),
                    None => format!(
                        "{} partitions",
                        cell(doc.get("partitions").unwrap_or(&Value::Null))
                    ),
                };
                writeln!(
                    w,
                    "created topic {name}: {partitions}, replication factor {}",
                    cell(doc.get("replication_factor").unwrap_or(&Value::Null))
                )?;
                config_table(doc.get("config")).write(w)
            })
        }
        TopicCommand::List => {
            let doc = session.admin(Kind::ListTopics, json!({}), "")?;
            let topics = doc.get("topics").and_then(Value::as_array).ok_or_else(|| {
                CliError::new(
                    code::PROTOCOL_ERROR,
                    format!("the broker's topic list has no \"topics\": {doc}"),
                )
            })?;
            if json {
                return to_stdout(|w| {
                    for t in topics {
                        writeln!(w, "{t}")?;
                    }
                    Ok(())
                });
            }
            if topics.is_empty() {
                note("no topics yet. Create one with: es topic create NAME --partitions N");
                return Ok(());
            }
            let mut table = Table::new(&["NAME", "PARTITIONS"]);
            for t in topics {
                table.row(vec![
                    cell(t.get("name").unwrap_or(&Value::Null)),
                    cell(t.get("partitions").unwrap_or(&Value::Null)),
                ]);
            }
            to_stdout(|w| table.write(w))
        }
        TopicCommand::Describe { name } => {
            let (doc, info) = session.describe(&name)?;
            if json {
                return print_doc(&doc);
            }
            to_stdout(|w| describe_tables(&info, w))
        }
        TopicCommand::Delete { name } => {
            // A missing topic: nothing to create, so the hint lists the topics.
            let doc = session
                .client
                .admin(Kind::DeleteTopic, json!({ "name": name }))
                .map_err(|e| request_error_in(&session.addr, &name, Missing::List, e))?;
            if json {
                return print_doc(&doc);
            }
            to_stdout(|w| writeln!(w, "deleted topic {name}"))
        }
        TopicCommand::Config { name, entries } if entries.is_empty() => {
            let (doc, info) = session.describe(&name)?;
            if json {
                let config = doc.get("config").cloned().unwrap_or(Value::Null);
                return print_doc(&json!({ "name": name, "config": config }));
            }
            to_stdout(|w| info_config_table(&info).write(w))
        }
        TopicCommand::Config { name, entries } => {
            let body = json!({ "name": name, "config": Value::Object(to_object(&entries)) });
            let doc = session.admin(Kind::PatchTopicConfig, body, &name)?;
            if json {
                return print_doc(&doc);
            }
            to_stdout(|w| {
                writeln!(w, "updated the config of topic {name}")?;
                config_table(doc.get("config")).write(w)
            })
        }
    }
}

/// The broker's JSON document, on one line.
fn print_doc(doc: &Value) -> Result<()> {
    to_stdout(|w| writeln!(w, "{doc}"))
}

fn describe_tables(info: &TopicInfo, w: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        w,
        "topic {}: {}, replication factor {}",
        info.name,
        plural(info.partitions.len() as u64, "partition"),
        cell(&info.replication_factor)
    )?;
    writeln!(w)?;
    let mut table = Table::new(&[
        "PARTITION",
        "LOG START OFFSET",
        "HIGH WATERMARK",
        "LEADER",
        "REPLICAS",
    ]);
    for p in &info.partitions {
        table.row(vec![
            p.partition.to_string(),
            p.log_start_offset.to_string(),
            p.high_watermark.to_string(),
            cell(&p.leader),
            p.replicas.iter().map(cell).collect::<Vec<_>>().join(","),
        ]);
    }
    table.write(w)?;
    writeln!(w)?;
    info_config_table(info).write(w)
}

fn info_config_table(info: &TopicInfo) -> Table {
    let mut table = Table::new(&["CONFIG", "VALUE"]);
    for (k, v) in &info.config {
        table.row(vec![k.clone(), cell(v)]);
    }
    table
}

fn config_table(config: Option<&Value>) -> Table {
    let mut table = Table::new(&["CONFIG", "VALUE"]);
    if let Some(Value::Object(m)) = config {
        for (k, v) in m {
            table.row(vec![k.clone(), cell(v)]);
        }
    }
    table
}
