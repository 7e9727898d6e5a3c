//! `es produce TOPIC`: one record per stdin line, batched by size and
//! linger with several batches in flight, flushed at EOF (and after each
//! line when stdin is a terminal, so a person typing sees each ack).
//!
//! By default through an idempotent producer (`idempotent`), which picks
//! each record's partition itself and resends what a lost connection left
//! unacknowledged; with `--no-idempotence` through es-protocol's plain
//! `Producer`, and the broker picks partitions.

use std::io::{self, BufRead, IsTerminal};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use es_protocol::client::{ClientError, Producer};
use es_protocol::requests::produce::{ProduceRecord, RECORD_OVERHEAD_BYTES};
use es_protocol::HEADER_BYTES;

use crate::acks::Acks;
use crate::args::{Global, ProduceArgs};
use crate::error::{code, is_transient, request_error, CliError, Result};
use crate::idempotent::{IdempotentProducer, Settings};
use crate::limits::{
    PRODUCE_BATCHES_INFLIGHT_MAX, PRODUCE_BATCH_BYTES_MAX, PRODUCE_FLUSH_RECORDS_MAX, PRODUCE_LINGER_MS,
    RECONNECT_ATTEMPTS_MAX,
};

/// Send a batch once its first record waited this long (see `limits`).
const LINGER: Duration = Duration::from_millis(PRODUCE_LINGER_MS);
use crate::link::ClientLink;
use crate::output::{note, plural};
use crate::partitioner::Partitioner;
use crate::session::Session;

/// What an idempotent request adds to a plain one: producer id, epoch, sequence.
const PRODUCER_FIELDS_BYTES: usize = 8 + 2 + 4;

pub fn run(global: &Global, mut args: ProduceArgs) -> Result<()> {
    if args.key_separator.as_deref() == Some("") {
        return Err(CliError::new(
            code::INVALID_ARGUMENT,
            "--key-separator must not be empty",
        ));
    }
    args.key_separator = args.key_separator.as_deref().map(unescape_separator);
    let session = Session::open(global, args.gzip)?;
    let (_, info) = session.describe(&args.topic)?;
    if let Some(p) = args.partition {
        if info.partition(p).is_none() {
            return Err(info.no_partition(p));
        }
    }
    let frame_max = session.frame_bytes_max();
    let batch_bytes = PRODUCE_BATCH_BYTES_MAX.min(frame_max / 2).max(1);
    let idempotent = !args.no_idempotence;
    let mut producer = if idempotent {
        let partitions = u32::try_from(info.partitions.len())
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                CliError::new(
                    code::PROTOCOL_ERROR,
                    format!("topic {:?} has no partitions", args.topic),
                )
            })?;
        let settings = Settings {
            batch_bytes,
            linger: LINGER,
            max_in_flight: PRODUCE_BATCHES_INFLIGHT_MAX,
        };
        let link = ClientLink::new(&session);
        let partitioner = Partitioner::new(partitions, keyless_start());
        let p = IdempotentProducer::new(link, &args.topic, partitioner, settings)
            .map_err(|e| request_error(&session.addr, &args.topic, e))?;
        Sink::Idempotent(Box::new(p))
    } else {
        Sink::Plain(Producer::new(
            session.client.clone(),
            &args.topic,
            batch_bytes,
            LINGER,
            PRODUCE_BATCHES_INFLIGHT_MAX,
        ))
    };
    let interactive = io::stdin().is_terminal();
    let mut acks = Acks::new(global.json, interactive);
    let mut flusher = Flusher {
        session: &session,
        topic: &args.topic,
        idempotent,
        unflushed: 0,
    };
    if interactive {
        note(&format!(
            "es: reading records for {} from the terminal, one per line; Ctrl-D ends the input.",
            args.topic
        ));
    }
    let lines = read_lines();
    let mut line_no: u64 = 0;
    loop {
        let next = if flusher.unflushed > 0 {
            match lines.recv_timeout(LINGER) {
                Ok(line) => Some(line),
                Err(RecvTimeoutError::Timeout) => {
                    flusher.flush(&mut producer, &mut acks)?;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => None,
            }
        } else {
            lines.recv().ok()
        };
        let Some(line) = next else { break };
        line_no += 1;
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                let msg = format!("cannot read stdin: {e}");
                return flusher.fail(&mut producer, &mut acks, code::IO_ERROR, msg);
            }
        };
        let record = match to_record(line, &args) {
            Some(r) => r,
            None => {
                let sep = args.key_separator.as_deref().unwrap_or_default();
                let msg = format!(
                    "line {line_no} has no key separator {sep:?} (with --key-separator every line must be KEY{sep}VALUE)"
                );
                return flusher.fail(&mut producer, &mut acks, code::INVALID_INPUT, msg);
            }
        };
        let producer_fields = if idempotent { PRODUCER_FIELDS_BYTES } else { 0 };
        let size = HEADER_BYTES
            + producer_fields
            + 2
            + args.topic.len()
            + 4
            + RECORD_OVERHEAD_BYTES
            + record_bytes(&record);
        if size > frame_max {
            let msg = format!(
                "line {line_no} makes a request of {size} bytes, over the broker's frame limit of {frame_max} \
                 bytes (es-broker --frame-bytes-max)"
            );
            return flusher.fail(&mut producer, &mut acks, code::INVALID_INPUT, msg);
        }
        if record_bytes(&record) >= batch_bytes {
            // Alone in its batch, so that no batch outgrows a frame.
            flusher.flush(&mut producer, &mut acks)?;
        }
        if let Err(e) = producer.send(record) {
            return Err(flusher.error(e, &acks));
        }
        flusher.unflushed += 1;
        if interactive || flusher.unflushed >= PRODUCE_FLUSH_RECORDS_MAX {
            flusher.flush(&mut producer, &mut acks)?;
        }
    }
    flusher.flush(&mut producer, &mut acks)?;
    acks.finish(&args.topic);
    Ok(())
}

