//! The history: every operation of the workload as JSON lines,
//! `{time, process, type: invoke|ok|fail|info, f: send|poll|commit|position,
//! topic, partition, offset, value, node, ...}`, Jepsen's model.
//!
//! `invoke` opens an operation; `ok` says it happened, `fail` that it
//! certainly did not (the broker refused it), `info` that it may or may
//! not have (a timeout or a lost connection). Times are nanoseconds since
//! the run started.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    Invoke,
    Ok,
    Fail,
    Info,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum F {
    /// Produce one record.
    Send,
    /// Read records of one partition.
    Poll,
    /// Commit a consumer group's offsets.
    Commit,
    /// Read a consumer group's committed offsets (where a member starts).
    Position,
    /// A partition's leader as a lookup saw it (`node`, `term`): recorded
    /// when it changed (cluster runs only).
    Leader,
}

/// A committed offset: `commit` and `position` carry a list of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub time: u64,
    pub process: String,
    #[serde(rename = "type")]
    pub kind: Type,
    pub f: F,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// A send by an idempotent producer (its retries must be written once).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// A poll's records, `(offset, value)`, in the order returned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<(u64, String)>,
    /// A poll's reader session: one run of reads from one position,
    /// without a seek or a rebalance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
    /// A poll's high watermark, as the broker reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw: Option<u64>,
    /// The consumer group of a commit or position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The offsets a commit wrote, or a position read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<Committed>,
    /// Why a `fail` or `info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A `leader` event's raft term, when the broker reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<u64>,
}

impl Event {
    pub fn new(process: &str, kind: Type, f: F) -> Event {
        Event {
            time: 0,
            process: process.to_string(),
            kind,
            f,
            topic: None,
            partition: None,
            offset: None,
            value: None,
            node: None,
            idempotent: false,
            records: Vec::new(),
            session: None,
            hw: None,
            group: None,
            offsets: Vec::new(),
            error: None,
            term: None,
        }
    }

    /// The same operation's completion: `kind`, the same process, function,
    /// partition, value and flags, no result fields yet.
    pub fn complete(&self, kind: Type) -> Event {
        Event {
            kind,
            time: 0,
            records: Vec::new(),
            offsets: Vec::new(),
            error: None,
            hw: None,
            ..self.clone()
        }
    }

    pub fn on(mut self, topic: &str, partition: u32) -> Event {
        self.topic = Some(topic.to_string());
        self.partition = Some(partition);
        self
    }

    pub fn with_error(mut self, error: impl Into<String>) -> Event {
        self.error = Some(error.into());
        self
    }
}

/// Appends events to `history.jsonl`, stamping their time. Shared by every
/// worker thread.
pub struct Recorder {
    start: Instant,
    out: Mutex<BufWriter<File>>,
}

impl Recorder {
    pub fn create(path: &Path, start: Instant) -> Result<Recorder, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Recorder {
            start,
            out: Mutex::new(BufWriter::new(file)),
        })
    }

    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records `event` now and returns it as recorded.
    pub fn record(&self, mut event: Event) -> Event {
        let mut out = self.out.lock().expect("history lock");
        // Stamped under the lock, so the file's order is the time order.
        event.time = self.now();
        if let Ok(line) = serde_json::to_string(&event) {
            let _ = writeln!(out, "{line}");
        }
        event
    }

    pub fn flush(&self) -> Result<(), String> {
        self.out
            .lock()
            .expect("history lock")
            .flush()
            .map_err(|e| format!("history: {e}"))
    }
}

/// Reads a history written by [`Recorder`].
pub fn read(path: &Path) -> Result<Vec<Event>, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut events = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let event =
            serde_json::from_str(&line).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
        events.push(event);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let rec = Recorder::create(&path, Instant::now()).unwrap();
        let mut send = Event::new("w0", Type::Invoke, F::Send).on("t", 2);
        send.value = Some("w0-1".into());
        send.idempotent = true;
        let a = rec.record(send.clone());
        let mut ok = send.complete(Type::Ok);
        ok.offset = Some(7);
        let b = rec.record(ok);
        rec.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text
            .lines()
            .next()
            .unwrap()
            .contains(r#""type":"invoke","f":"send""#));
        assert_eq!(read(&path).unwrap(), vec![a, b]);
    }
}
