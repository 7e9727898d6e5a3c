//! The groups log's format: the records a shard appends to
//! `<data-dir>/groups/shard-<i>-of-<n>.log` for the groups it coordinates,
//! and the scan that reads them back. Pure: no I/O, so the encoder, the
//! decoder and the scan's handling of damage are tested here byte by byte.
//!
//! A record, all integers little-endian:
//!
//! ```text
//!  0  4  len       u32  bytes of the record, header included
//!  4  4  crc       u32  CRC-32 (IEEE, crc32fast) of bytes [0,4) ++ [8,len)
//!  8  1  magic     u8   format version, 1
//!  9  1  kind      u8   1 commit, 2 snapshot, 3 delete, 4 members, 5 owner
//! 10  1  flags     u8   bit 0: the group had members when this was written
//! 11  8  at_ms     i64  ms since the Unix epoch: when it was written
//! 19  1  name_len  u8   1..=249
//! 20  …  name           the group's name
//!  …  …  body           commit and snapshot only, below
//! ```
//!
//! The body of a commit or a snapshot is its offsets in runs of one topic:
//! `u32 runs`, then per run `u8 topic_len`, the topic, `u32 count` and
//! `count` times `u32 partition, u64 offset`. A **commit** sets the offsets
//! it names (later entries win) and leaves the group's others alone; a
//! **snapshot** is a group's whole state and replaces whatever came
//! before; a **delete** forgets the group; **members** records that a group
//! with offsets gained its first member (flag set) or lost its last (flag
//! clear), which is what offset retention counts from; **owner** (body: `u8
//! len`, the key id) records the API key that owns the group
//! (docs/security.md), written after the commit or snapshot it goes with:
//! a snapshot clears the owner, the owner record after it restores it.
//! Logs written before owners existed have no owner records and load as
//! they did (their groups have no owner).

use crate::limits::GROUP_LOG_RECORD_BYTES_MAX;
use crate::topics::topic::{validate_group_name, validate_name};

/// Format version.
pub const MAGIC: u8 = 1;
/// Bytes before the name.
pub const HEADER_BYTES: usize = 20;

const KIND_COMMIT: u8 = 1;
const KIND_SNAPSHOT: u8 = 2;
const KIND_DELETE: u8 = 3;
const KIND_MEMBERS: u8 = 4;
const KIND_OWNER: u8 = 5;
/// Longest owner (a key id is 16 characters).
const OWNER_BYTES_MAX: usize = 64;
const FLAG_MEMBERS: u8 = 1;

/// What a record says, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Sets the offsets it names.
    Commit {
        group: String,
        at_ms: i64,
        members: bool,
        offsets: Vec<(String, u32, u64)>,
    },
    /// The group's whole state.
    Snapshot {
        group: String,
        at_ms: i64,
        members: bool,
        offsets: Vec<(String, u32, u64)>,
    },
    /// The group is gone (deleted, or its offsets expired).
    Delete { group: String, at_ms: i64 },
    /// The group gained its first member (`members`) or lost its last.
    Members {
        group: String,
        at_ms: i64,
        members: bool,
    },
    /// The API key that owns the group.
    Owner {
        group: String,
        at_ms: i64,
        owner: String,
    },
}

/// Whether `owner` can be an owner record's key id (what
/// [`encode_owner`] takes and [`decode`] accepts).
pub fn valid_owner(owner: &str) -> bool {
    !owner.is_empty() && owner.len() <= OWNER_BYTES_MAX
}

/// Appends an owner record of `group` to `out`, if it has an `owner`.
pub fn encode_owner(out: &mut Vec<u8>, group: &str, at_ms: i64, owner: Option<&str>) {
    let Some(owner) = owner else { return };
    assert!(valid_owner(owner), "a key id");
    let start = begin(out, KIND_OWNER, false, at_ms, group);
    out.push(owner.len() as u8);
    out.extend_from_slice(owner.as_bytes());
    finish(out, start);
}