/// Where records go: an idempotent producer (the default) or a plain one.
enum Sink<'a> {
    Idempotent(Box<IdempotentProducer<ClientLink<'a>>>),
    Plain(Producer),
}

impl Sink<'_> {
    fn send(&mut self, record: ProduceRecord) -> std::result::Result<(), ClientError> {
        match self {
            Sink::Idempotent(p) => p.send(record),
            Sink::Plain(p) => p.send(record),
        }
    }

    /// Sends everything and waits; the acks in the order records were sent.
    fn flush(&mut self) -> std::result::Result<Vec<(u32, u64)>, ClientError> {
        match self {
            Sink::Idempotent(p) => p.flush(),
            Sink::Plain(p) => p.flush(),
        }
    }
}

/// Where the keyless records of this run start: varies between runs, so
/// that short runs spread over the partitions.
fn keyless_start() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos ^ std::process::id()
}

/// Flushes the producer and reports what was acknowledged.
struct Flusher<'a> {
    session: &'a Session,
    topic: &'a str,
    idempotent: bool,
    /// Records sent to the producer since the last flush.
    unflushed: u64,
}

impl Flusher<'_> {
    fn flush(&mut self, producer: &mut Sink, acks: &mut Acks) -> Result<()> {
        if self.unflushed == 0 {
            return Ok(());
        }
        let done = producer.flush().map_err(|e| self.error(e, acks))?;
        self.unflushed = 0;
        acks.record(&done)
    }

    /// A failure on a line: what came before it is flushed, then the
    /// message says how much of the input was produced.
    fn fail(&mut self, producer: &mut Sink, acks: &mut Acks, code: &str, message: String) -> Result<()> {
        self.flush(producer, acks)?;
        acks.finish(self.topic);
        let before = match acks.total() {
            0 => "Nothing before it was produced.".to_string(),
            1 => "The 1 record before it was produced.".to_string(),
            n => format!("The {n} records before it were produced."),
        };
        Err(CliError::new(code, format!("{message}. {before}")))
    }

    fn error(&self, e: ClientError, acks: &Acks) -> CliError {
        // The idempotent producer only gives up on a lost connection after
        // its reconnect attempts.
        let gave_up = if self.idempotent && is_transient(&e) {
            format!(" Gave up after {RECONNECT_ATTEMPTS_MAX} reconnect attempts.")
        } else {
            String::new()
        };
        let acked = match acks.total() {
            0 => "No record had been acknowledged before the failure.".to_string(),
            n => format!(
                "{} had been acknowledged before the failure.",
                plural(n, "record")
            ),
        };
        request_error(&self.session.addr, self.topic, e).and(&format!("{gave_up} {acked}"))
    }
}

