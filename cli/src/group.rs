//! `es group list|describe|reset|delete`: consumer groups as the broker
//! describes them (DescribeGroup, ListGroups, ResetGroup, DeleteGroup;
//! docs/groups.md). Fields missing from an answer print as "-", never
//! panic.

use std::io::Write;

use es_protocol::Kind;
use serde_json::{json, Value};

use crate::args::{Global, GroupCommand, ResetArgs};
use crate::error::{code, group_error, group_error_in, CliError, Missing, Result};
use crate::output::{cell, note, plural, to_stdout, Table};
use crate::session::Session;

pub fn run(global: &Global, cmd: GroupCommand) -> Result<()> {
    let session = Session::open(global, false)?;
    let json = global.json;
    match cmd {
        GroupCommand::List => {
            let doc = request(&session, Kind::ListGroups, json!({}), "", "")?;
            let groups = doc.get("groups").and_then(Value::as_array).ok_or_else(|| {
                CliError::new(
                    code::PROTOCOL_ERROR,
                    format!("the broker's group list has no \"groups\": {doc}"),
                )
            })?;
            if json {
                return to_stdout(|w| {
                    for g in groups {
                        writeln!(w, "{g}")?;
                    }
                    Ok(())
                });
            }
            if groups.is_empty() {
                note("no consumer groups yet. A group starts when a consumer joins it: es consume TOPIC --group G");
                return Ok(());
            }
            let mut table = Table::new(&["NAME", "MEMBERS", "GENERATION", "TOPICS"]);
            for g in groups {
                table.row(vec![
                    field(g, "name"),
                    field(g, "members"),
                    field(g, "generation"),
                    list(g.get("topics")),
                ]);
            }
            to_stdout(|w| table.write(w))
        }
        GroupCommand::Describe { group } => {
            let doc = request(
                &session,
                Kind::DescribeGroup,
                json!({ "group": group }),
                &group,
                "",
            )?;
            if json {
                return print_doc(&doc);
            }
            to_stdout(|w| describe_tables(&group, &doc, w))
        }
        GroupCommand::Reset(args) => reset(&session, json, args),
        GroupCommand::Delete { group } => {
            let doc = request(&session, Kind::DeleteGroup, json!({ "group": group }), &group, "")?;
            if json {
                return print_doc(&doc);
            }
            to_stdout(|w| writeln!(w, "deleted group {group}"))
        }
    }
}

fn request(session: &Session, kind: Kind, body: Value, group: &str, topic: &str) -> Result<Value> {
    // In a cluster, at the group coordinator (`not_coordinator` followed).
    session
        .admin_routed(kind, body)
        .map_err(|(addr, e)| group_error(&addr, group, topic, e))
}

fn reset(session: &Session, json: bool, args: ResetArgs) -> Result<()> {
    let (to, body) = match (
        args.to_earliest,
        args.to_latest,
        args.to_offset,
        args.to_timestamp,
    ) {
        (true, _, _, _) => ("earliest".to_string(), json!({"to": "earliest"})),
        (_, true, _, _) => ("latest".to_string(), json!({"to": "latest"})),
        (_, _, Some(n), _) => (format!("offset {n}"), json!({"to": "offset", "offset": n})),
        (_, _, _, Some(ms)) => (
            format!("timestamp {ms}"),
            json!({"to": "timestamp", "timestamp": ms}),
        ),
        // clap requires one of them
        _ => {
            return Err(CliError::new(
                code::USAGE,
                "say where to: --to-earliest, --to-latest, --to-offset N or --to-timestamp MS",
            ))
        }
    };
    let mut body = body;
    body["group"] = Value::from(args.group.as_str());
    body["topic"] = Value::from(args.topic.as_str());
    // A missing topic: list the topics (creating one to reset a group on it helps nobody).
    let doc = session
        .client
        .admin(Kind::ResetGroup, body)
        .map_err(|e| group_error_in(&session.addr, &args.group, &args.topic, Missing::List, e))?;
    if json {
        return print_doc(&doc);
    }
    let mut table = Table::new(&["TOPIC", "PARTITION", "OFFSET"]);
    for o in doc.get("offsets").and_then(Value::as_array).into_iter().flatten() {
        if o.get("topic").and_then(Value::as_str) == Some(args.topic.as_str()) {
            table.row(vec![field(o, "topic"), field(o, "partition"), field(o, "offset")]);
        }
    }
    to_stdout(|w| {
        writeln!(w, "reset group {} on topic {} to {to}", args.group, args.topic)?;
        table.write(w)
    })
}

/// The broker's JSON document, on one line.
fn print_doc(doc: &Value) -> Result<()> {
    to_stdout(|w| writeln!(w, "{doc}"))
}

