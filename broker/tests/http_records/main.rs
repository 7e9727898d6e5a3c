//! Producing and fetching records over HTTP.
//!
//! Contract proven here (docs/api.md, "Records"):
//! - `POST /v1/topics/{t}/records` answers `{"offsets":[{partition,offset}]}`
//!   in input order. A record with a key and no partition goes to partition
//!   `FNV-1a-64(key bytes) % partitions` (offset basis 0xcbf29ce484222325,
//!   prime 0x100000001b3, over the decoded key bytes), so one key always lands
//!   on one partition, and its offsets grow in produce order. An explicit
//!   partition wins over the key. Keyless records of one request share one
//!   partition, and successive requests spread over more than one.
//! - `encoding: base64` carries arbitrary bytes (0x00, 0xff, ...) in keys and
//!   values both ways; fetching such bytes with `encoding=utf8` (the default)
//!   is 422 `not_utf8`.
//! - `GET .../partitions/{p}/records` returns records from `offset` with
//!   `next_offset` and `high_watermark`; `max_records` caps a page, paging with
//!   `next_offset` reads everything once, in order; `max_bytes` is soft (at
//!   least one record when one exists); a missing key reads as `null`; a
//!   missing timestamp is the broker's clock.
//! - An offset above the high watermark is 416 `offset_out_of_range` whose
//!   message names the offset, the log start offset and the high watermark;
//!   an offset equal to the high watermark is an empty page.
//! - `wait_ms` long-polls: a fetch parked at the high watermark returns the
//!   record produced while it waits (on every partition, whichever shard owns
//!   it), and an expired wait returns no records with `next_offset == offset`.
//! - Bad produce or fetch input is 400 `invalid_request` (or 404 for unknown
//!   partitions) and writes nothing, even when only one record of a request is
//!   bad. `/metrics` reports the high watermark per partition.
//!
//! Files: `produce.rs` (where records land, their offsets, encodings, bad
//! produce input), `fetch.rs` (reading: bounds, parameters, long-poll,
//! paging, byte budgets, metrics).

#[path = "../common/mod.rs"]
mod common;
mod fetch;
mod produce;

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use serde_json::{json, Value};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}
