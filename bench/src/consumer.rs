//! One consumer: a connection of its own reading one partition with
//! sequential fetches. Two ways to run it: `sweep` reads from the log start
//! to the high watermark and starts over until the deadline (throughput
//! from the page cache); `follow` long-polls from an offset and times each
//! record from the send time embedded in its value (e2e).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use es_protocol::client::{Client, Options};
use es_protocol::requests::fetch::{Fetch, FetchOk};

use crate::counters::Counters;
use crate::fetcher::Fetcher;
use crate::latency::Latency;
use crate::payload;
use crate::window::Window;

/// Most records one fetch may ask for (the protocol's limit).
const MAX_RECORDS: u32 = 10_000;
/// How long a `follow` fetch waits at the high watermark.
const FOLLOW_WAIT_MS: u32 = 100;
/// How long `follow` may take to catch up after the window ends.
const DRAIN: Duration = Duration::from_secs(30);

pub struct Consumer {
    conn: Conn,
    topic: String,
    partition: u32,
    fetch_bytes: u32,
}

/// Without gzip or TLS a consumer drives its connection on its own thread
/// (`Fetcher`); gzip and TLS go through the client library.
enum Conn {
    Direct(Mutex<Fetcher>),
    Library(Client),
}

impl Consumer {
    pub fn connect(
        addr: &str,
        topic: &str,
        partition: u32,
        fetch_bytes: u32,
        gzip: bool,
        tls: Option<es_protocol::client::tls::TlsOptions>,
    ) -> Result<Consumer, String> {
        let client_id = format!("es-bench-consumer-{partition}");
        let conn = if gzip || tls.is_some() {
            let options = Options {
                client_id,
                gzip,
                tls,
                ..crate::connect::options()
            };
            Conn::Library(
                Client::connect(addr, options)
                    .map_err(|e| format!("consumer {partition}: connect to {addr}: {e}"))?,
            )
        } else {
            Conn::Direct(Mutex::new(
                Fetcher::connect(addr, &client_id).map_err(|e| format!("consumer {partition}: {e}"))?,
            ))
        };
        Ok(Consumer {
            conn,
            topic: topic.to_string(),
            partition,
            fetch_bytes,
        })
    }

    fn fetch(&self, offset: Option<u64>, wait_ms: u32) -> Result<FetchOk, String> {
        let fetch = Fetch {
            topic: self.topic.clone(),
            partition: self.partition,
            offset,
            max_records: MAX_RECORDS,
            max_bytes: self.fetch_bytes,
            wait_ms,
        };
        let got = match &self.conn {
            Conn::Direct(f) => f.lock().expect("one thread per consumer").fetch(fetch),
            Conn::Library(c) => c.fetch(fetch).map_err(|e| e.to_string()),
        };
        got.map_err(|e| format!("fetch partition {}: {e}", self.partition))
    }

    /// Reads the whole partition once, counting nothing: the broker writes
    /// with direct I/O, so what was just produced is on the disk, not in
    /// the page cache; this brings it there, as a sweep's first pass would.
    pub fn read_through(&self, stop: &AtomicBool) -> Result<(), String> {
        let mut offset = None;
        while !stopped(stop) {
            let ok = self.fetch(offset, 0)?;
            if ok.is_empty() || ok.next_offset >= ok.high_watermark {
                return Ok(());
            }
            offset = Some(ok.next_offset);
        }
        Ok(())
    }

    /// Reads the whole partition over and over until `deadline`; latency is
    /// per fetch.
    pub fn sweep(
        &self,
        deadline: Instant,
        counters: &Counters,
        stop: &AtomicBool,
    ) -> Result<Latency, String> {
        let mut latency = Latency::new();
        let mut offset = None;
        while Instant::now() < deadline && !stopped(stop) {
            let t0 = Instant::now();
            let ok = self.fetch(offset, 0)?;
            latency.record(t0.elapsed());
            if ok.high_watermark == 0 {
                return Err(format!(
                    "partition {} is empty: nothing to consume",
                    self.partition
                ));
            }
            counters.add(ok.record_count() as u64, value_bytes(&ok));
            offset = if ok.is_empty() || ok.next_offset >= ok.high_watermark {
                None
            } else {
                Some(ok.next_offset)
            };
        }
        Ok(latency)
    }

    /// Reads from `from` as records arrive until the producers are `done`
    /// and everything they had acknowledged (`acked`) is read, or `DRAIN`
    /// after the window ends; latency is per record, send time to receipt,
    /// for records received after the window's warm-up.
    pub fn follow(
        &self,
        from: u64,
        done: &AtomicBool,
        acked: &AtomicU64,
        window: Window,
        counters: &Counters,
    ) -> Result<Latency, String> {
        let mut latency = Latency::new();
        let mut offset = from;
        let give_up = window.until + DRAIN;
        loop {
            if done.load(Ordering::Acquire) && offset >= acked.load(Ordering::Relaxed) {
                break;
            }
            if Instant::now() >= give_up || crate::interrupt::requested() {
                break;
            }
            let ok = self.fetch(Some(offset), FOLLOW_WAIT_MS)?;
            let now = payload::unix_nanos();
            offset = offset.max(ok.next_offset);
            if !window.counts(Instant::now()) {
                continue;
            }
            for r in ok.records() {
                if let Some(sent) = payload::read_stamp(r.value) {
                    latency.record(Duration::from_nanos(now.saturating_sub(sent)));
                }
            }
            counters.add(ok.record_count() as u64, value_bytes(&ok));
        }
        Ok(latency)
    }
}

fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed) || crate::interrupt::requested()
}

fn value_bytes(ok: &FetchOk) -> u64 {
    ok.records()
        .map(|r| (r.value.len() + r.key.map_or(0, <[u8]>::len)) as u64)
        .sum()
}