fn record_bytes(r: &ProduceRecord) -> usize {
    r.value.len() + r.key.as_ref().map_or(0, Vec::len)
}

/// `--key-separator` as typed, with `\t` read as a tab and `\\` as one
/// backslash (a shell passes `'\t'` on as two characters, and a tab is
/// the usual separator of tab-separated lines); any other backslash
/// stays as it is.
fn unescape_separator(sep: &str) -> String {
    let mut out = String::with_capacity(sep.len());
    let mut chars = sep.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.clone().next() {
            Some('t') => {
                chars.next();
                out.push('\t');
            }
            Some('\\') => {
                chars.next();
                out.push('\\');
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// A line (newline stripped) as a record; `None` when `--key-separator`
/// is set and the line does not contain it.
fn to_record(line: Vec<u8>, args: &ProduceArgs) -> Option<ProduceRecord> {
    let (key, value) = match (&args.key, &args.key_separator) {
        (Some(k), _) => (Some(k.as_bytes().to_vec()), line),
        (None, Some(sep)) => {
            let sep = sep.as_bytes();
            let at = line.windows(sep.len()).position(|w| w == sep)?;
            (Some(line[..at].to_vec()), line[at + sep.len()..].to_vec())
        }
        (None, None) => (None, line),
    };
    Some(ProduceRecord {
        partition: args.partition,
        timestamp_ms: None,
        key,
        value,
    })
}

/// Lines of stdin, read on their own thread so that a quiet pipe does not
/// hold back what is buffered. A line loses its `\n` (and a `\r` before
/// it); the bytes need not be UTF-8.
fn read_lines() -> Receiver<io::Result<Vec<u8>>> {
    let (tx, rx) = mpsc::sync_channel(4096);
    std::thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                    }
                    if tx.send(Ok(line)).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(key: Option<&str>, sep: Option<&str>) -> ProduceArgs {
        ProduceArgs {
            topic: "t".into(),
            key: key.map(String::from),
            key_separator: sep.map(String::from),
            partition: None,
            gzip: false,
            no_idempotence: false,
        }
    }

    #[test]
    fn key_separator_splits_at_the_first() {
        let r = to_record(b"user-42::a::b".to_vec(), &args(None, Some("::"))).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"user-42"[..]));
        assert_eq!(r.value, b"a::b");
        let r = to_record(b":v".to_vec(), &args(None, Some(":"))).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b""[..]));
        assert!(to_record(b"no separator".to_vec(), &args(None, Some(":"))).is_none());
    }

    #[test]
    fn a_typed_tab_separator_is_a_tab() {
        assert_eq!(unescape_separator("\\t"), "\t");
        assert_eq!(unescape_separator("a\\tb"), "a\tb");
        assert_eq!(unescape_separator("\\\\t"), "\\t");
        assert_eq!(unescape_separator("\\n"), "\\n");
        assert_eq!(unescape_separator("\\"), "\\");
        assert_eq!(unescape_separator(":"), ":");
    }

    #[test]
    fn key_for_all_and_no_key() {
        let r = to_record(b"v".to_vec(), &args(Some("k"), None)).unwrap();
        assert_eq!(
            (r.key.as_deref(), r.value.as_slice()),
            (Some(&b"k"[..]), &b"v"[..])
        );
        assert_eq!(to_record(b"v".to_vec(), &args(None, None)).unwrap().key, None);
    }
}