/// Appends a commit or snapshot record of `offsets` to `out`.
pub fn encode_offsets<'a>(
    out: &mut Vec<u8>,
    snapshot: bool,
    group: &str,
    at_ms: i64,
    members: bool,
    offsets: impl IntoIterator<Item = (&'a str, u32, u64)>,
) {
    let kind = if snapshot { KIND_SNAPSHOT } else { KIND_COMMIT };
    let start = begin(out, kind, members, at_ms, group);
    let runs_at = out.len();
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut runs = 0u32;
    let mut run: Option<(&str, usize, u32)> = None;
    for (topic, partition, offset) in offsets {
        match &mut run {
            Some((t, _, count)) if *t == topic => *count += 1,
            _ => {
                if let Some((_, at, count)) = run {
                    out[at..at + 4].copy_from_slice(&count.to_le_bytes());
                }
                runs += 1;
                out.push(topic.len() as u8);
                out.extend_from_slice(topic.as_bytes());
                run = Some((topic, out.len(), 1));
                out.extend_from_slice(&0u32.to_le_bytes());
            }
        }
        out.extend_from_slice(&partition.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    if let Some((_, at, count)) = run {
        out[at..at + 4].copy_from_slice(&count.to_le_bytes());
    }
    out[runs_at..runs_at + 4].copy_from_slice(&runs.to_le_bytes());
    finish(out, start);
}

/// Appends a delete record to `out`.
pub fn encode_delete(out: &mut Vec<u8>, group: &str, at_ms: i64) {
    let start = begin(out, KIND_DELETE, false, at_ms, group);
    finish(out, start);
}

/// Appends a members record to `out`.
pub fn encode_members(out: &mut Vec<u8>, group: &str, at_ms: i64, members: bool) {
    let start = begin(out, KIND_MEMBERS, members, at_ms, group);
    finish(out, start);
}

fn begin(out: &mut Vec<u8>, kind: u8, members: bool, at_ms: i64, group: &str) -> usize {
    debug_assert!(validate_group_name(group).is_ok(), "a valid group name");
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    out.push(MAGIC);
    out.push(kind);
    out.push(if members { FLAG_MEMBERS } else { 0 });
    out.extend_from_slice(&at_ms.to_le_bytes());
    out.push(group.len() as u8);
    out.extend_from_slice(group.as_bytes());
    start
}

fn finish(out: &mut [u8], start: usize) {
    let len = out.len() - start;
    assert!(
        len <= GROUP_LOG_RECORD_BYTES_MAX,
        "a group record over the format's limit"
    );
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc(&out[start..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn crc(record: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&record[..4]);
    h.update(&record[8..]);
    h.finalize()
}

/// Why the bytes at a position are not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// Fewer bytes left than the record needs (a write cut short).
    Incomplete,
    /// The bytes are there but are not a record.
    Malformed(&'static str),
}

/// Decodes the record at the start of `bytes`: the record and its length.
pub fn decode(bytes: &[u8]) -> Result<(Record, usize), Bad> {
    if bytes.len() < HEADER_BYTES {
        return Err(Bad::Incomplete);
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    if !(HEADER_BYTES + 1..=GROUP_LOG_RECORD_BYTES_MAX).contains(&len) {
        return Err(Bad::Malformed("record length out of range"));
    }
    if bytes[8] != MAGIC {
        return Err(Bad::Malformed("unknown magic"));
    }
    if !(KIND_COMMIT..=KIND_OWNER).contains(&bytes[9]) {
        return Err(Bad::Malformed("unknown record kind"));
    }
    if bytes.len() < len {
        return Err(Bad::Incomplete);
    }
    let record = &bytes[..len];
    let stored = u32::from_le_bytes(record[4..8].try_into().expect("4 bytes"));
    if crc(record) != stored {
        return Err(Bad::Malformed("checksum mismatch"));
    }
    let mut r = Reader { bytes: record, at: 9 };
    let parsed = (|| {
        let kind = r.u8()?;
        let flags = r.u8()?;
        let at_ms = r.u64()? as i64;
        let group = r.name(validate_group_name)?;
        let members = flags & FLAG_MEMBERS != 0;
        let record = match kind {
            KIND_COMMIT | KIND_SNAPSHOT => {
                let offsets = r.offsets()?;
                if kind == KIND_COMMIT {
                    Record::Commit {
                        group,
                        at_ms,
                        members,
                        offsets,
                    }
                } else {
                    Record::Snapshot {
                        group,
                        at_ms,
                        members,
                        offsets,
                    }
                }
            }
            KIND_DELETE => Record::Delete { group, at_ms },
            KIND_OWNER => {
                let n = r.u8()? as usize;
                let owner = std::str::from_utf8(r.take(n)?).map_err(|_| "an owner that is not UTF-8")?;
                if !valid_owner(owner) {
                    return Err("an owner of a bad length");
                }
                Record::Owner {
                    group,
                    at_ms,
                    owner: owner.to_string(),
                }
            }
            _ => Record::Members {
                group,
                at_ms,
                members,
            },
        };
        if r.at != len {
            return Err("bytes after the record's body");
        }
        Ok(record)
    })();
    // The checksum held, so a body that does not parse was written wrong:
    // not a torn write.
    parsed.map(|rec| (rec, len)).map_err(Bad::Malformed)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or("a field runs past the record's end")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn name<E>(&mut self, valid: impl Fn(&str) -> Result<(), E>) -> Result<String, &'static str> {
        let n = self.u8()? as usize;
        let raw = self.take(n)?;
        let s = std::str::from_utf8(raw).map_err(|_| "a name that is not UTF-8")?;
        valid(s).map_err(|_| "an invalid name")?;
        Ok(s.to_string())
    }

    fn offsets(&mut self) -> Result<Vec<(String, u32, u64)>, &'static str> {
        let runs = self.u32()?;
        let mut out = Vec::new();
        for _ in 0..runs {
            let topic = self.name(validate_name)?;
            let count = self.u32()? as usize;
            // Each entry takes 12 bytes: a count the record cannot hold is
            // refused before anything is allocated for it.
            if count == 0 || count > (self.bytes.len() - self.at) / 12 {
                return Err("a run's count does not fit the record");
            }
            out.reserve(count);
            for _ in 0..count {
                let p = self.u32()?;
                let o = self.u64()?;
                out.push((topic.clone(), p, o));
            }
        }
        Ok(out)
    }
}

/// Where a scan stopped short of the end of the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Byte position of the first bad record.
    pub position: usize,
    pub reason: String,
    /// Records that decode (checksum and all) after the damage: none means
    /// a torn tail, what a crash in the middle of an append leaves; any
    /// means corruption.
    pub intact_after: usize,
    /// Position of the first of them.
    pub first_intact_at: Option<usize>,
}

/// Decodes the records of `bytes` in order, handing each to `apply`, up to
/// the end or the first bad record; then looks past a bad one for records
/// that still decode, which tell corruption from a torn tail.
pub fn scan(bytes: &[u8], mut apply: impl FnMut(Record)) -> Option<Damage> {
    let mut at = 0;
    while at < bytes.len() {
        match decode(&bytes[at..]) {
            Ok((record, len)) => {
                apply(record);
                at += len;
            }
            Err(bad) => {
                let reason = match bad {
                    Bad::Incomplete => "a record cut short".to_string(),
                    Bad::Malformed(why) => why.to_string(),
                };
                let (intact_after, first_intact_at) = intact_after(bytes, at + 1);
                return Some(Damage {
                    position: at,
                    reason,
                    intact_after,
                    first_intact_at,
                });
            }
        }
    }
    None
}

/// Records that decode from `from` on, searched byte by byte and then walked
/// record by record (searching again past each break): how many, and where
/// the first begins.
fn intact_after(bytes: &[u8], from: usize) -> (usize, Option<usize>) {
    let mut count = 0;
    let mut first = None;
    let mut at = from;
    while at < bytes.len() {
        match decode(&bytes[at..]) {
            Ok((_, len)) => {
                count += 1;
                first.get_or_insert(at);
                at += len;
            }
            Err(_) => at += 1,
        }
    }
    (count, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(group: &str, offsets: &[(&str, u32, u64)]) -> Record {
        Record::Commit {
            group: group.into(),
            at_ms: 1_700_000_000_000,
            members: true,
            offsets: offsets.iter().map(|(t, p, o)| (t.to_string(), *p, *o)).collect(),
        }
    }

    fn encode(r: &Record) -> Vec<u8> {
        let mut out = Vec::new();
        match r {
            Record::Commit {
                group,
                at_ms,
                members,
                offsets,
            }
            | Record::Snapshot {
                group,
                at_ms,
                members,
                offsets,
            } => encode_offsets(
                &mut out,
                matches!(r, Record::Snapshot { .. }),
                group,
                *at_ms,
                *members,
                offsets.iter().map(|(t, p, o)| (t.as_str(), *p, *o)),
            ),
            Record::Delete { group, at_ms } => encode_delete(&mut out, group, *at_ms),
            Record::Members {
                group,
                at_ms,
                members,
            } => encode_members(&mut out, group, *at_ms, *members),
            Record::Owner { group, at_ms, owner } => encode_owner(&mut out, group, *at_ms, Some(owner)),
        }
        out
    }

    fn samples() -> Vec<Record> {
        vec![
            commit(
                "billing",
                &[("orders", 0, 5), ("orders", 3, 9), ("audit", 1, u64::MAX)],
            ),
            Record::Snapshot {
                group: "g.1-x_".into(),
                at_ms: -1,
                members: false,
                offsets: vec![("t".into(), u32::MAX, 0)],
            },
            Record::Delete {
                group: "billing".into(),
                at_ms: 7,
            },
            Record::Members {
                group: "billing".into(),
                at_ms: 8,
                members: false,
            },
            Record::Members {
                group: "b".repeat(249),
                at_ms: 9,
                members: true,
            },
            Record::Owner {
                group: "billing".into(),
                at_ms: 10,
                owner: "q3x7k2m5w4a6b2cd".into(),
            },
        ]
    }

    /// A log written before owner records existed (kinds 1-4 only, these
    /// exact bytes) reads back as it did.
    #[test]
    fn a_log_from_before_owners_loads() {
        let mut old = Vec::new();
        encode_offsets(&mut old, false, "g", 1, false, [("t", 0, 5)]);
        encode_members(&mut old, "g", 2, true);
        let mut read = Vec::new();
        assert_eq!(scan(&old, |r| read.push(r)), None);
        assert_eq!(read.len(), 2);
        assert!(read.iter().all(|r| !matches!(r, Record::Owner { .. })));
        let mut none = Vec::new();
        encode_owner(&mut none, "g", 3, None);
        assert!(none.is_empty(), "no owner, no record");
    }

    #[test]
    fn records_round_trip() {
        let mut log = Vec::new();
        for r in samples() {
            let bytes = encode(&r);
            assert_eq!(decode(&bytes), Ok((r.clone(), bytes.len())), "{r:?}");
            log.extend_from_slice(&bytes);
        }
        let mut read = Vec::new();
        assert_eq!(scan(&log, |r| read.push(r)), None);
        assert_eq!(read, samples());
    }

    #[test]
    fn a_commit_keeps_its_order_and_duplicates() {
        let r = commit("g", &[("b", 1, 1), ("a", 0, 2), ("b", 1, 3), ("b", 0, 4)]);
        let bytes = encode(&r);
        assert_eq!(decode(&bytes).unwrap().0, r);
    }

    /// A log cut at every byte of its last record reads as the records
    /// before it and a torn tail, never as corruption; so does one whose
    /// tail is zeros (a file extended by a crash).
    #[test]
    fn a_log_cut_anywhere_in_its_last_record_is_a_torn_tail() {
        let mut log = Vec::new();
        for r in &samples()[..3] {
            log.extend_from_slice(&encode(r));
        }
        let whole = log.len();
        let last = encode(&samples()[3]);
        log.extend_from_slice(&last);
        for cut in whole..log.len() {
            let mut read = 0;
            let damage = scan(&log[..cut], |_| read += 1);
            assert_eq!(read, 3, "cut at {cut}");
            if cut == whole {
                assert_eq!(damage, None);
            } else {
                let d = damage.expect("damage");
                assert_eq!((d.position, d.intact_after), (whole, 0), "cut at {cut}: {d:?}");
            }
        }
        let mut zeros = log[..whole].to_vec();
        zeros.extend_from_slice(&[0; 4096]);
        let d = scan(&zeros, |_| {}).expect("damage");
        assert_eq!((d.position, d.intact_after), (whole, 0));
    }

    /// A flipped byte anywhere in a record with intact records after it is
    /// corruption, found where that record begins.
    #[test]
    fn damage_before_intact_records_is_corruption() {
        let records: Vec<Vec<u8>> = samples().iter().map(encode).collect();
        let log: Vec<u8> = records.concat();
        let start_of_second = records[0].len();
        for i in start_of_second..start_of_second + records[1].len() {
            let mut bad = log.clone();
            bad[i] ^= 0x5a;
            let mut read = 0;
            let d = scan(&bad, |_| read += 1).unwrap_or_else(|| panic!("byte {i}: no damage"));
            assert_eq!(read, 1, "byte {i}");
            assert_eq!(d.position, start_of_second, "byte {i}");
            assert!(d.intact_after >= 3, "byte {i}: {d:?}");
            assert_eq!(
                d.first_intact_at,
                Some(start_of_second + records[1].len()),
                "byte {i}"
            );
        }
    }

    #[test]
    fn hostile_bytes_never_panic() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(&proptest::collection::vec(any::<u8>(), 0..300), |bytes| {
                let _ = decode(&bytes);
                let _ = scan(&bytes, |_| {});
                Ok(())
            })
            .unwrap();
        // A record whose checksum holds but whose body lies about its counts.
        let mut out = Vec::new();
        let start = begin(&mut out, KIND_COMMIT, false, 0, "g");
        out.extend_from_slice(&1u32.to_le_bytes());
        out.push(1);
        out.push(b't');
        out.extend_from_slice(&u32::MAX.to_le_bytes());
        finish(&mut out, start);
        assert_eq!(
            decode(&out),
            Err(Bad::Malformed("a run's count does not fit the record"))
        );
        // An invalid group name with a good checksum.
        let mut out = Vec::new();
        let start = out.len();
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&[MAGIC, KIND_DELETE, 0]);
        out.extend_from_slice(&0i64.to_le_bytes());
        out.push(3);
        out.extend_from_slice(b"a/b");
        finish(&mut out, start);
        assert_eq!(decode(&out), Err(Bad::Malformed("an invalid name")));
    }
}
