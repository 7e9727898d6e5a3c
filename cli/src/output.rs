//! Output: aligned tables for people, one JSON object per line for
//! machines (`--json`). Nothing here panics on a closed stdout: every write
//! returns its error, and `error::output_error` turns a closed pipe into a
//! quiet exit.

use std::io::{self, Write};

use serde_json::Value;

use crate::error::{output_error, Result};

/// Columns padded to their widest cell, two spaces apart, headers in capitals.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn write(&self, w: &mut (impl Write + ?Sized)) -> io::Result<()> {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(columns) {
                line.push_str(cell);
                if i + 1 < columns.min(row.len()) {
                    let pad = widths[i] - cell.chars().count() + 2;
                    line.push_str(&" ".repeat(pad));
                }
            }
            writeln!(w, "{line}")?;
        }
        Ok(())
    }
}

/// A JSON object with its fields in the order given (serde_json's own maps
/// sort their keys), on one line.
pub fn json_line(fields: &[(&str, Value)]) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&Value::from(*k).to_string());
        s.push(':');
        s.push_str(&v.to_string());
    }
    s.push('}');
    s
}

/// `n` and the noun, plural unless `n` is 1: "1 record", "2 records".
pub fn plural(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A JSON value or a cell as people read it: strings without quotes.
pub fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Writes to stdout through `f`, then flushes.
pub fn to_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let stdout = io::stdout();
    let mut lock = stdout.lock();
    f(&mut lock).and_then(|_| lock.flush()).map_err(output_error)
}

/// A line on stderr for people; a closed stderr is ignored.
pub fn note(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned() {
        let mut t = Table::new(&["NAME", "PARTITIONS"]);
        t.row(vec!["orders".into(), "3".into()]);
        t.row(vec!["a".into(), "12".into()]);
        let mut out = Vec::new();
        t.write(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NAME    PARTITIONS\norders  3\na       12\n"
        );
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(0u64, "record"), "0 records");
        assert_eq!(plural(1u64, "partition"), "1 partition");
        assert_eq!(plural(2u32, "member"), "2 members");
    }

    #[test]
    fn json_fields_in_order() {
        let line = json_line(&[
            ("z", Value::from(1)),
            ("a", Value::from("x\"y")),
            ("k", Value::Null),
        ]);
        assert_eq!(line, r#"{"z":1,"a":"x\"y","k":null}"#);
    }
}