/// A field as a cell: "-" when missing or null.
fn field(v: &Value, name: &str) -> String {
    match v.get(name) {
        None | Some(Value::Null) => "-".into(),
        Some(x) => cell(x),
    }
}

/// A JSON array as "a,b,c" ("-" when empty or missing).
fn list(v: Option<&Value>) -> String {
    let items: Vec<String> = v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(cell)
        .collect();
    if items.is_empty() {
        "-".into()
    } else {
        items.join(",")
    }
}

fn describe_tables(group: &str, doc: &Value, w: &mut dyn Write) -> std::io::Result<()> {
    let members = doc
        .get("members")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let partitions = doc
        .get("partitions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    writeln!(
        w,
        "group {group}: generation {}, {}, topics {}",
        field(doc, "generation"),
        plural(members.len() as u64, "member"),
        list(doc.get("topics"))
    )?;
    writeln!(w)?;
    let committed = partitions
        .iter()
        .any(|p| !matches!(p.get("committed_offset"), None | Some(Value::Null)));
    if members.is_empty() && !committed {
        return writeln!(
            w,
            "group {group} is empty: no members and no committed offsets. A consumer joins it with: \
             es consume TOPIC --group {group}"
        );
    }
    let mut table = Table::new(&["MEMBER", "SESSION TIMEOUT MS", "PARTITIONS"]);
    for m in &members {
        let assigned: Vec<String> = m
            .get("assignments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| format!("{}/{}", field(a, "topic"), field(a, "partition")))
            .collect();
        table.row(vec![
            field(m, "member_id"),
            field(m, "session_timeout_ms"),
            if assigned.is_empty() {
                "-".into()
            } else {
                assigned.join(",")
            },
        ]);
    }
    table.write(w)?;
    writeln!(w)?;
    if partitions.is_empty() {
        return writeln!(w, "no partitions: the group's topics no longer exist");
    }
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "MEMBER",
        "COMMITTED OFFSET",
        "HIGH WATERMARK",
        "LAG",
    ]);
    for p in &partitions {
        table.row(vec![
            field(p, "topic"),
            field(p, "partition"),
            field(p, "member_id"),
            field(p, "committed_offset"),
            field(p, "high_watermark"),
            field(p, "lag"),
        ]);
    }
    table.write(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_as_tables() {
        let doc = json!({"name":"billing","generation":2,"topics":["orders"],
            "members":[{"member_id":"m-1","session_timeout_ms":10000,
                        "assignments":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}],
            "partitions":[
              {"topic":"orders","partition":0,"member_id":"m-1","committed_offset":5,"high_watermark":7,"lag":2},
              {"topic":"orders","partition":1,"member_id":"m-1","committed_offset":null,"high_watermark":3,"lag":3}]});
        let mut out = Vec::new();
        describe_tables("billing", &doc, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "group billing: generation 2, 1 member, topics orders");
        assert_eq!(lines[2], "MEMBER  SESSION TIMEOUT MS  PARTITIONS");
        assert_eq!(lines[3], "m-1     10000               orders/0,orders/1");
        assert_eq!(
            lines[5],
            "TOPIC   PARTITION  MEMBER  COMMITTED OFFSET  HIGH WATERMARK  LAG"
        );
        assert_eq!(
            lines[7].split_whitespace().collect::<Vec<_>>(),
            ["orders", "1", "m-1", "-", "3", "3"]
        );
    }

    #[test]
    fn missing_fields_are_dashes() {
        let mut out = Vec::new();
        describe_tables("g", &json!({}), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("group g: generation -, 0 members, topics -\n"),
            "{text}"
        );
        assert_eq!(list(Some(&json!(["a", "b"]))), "a,b");
    }

    #[test]
    fn an_empty_group_says_so() {
        let doc = json!({"name":"g","generation":2,"topics":["t"],"members":[],
            "partitions":[{"topic":"t","partition":0,"member_id":null,"committed_offset":null,
                           "high_watermark":4,"lag":4}]});
        let mut out = Vec::new();
        describe_tables("g", &doc, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "group g: generation 2, 0 members, topics t\n\ngroup g is empty: no members and no committed \
             offsets. A consumer joins it with: es consume TOPIC --group g\n"
        );
        // Commits but no members: the tables, the commits in them.
        let mut doc = doc;
        doc["partitions"][0]["committed_offset"] = json!(3);
        let mut out = Vec::new();
        describe_tables("g", &doc, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[2].starts_with("MEMBER"), "{text}");
        assert_eq!(lines[4].split_whitespace().next(), Some("TOPIC"), "{text}");
        assert_eq!(
            lines[5].split_whitespace().collect::<Vec<_>>(),
            ["t", "0", "-", "3", "4", "4"]
        );
    }
}
