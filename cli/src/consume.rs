//! `es consume TOPIC`: reads one partition or all of them, from the high
//! watermark (only new records, the default), the log start
//! (`--from-beginning`), an offset (`--offset`), the last N records
//! (`--last`) or the first record at or after a time (`--from-time`,
//! found by `timeseek`).
//!
//! Without `--follow` it reads in rounds: one fetch per partition not yet
//! caught up, all pipelined on the connection, printed in partition order
//! (round-robin), until every partition is caught up with its high
//! watermark. With `--follow` every partition has a thread that long-polls
//! it and hands its records over as they come.

use std::sync::mpsc;
use std::sync::Arc;

use es_protocol::client::{Client, ClientError};
use es_protocol::requests::fetch::{Fetch, FetchOk};
use es_protocol::{Request, Response};

use crate::args::{ConsumeArgs, Global};
use crate::error::{code, request_error, CliError, Result};
use crate::output::note;
use crate::printer::Printer;
use crate::session::Session;
use crate::time::{looks_like_seconds, to_rfc3339};
use crate::timeseek;

use crate::limits::{
    FETCH_BYTES_MAX, FETCH_BYTES_MIN, FETCH_RECORDS_MAX, FETCH_ROUND_BYTES_MAX, FOLLOW_WAIT_MS,
};

/// Where one partition's reading stands.
#[derive(Clone, Debug)]
struct Cursor {
    partition: u32,
    /// `None`: the log start offset.
    offset: Option<u64>,
}

/// Bytes per fetch when `partitions` are fetched at once.
pub fn fetch_bytes(partitions: usize) -> u32 {
    (FETCH_ROUND_BYTES_MAX / partitions.max(1) as u64).clamp(FETCH_BYTES_MIN, FETCH_BYTES_MAX) as u32
}

pub fn run(global: &Global, args: ConsumeArgs) -> Result<()> {
    if let Some(group) = args.group.clone() {
        return crate::group_consume::run(global, args, group);
    }
    let session = Session::open(global, false)?;
    let (_, info) = session.describe(&args.topic)?;
    let chosen: Vec<_> = match args.partition {
        Some(p) => vec![info.partition(p).ok_or_else(|| info.no_partition(p))?.clone()],
        None => info.partitions.clone(),
    };
    let from_time = match args.from_time {
        Some(t) => {
            if looks_like_seconds(t) {
                note(&format!(
                    "es: --from-time {t} is read as milliseconds since the epoch ({}); for seconds, add 000",
                    to_rfc3339(t)
                ));
            }
            let bounds: Vec<(u32, u64, u64)> = chosen
                .iter()
                .map(|p| (p.partition, p.log_start_offset, p.high_watermark))
                .collect();
            Some(timeseek::starts(&session, &args.topic, t, &bounds)?)
        }
        None => None,
    };
    let cursors: Vec<Cursor> = chosen
        .iter()
        .enumerate()
        .map(|(i, p)| Cursor {
            partition: p.partition,
            offset: if args.from_beginning {
                None
            } else if let Some(starts) = &from_time {
                Some(starts[i])
            } else if let Some(n) = args.last {
                Some(p.high_watermark.saturating_sub(n).max(p.log_start_offset))
            } else {
                Some(args.offset.unwrap_or(p.high_watermark))
            },
        })
        .collect();
    let mut printer = Printer::new(global.json, args.print_key, args.max);
    if printer.done() {
        return Ok(());
    }
    let reader = Reader {
        session: &session,
        topic: &args.topic,
        max_bytes: fetch_bytes(cursors.len()),
    };
    if args.follow {
        reader.follow(cursors, &mut printer)
    } else {
        reader.catch_up(cursors, &mut printer)?;
        let from_now = !args.from_beginning && args.offset.is_none() && args.last.is_none();
        if printer.printed() == 0 && from_now && args.from_time.is_none() {
            note(&format!(
                "no new records in {} (es consume starts at the high watermark). Add --from-beginning to read \
                 what is stored, or --follow to wait for new records.",
                args.topic
            ));
        } else if let (0, Some(t)) = (printer.printed(), args.from_time) {
            note(&format!(
                "no records in {} at or after {} (the latest are older). Add --follow to wait for new records.",
                args.topic,
                to_rfc3339(t)
            ));
        }
        Ok(())
    }
}

struct Reader<'a> {
    session: &'a Session,
    topic: &'a str,
    max_bytes: u32,
}

