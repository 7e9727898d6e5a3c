//! What `es produce` reports: with `--json` one `{"partition","offset"}`
//! line per record on stdout; for people, a per-partition summary on stderr
//! at the end (and each ack as it comes when typing at a terminal).

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde_json::Value;

use crate::error::Result;
use crate::output::{json_line, note, to_stdout, Table};

#[derive(Default)]
struct PartitionStats {
    records: u64,
    first: u64,
    last: u64,
}

pub struct Acks {
    json: bool,
    /// Print every ack to stderr as it comes (an interactive user).
    echo: bool,
    total: u64,
    partitions: BTreeMap<u32, PartitionStats>,
}

impl Acks {
    pub fn new(json: bool, echo: bool) -> Acks {
        Acks {
            json,
            echo: echo && !json,
            total: 0,
            partitions: BTreeMap::new(),
        }
    }

    /// Records acknowledged so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Takes acks, in the order the records were read.
    pub fn record(&mut self, acks: &[(u32, u64)]) -> Result<()> {
        for &(partition, offset) in acks {
            self.total += 1;
            let s = self.partitions.entry(partition).or_insert(PartitionStats {
                records: 0,
                first: offset,
                last: offset,
            });
            s.records += 1;
            s.first = s.first.min(offset);
            s.last = s.last.max(offset);
            if self.echo {
                note(&format!("ok: partition {partition}, offset {offset}"));
            }
        }
        if self.json && !acks.is_empty() {
            to_stdout(|w| {
                for &(partition, offset) in acks {
                    writeln!(
                        w,
                        "{}",
                        json_line(&[
                            ("partition", Value::from(partition)),
                            ("offset", Value::from(offset))
                        ])
                    )?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The summary on stderr (nothing with `--json`).
    pub fn finish(&self, topic: &str) {
        if self.json {
            return;
        }
        let s = if self.total == 1 { "" } else { "s" };
        let mut err = io::stderr().lock();
        let _ = writeln!(err, "produced {} record{s} to {topic}", self.total);
        if self.partitions.is_empty() {
            return;
        }
        let mut table = Table::new(&["PARTITION", "RECORDS", "FIRST OFFSET", "LAST OFFSET"]);
        for (p, st) in &self.partitions {
            table.row(vec![
                p.to_string(),
                st.records.to_string(),
                st.first.to_string(),
                st.last.to_string(),
            ]);
        }
        let _ = table.write(&mut err);
    }
}
