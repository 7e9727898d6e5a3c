//! Where `es consume --from-time T` starts in a partition: found by the
//! client, since the protocol has no lookup by time (the broker's time
//! lookup serves only `es group reset --to-timestamp`).
//!
//! A binary search over offsets, one fetch of a single batch per step
//! (`max_bytes` 1: the broker sends the whole batch holding the offset
//! asked for, or the next one). Each step looks at every record of the
//! batch it got, so a search takes about log2(batches in the partition)
//! fetches, every partition's steps pipelined on one connection.
//!
//! It assumes timestamps do not decrease with offsets, which holds where
//! the broker stamps records on arrival (`es produce`, and any producer
//! that sends no timestamp). It ends at a record with a timestamp at or
//! after T whose previous record is before T (or at the log start, or at
//! the high watermark when no record reaches T). Where producers set
//! their own timestamps out of order, that is such a boundary, not
//! necessarily the first record at or after T.

use es_protocol::batch::Records;
use es_protocol::requests::fetch::{Fetch, FetchOk};
use es_protocol::{Request, Response};

use crate::consume::unexpected;
use crate::error::{CliError, Result};
use crate::session::Session;

/// One partition's search. The start it looks for is in `[lo, hi]`: the
/// records before `lo` that it saw are before T, and the first record at
/// or after `hi` is at or after T (or `hi` is the high watermark).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeSearch {
    t: i64,
    lo: u64,
    hi: u64,
}

impl TimeSearch {
    pub fn new(t: i64, log_start: u64, high_watermark: u64) -> TimeSearch {
        TimeSearch {
            t,
            lo: log_start,
            hi: high_watermark.max(log_start),
        }
    }

    /// The offset to fetch next; `None` once found.
    pub fn probe(&self) -> Option<u64> {
        (self.lo < self.hi).then(|| self.lo + (self.hi - self.lo) / 2)
    }

    /// Where to start reading (once `probe` is `None`).
    pub fn start(&self) -> u64 {
        self.hi
    }

    /// Takes what a fetch at `at` (the last `probe`) returned: the
    /// (offset, timestamp) of every record of its batches, in offset
    /// order. Those are consecutive records of the log: no record lies
    /// between two of them. Always narrows `[lo, hi]`.
    pub fn observe(&mut self, at: u64, records: &[(u64, i64)]) {
        // The first record at or after `at`: the fetch returns the batch
        // that holds `at`, or the next one.
        let Some(g) = records.iter().position(|r| r.0 >= at) else {
            // Nothing at or after `at` (below the high watermark).
            self.hi = at;
            return;
        };
        if records[g].0 >= self.hi {
            // No record in [at, hi): the first one at or after `at` is
            // the one at or after `hi`.
            self.hi = at;
            return;
        }
        if records[g].1 >= self.t {
            let mut i = g;
            while i > 0 && records[i - 1].0 >= self.lo && records[i - 1].1 >= self.t {
                i -= 1;
            }
            self.hi = records[i].0;
            if i > 0 {
                // Its previous record is before T (or before `lo`, where
                // every record is): found.
                self.lo = self.hi;
            }
        } else {
            let mut i = g;
            while i + 1 < records.len() && records[i + 1].0 < self.hi && records[i + 1].1 < self.t {
                i += 1;
            }
            match records.get(i + 1) {
                // The next record is at or after T, or at or after `hi`
                // (and then no record lies in between): found.
                Some(next) => {
                    self.hi = self.hi.min(next.0);
                    self.lo = self.hi;
                }
                None => self.lo = records[i].0 + 1,
            }
        }
    }
}