impl Reader<'_> {
    fn fetch_request(&self, c: &Cursor, max_records: u64, wait_ms: u32) -> Fetch {
        Fetch {
            topic: self.topic.to_string(),
            partition: c.partition,
            offset: c.offset,
            max_records: max_records.clamp(1, FETCH_RECORDS_MAX) as u32,
            max_bytes: self.max_bytes,
            wait_ms,
        }
    }

    fn error(&self, e: ClientError) -> CliError {
        request_error(&self.session.addr, self.topic, e)
    }

    /// An error while reading `partition`: an offset out of range says
    /// which partition's bounds it is about.
    fn error_at(&self, partition: u32, e: ClientError) -> CliError {
        match e {
            ClientError::Broker {
                code,
                message,
                details,
            } if code == "offset_out_of_range" => self.error(ClientError::Broker {
                code,
                message: format!("partition {partition}: {message}"),
                details,
            }),
            other => self.error(other),
        }
    }

    /// Reads until every partition is caught up or `--max` is reached.
    fn catch_up(&self, mut cursors: Vec<Cursor>, printer: &mut Printer) -> Result<()> {
        while !cursors.is_empty() && !printer.done() {
            let wanted = printer.wanted(FETCH_RECORDS_MAX);
            let mut pending = Vec::with_capacity(cursors.len());
            for c in &cursors {
                let req = Request::Fetch(self.fetch_request(c, wanted, 0));
                pending.push(self.session.client.send(&req).map_err(|e| self.error(e))?);
            }
            let mut behind = Vec::with_capacity(cursors.len());
            for (c, p) in cursors.into_iter().zip(pending) {
                let ok = match p.wait().map_err(|e| self.error_at(c.partition, e))? {
                    Response::FetchOk(ok) => ok,
                    other => return Err(unexpected(&other)),
                };
                printer.print(c.partition, ok.records())?;
                if printer.done() {
                    return Ok(());
                }
                if ok.next_offset < ok.high_watermark {
                    if ok.is_empty() {
                        return Err(stuck(c.partition, &ok));
                    }
                    behind.push(Cursor {
                        partition: c.partition,
                        offset: Some(ok.next_offset),
                    });
                }
            }
            cursors = behind;
        }
        Ok(())
    }

    /// Reads every partition for ever (or until `--max`): one long-polling
    /// thread per partition, records printed in the order they arrive.
    fn follow(&self, cursors: Vec<Cursor>, printer: &mut Printer) -> Result<()> {
        let (tx, rx) = mpsc::sync_channel::<Batch>(cursors.len());
        for c in cursors {
            let tx = tx.clone();
            let client: Arc<Client> = self.session.client.clone();
            let first = self.fetch_request(&c, FETCH_RECORDS_MAX, FOLLOW_WAIT_MS);
            std::thread::Builder::new()
                .name(format!("es-follow-{}", c.partition))
                .stack_size(256 << 10)
                .spawn(move || follow_partition(client, first, tx))
                .map_err(|e| {
                    CliError::new(
                        code::INTERNAL,
                        format!("cannot start a thread to follow a partition: {e}"),
                    )
                })?;
        }
        drop(tx);
        while let Ok(batch) = rx.recv() {
            let (partition, page) = batch.map_err(|(p, e)| self.error_at(p, e))?;
            printer.print(partition, page.records())?;
            if printer.done() {
                return Ok(());
            }
        }
        Err(CliError::new(code::INTERNAL, "every partition reader stopped"))
    }
}

/// A page of one partition's records, or why reading it stopped.
type Batch = std::result::Result<(u32, FetchOk), (u32, ClientError)>;

/// Long-polls one partition, handing over every non-empty page; stops at
/// the first error (handed over too) or when nobody listens any more.
fn follow_partition(client: Arc<Client>, mut fetch: Fetch, tx: mpsc::SyncSender<Batch>) {
    loop {
        match client.fetch(fetch.clone()) {
            Ok(ok) => {
                fetch.offset = Some(ok.next_offset);
                if !ok.is_empty() && tx.send(Ok((fetch.partition, ok))).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Err((fetch.partition, e)));
                return;
            }
        }
    }
}

pub fn unexpected(r: &Response) -> CliError {
    CliError::new(
        code::PROTOCOL_ERROR,
        format!("the broker answered a fetch with {:?}", r.kind()),
    )
}

pub fn stuck(partition: u32, ok: &FetchOk) -> CliError {
    CliError::new(
        code::PROTOCOL_ERROR,
        format!(
        "the broker returned no records for partition {partition} at offset {} below its high watermark {} \
         (a broker bug; please report it)",
        ok.next_offset, ok.high_watermark
    ),
    )
}
