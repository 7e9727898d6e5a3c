//! What a command found: problems (exit 1) and notices (things recovery
//! handles by itself, reported for the operator), each a JSON object with
//! a `kind`, printed as one `key=value` line for people.

use std::io::Write;

use serde_json::{json, Map, Value};

/// Problems and notices, in the order found.
#[derive(Default, Debug)]
pub struct Report {
    pub problems: Vec<Value>,
    pub notices: Vec<Value>,
}

impl Report {
    /// A problem of `kind` with `fields` (a JSON object).
    pub fn problem(&mut self, kind: &str, fields: Value) {
        self.problems.push(with_kind(kind, fields));
    }

    /// A notice of `kind` with `fields` (a JSON object).
    pub fn notice(&mut self, kind: &str, fields: Value) {
        self.notices.push(with_kind(kind, fields));
    }

    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// `status`, `problems` and `notices` as JSON fields.
    pub fn json_fields(&self) -> Map<String, Value> {
        let mut m = Map::new();
        let status = if self.is_clean() { "clean" } else { "problems" };
        m.insert("status".into(), json!(status));
        m.insert("problems".into(), Value::Array(self.problems.clone()));
        m.insert("notices".into(), Value::Array(self.notices.clone()));
        m
    }

    /// One line per problem and notice: `problem <kind> key=value ...`.
    pub fn write_lines(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for (what, list) in [("problem", &self.problems), ("notice", &self.notices)] {
            for v in list {
                writeln!(out, "{what} {}", line(v))?;
            }
        }
        Ok(())
    }
}

fn with_kind(kind: &str, fields: Value) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), json!(kind));
    if let Value::Object(f) = fields {
        m.extend(f);
    }
    Value::Object(m)
}

/// `kind key=value ...`: strings with spaces or quotes are quoted.
pub fn line(v: &Value) -> String {
    let Value::Object(m) = v else {
        return v.to_string();
    };
    let mut parts = Vec::new();
    if let Some(Value::String(k)) = m.get("kind") {
        parts.push(k.clone());
    }
    for (k, val) in m.iter().filter(|(k, _)| *k != "kind") {
        let shown = match val {
            Value::String(s) if s.is_empty() || s.contains([' ', '"', '=']) => format!("{s:?}"),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        parts.push(format!("{k}={shown}"));
    }
    parts.join(" ")
}

/// "1 problem", "2 problems".
pub fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
