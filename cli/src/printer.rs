//! How `es consume` prints records: the value alone (or key, tab, value
//! with `--print-key`), or with `--json` one object per record with the
//! key and value as UTF-8 strings when both are valid UTF-8, else both in
//! base64 with `"encoding":"base64"`.

use std::io::{self, BufWriter, Stdout, Write};

use es_protocol::batch::RecordRef;
use serde_json::Value;

use crate::encoding::base64;
use crate::error::{output_error, Result};
use crate::output::json_line;

pub struct Printer {
    out: BufWriter<Stdout>,
    json: bool,
    print_key: bool,
    /// Records still to print; `None` for no limit.
    remaining: Option<u64>,
    printed: u64,
}

impl Printer {
    pub fn new(json: bool, print_key: bool, max: Option<u64>) -> Printer {
        Printer {
            out: BufWriter::with_capacity(256 << 10, io::stdout()),
            json,
            print_key,
            remaining: max,
            printed: 0,
        }
    }

    pub fn printed(&self) -> u64 {
        self.printed
    }

    /// True once `--max` records were printed.
    pub fn done(&self) -> bool {
        self.remaining == Some(0)
    }

    /// How many records are still wanted, at most `cap`.
    pub fn wanted(&self, cap: u64) -> u64 {
        self.remaining.map_or(cap, |r| r.min(cap))
    }

    /// Prints records of one partition (up to `--max`) and flushes.
    pub fn print<'a>(
        &mut self,
        partition: u32,
        records: impl IntoIterator<Item = RecordRef<'a>>,
    ) -> Result<()> {
        for r in records {
            if self.done() {
                break;
            }
            self.write_one(partition, &r).map_err(output_error)?;
            self.printed += 1;
            if let Some(n) = self.remaining.as_mut() {
                *n -= 1;
            }
        }
        self.out.flush().map_err(output_error)
    }

    fn write_one(&mut self, partition: u32, r: &RecordRef<'_>) -> io::Result<()> {
        if self.json {
            return writeln!(self.out, "{}", json_record(partition, r));
        }
        if self.print_key {
            self.out.write_all(r.key.unwrap_or(b"null"))?;
            self.out.write_all(b"\t")?;
        }
        self.out.write_all(r.value)?;
        self.out.write_all(b"\n")
    }
}

fn json_record(partition: u32, r: &RecordRef<'_>) -> String {
    let key_text = r.key.map(std::str::from_utf8);
    let value_text = std::str::from_utf8(r.value);
    let mut fields = vec![
        ("partition", Value::from(partition)),
        ("offset", Value::from(r.offset)),
        ("timestamp", Value::from(r.timestamp_ms)),
    ];
    match (key_text, value_text) {
        (None | Some(Ok(_)), Ok(value)) => {
            let key = match key_text {
                Some(Ok(k)) => Value::from(k),
                _ => Value::Null,
            };
            fields.push(("key", key));
            fields.push(("value", Value::from(value)));
        }
        _ => {
            fields.push(("key", r.key.map_or(Value::Null, |k| Value::from(base64(k)))));
            fields.push(("value", Value::from(base64(r.value))));
            fields.push(("encoding", Value::from("base64")));
        }
    }
    json_line(&fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec<'a>(key: Option<&'a [u8]>, value: &'a [u8]) -> RecordRef<'a> {
        RecordRef {
            offset: 7,
            timestamp_ms: 1700000000000,
            key,
            value,
        }
    }

    #[test]
    fn utf8_as_text() {
        assert_eq!(
            json_record(2, &rec(Some(b"user-42"), b"hi \"there\"")),
            r#"{"partition":2,"offset":7,"timestamp":1700000000000,"key":"user-42","value":"hi \"there\""}"#
        );
        assert_eq!(
            json_record(0, &rec(None, b"")),
            r#"{"partition":0,"offset":7,"timestamp":1700000000000,"key":null,"value":""}"#
        );
    }

    #[test]
    fn binary_as_base64() {
        assert_eq!(
            json_record(0, &rec(Some(&[0, 0xff, 0x7f]), b"ok")),
            r#"{"partition":0,"offset":7,"timestamp":1700000000000,"key":"AP9/","value":"b2s=","encoding":"base64"}"#
        );
        assert_eq!(
            json_record(0, &rec(None, &[0xff])),
            r#"{"partition":0,"offset":7,"timestamp":1700000000000,"key":null,"value":"/w==","encoding":"base64"}"#
        );
    }
}