/// The start of every partition `(partition, log start, high watermark)`
/// for `--from-time t`, in the same order.
pub fn starts(session: &Session, topic: &str, t: i64, partitions: &[(u32, u64, u64)]) -> Result<Vec<u64>> {
    let mut searches: Vec<TimeSearch> = partitions
        .iter()
        .map(|&(_, start, hw)| TimeSearch::new(t, start, hw))
        .collect();
    loop {
        let mut pending = Vec::new();
        for (i, s) in searches.iter().enumerate() {
            let Some(at) = s.probe() else { continue };
            let fetch = Fetch {
                topic: topic.to_string(),
                partition: partitions[i].0,
                offset: Some(at),
                max_records: 1,
                max_bytes: 1,
                wait_ms: 0,
            };
            let sent = session
                .client
                .send(&Request::Fetch(fetch))
                .map_err(|e| crate::error::request_error(&session.addr, topic, e))?;
            pending.push((i, at, sent));
        }
        if pending.is_empty() {
            return Ok(searches.iter().map(TimeSearch::start).collect());
        }
        for (i, at, sent) in pending {
            let ok: FetchOk = match sent.wait() {
                Ok(Response::FetchOk(ok)) => ok,
                Ok(other) => return Err(unexpected(&other)),
                Err(e) => {
                    let e = crate::error::request_error(&session.addr, topic, e);
                    return Err(CliError::new(
                        e.code(),
                        format!(
                            "finding where --from-time starts in partition {}: {e}",
                            partitions[i].0
                        ),
                    ));
                }
            };
            let records: Vec<(u64, i64)> = Records::new(ok.batch_bytes(), 0, ok.high_watermark)
                .map(|r| (r.offset, r.timestamp_ms))
                .collect();
            searches[i].observe(at, &records);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of `(offset, timestamp)` records in batches, searched the
    /// way `starts` does; returns the start and the number of fetches.
    fn search(log: &[Vec<(u64, i64)>], log_start: u64, hw: u64, t: i64) -> (u64, usize) {
        let mut s = TimeSearch::new(t, log_start, hw);
        let mut fetches = 0;
        while let Some(at) = s.probe() {
            fetches += 1;
            assert!(fetches < 200, "no progress: {s:?}");
            let batch = log
                .iter()
                .find(|b| b.last().is_some_and(|r| r.0 >= at))
                .cloned()
                .unwrap_or_default();
            let before = s.clone();
            s.observe(at, &batch);
            assert_ne!(s, before, "observe narrows");
        }
        (s.start(), fetches)
    }

    /// Batches of `per` consecutive records from offset 0, timestamps from `ts`.
    fn batches(ts: &[i64], per: usize) -> Vec<Vec<(u64, i64)>> {
        let records: Vec<(u64, i64)> = ts.iter().enumerate().map(|(i, t)| (i as u64, *t)).collect();
        records.chunks(per).map(<[_]>::to_vec).collect()
    }

    /// The first record at or after `t` in offset order, as a full scan finds it.
    fn scan(log: &[Vec<(u64, i64)>], hw: u64, t: i64) -> u64 {
        log.iter().flatten().find(|r| r.1 >= t).map_or(hw, |r| r.0)
    }

    #[test]
    fn finds_the_first_record_at_or_after_t_in_every_case() {
        // Non-decreasing timestamps, with runs of equal ones.
        let ts: Vec<i64> = (0..1000).map(|i| 1000 + (i / 3) * 10).collect();
        for per in [1, 2, 7, 100, 1000] {
            let log = batches(&ts, per);
            for t in [0, 1000, 1001, 1010, 2000, 2005, 4320, 4330, 99_999] {
                assert_eq!(
                    search(&log, 0, 1000, t).0,
                    scan(&log, 1000, t),
                    "per {per}, t {t}"
                );
            }
        }
    }

    #[test]
    fn about_log2_batches_fetches() {
        let ts: Vec<i64> = (0..100_000).collect();
        let log = batches(&ts, 100);
        let (start, fetches) = search(&log, 0, 100_000, 54_321);
        assert_eq!(start, 54_321);
        assert!(fetches <= 12, "{fetches} fetches for 1000 batches");
    }

    #[test]
    fn log_start_gaps_and_empty() {
        let ts: Vec<i64> = (0..100).map(|i| i * 10).collect();
        let log: Vec<_> = batches(&ts, 10).into_iter().skip(3).collect();
        assert_eq!(search(&log, 30, 100, 0).0, 30, "before everything: the log start");
        assert_eq!(search(&log, 30, 100, 555).0, 56);
        assert_eq!(
            search(&log, 30, 100, 10_000).0,
            100,
            "after everything: the high watermark"
        );
        assert_eq!(search(&[], 7, 7, 5).0, 7, "an empty partition");
        // Compacted: offsets with gaps inside and between batches. The
        // start may fall in a gap; reading begins at the next record.
        let log = vec![vec![(0, 10), (3, 20)], vec![(7, 30), (8, 40)], vec![(12, 50)]];
        let next_record = |at: u64| log.iter().flatten().find(|r| r.0 >= at).map_or(13, |r| r.0);
        for (t, want) in [
            (5, 0),
            (15, 3),
            (20, 3),
            (25, 7),
            (35, 8),
            (45, 12),
            (50, 12),
            (60, 13),
        ] {
            assert_eq!(next_record(search(&log, 0, 13, t).0), want, "t {t}");
        }
    }

    #[test]
    fn out_of_order_timestamps_end_at_a_boundary() {
        let ts = [5, 50, 6, 7, 60, 70, 8, 80, 90, 95];
        for per in [1, 3, 10] {
            let log = batches(&ts, per);
            for t in [0, 40, 55, 75, 100] {
                let (start, _) = search(&log, 0, 10, t);
                let flat: Vec<(u64, i64)> = log.iter().flatten().copied().collect();
                if start < 10 {
                    assert!(flat[start as usize].1 >= t, "per {per}, t {t}: start {start}");
                }
                if start > 0 && start < 10 {
                    assert!(flat[start as usize - 1].1 < t, "per {per}, t {t}: start {start}");
                }
            }
        }
    }
}
