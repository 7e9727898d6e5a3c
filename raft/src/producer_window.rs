//! `ProducerWindow`: a partition replica's idempotent window, which
//! batches each producer wrote lately, so that a retry is answered with
//! the first write's offsets and written nothing, a gap is refused and an
//! older epoch is fenced (the spec's §3.4; docs/design/raft-produce.md
//! "Idempotent producers").
//!
//! Replicated state: every replica updates its window as it **applies**
//! an entry, from the producer stamps of the entry's batches, in log
//! order, so every replica holds the same window and a new leader has it.
//! The rules are the standalone broker's (`broker/src/producers/
//! idempotence.rs`, `ProducerTable::check`), re-implemented here with the
//! same outcomes and codes, without its clocks: expiry by idle time is
//! the standalone broker's; here the window keeps at most
//! [`PRODUCER_WINDOW_PRODUCERS_MAX`] producers and forgets the one whose
//! last batch is oldest (deterministic: the same on every replica).
//!
//! Its image (`image`/`restore`) is the `producers` bytes of a partition
//! snapshot: a replica restarted from a snapshot gets the window as of
//! it, and re-applies the entries after it.

use std::collections::{BTreeSet, HashMap, VecDeque};

use es_storage::ProducerStamp;
use serde::{Deserialize, Serialize};

use crate::controller::command::{refusal, Refusal};
use crate::limits::{PRODUCER_WINDOW_BATCHES, PRODUCER_WINDOW_PRODUCERS_MAX};

/// What a producer sends with a batch (its header's producer stamp).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub epoch: i16,
    /// Sequence of the batch's first record in this partition.
    pub sequence: i32,
}

impl ProducerFields {
    /// The fields of a batch's stamp; `None` for a batch without one.
    pub fn of(stamp: ProducerStamp) -> Option<ProducerFields> {
        (stamp != ProducerStamp::NONE).then_some(ProducerFields {
            producer_id: stamp.producer_id,
            epoch: stamp.epoch,
            sequence: stamp.base_sequence,
        })
    }
}

/// Where a batch of the window is: written at a base offset, or (on the
/// leader, between proposal and apply) in flight under some key.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum At<K> {
    Offset(u64),
    Pending(K),
}

/// One batch a producer wrote.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Written<K> {
    pub sequence: i32,
    pub count: u32,
    pub at: At<K>,
}

/// The decision for a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Check<K> {
    /// New: append it.
    Append,
    /// A retry of a batch already written (or in flight) there.
    Duplicate(At<K>),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ProducerState {
    epoch: i16,
    recent: VecDeque<(i32, u32, u64)>,
    /// The base offset of its last batch (what eviction goes by).
    last: u64,
}

/// A partition's window (see the module's notes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerWindow {
    producers: HashMap<i64, ProducerState>,
    /// (last base offset, id) of every producer: the oldest goes first.
    by_last: BTreeSet<(u64, i64)>,
}

fn invalid(m: String) -> Refusal {
    Refusal::new(refusal::INVALID_REQUEST, m)
}

fn out_of_order(f: ProducerFields, expected: i32) -> Refusal {
    Refusal::new(
        refusal::OUT_OF_ORDER_SEQUENCE,
        format!(
            "producer {} sent sequence {} but the partition expects {expected}: a batch before it is missing",
            f.producer_id, f.sequence
        ),
    )
}

/// The standalone broker's check of a batch of `count` records against a
/// producer's state: `epoch` and recent batches, oldest first (`None`: the
/// partition does not know the producer).
pub fn check_against<K: Copy>(
    state: Option<(i16, &[Written<K>])>,
    f: ProducerFields,
    count: u32,
) -> Result<Check<K>, Refusal> {
    if f.producer_id < 0 || f.epoch < 0 || f.sequence < 0 {
        return Err(invalid(
            "producer_id, epoch and sequence must be non-negative".into(),
        ));
    }
    let Some((epoch, recent)) = state else {
        return if f.sequence == 0 {
            Ok(Check::Append)
        } else {
            Err(out_of_order(f, 0))
        };
    };
    if f.epoch < epoch {
        return Err(Refusal::new(
            refusal::PRODUCER_FENCED,
            format!(
                "producer {} epoch {} is fenced by epoch {epoch}: a newer instance of this producer exists",
                f.producer_id, f.epoch
            ),
        ));
    }
    if f.epoch > epoch {
        // A new epoch starts its sequences again.
        return if f.sequence == 0 {
            Ok(Check::Append)
        } else {
            Err(out_of_order(f, 0))
        };
    }
    if let Some(w) = recent.iter().find(|w| w.sequence == f.sequence) {
        if w.count != count {
            return Err(invalid(format!(
                "sequence {} was written with {} records, this retry has {count}",
                f.sequence, w.count
            )));
        }
        return Ok(Check::Duplicate(w.at));
    }
    if let Some(w) = recent
        .iter()
        .find(|w| f.sequence > w.sequence && (f.sequence as i64) < w.sequence as i64 + w.count as i64)
    {
        return Err(invalid(format!(
            "sequence {} falls inside the batch written with sequence {} ({} records): retry that batch whole",
            f.sequence, w.sequence, w.count
        )));
    }
    let expected = recent
        .last()
        .map_or(0, |w| w.sequence.wrapping_add(w.count as i32));
    if f.sequence == expected {
        return Ok(Check::Append);
    }
    if f.sequence < expected {
        return Err(Refusal::new(
            refusal::DUPLICATE_SEQUENCE,
            format!(
                "sequence {} of producer {} was written before the last {PRODUCER_WINDOW_BATCHES} batches; its offsets are no longer known",
                f.sequence, f.producer_id
            ),
        ));
    }
    Err(out_of_order(f, expected))
}

/// A producer's serialized form: id, epoch, recent batches as
/// (sequence, count, base offset).
#[derive(Serialize, Deserialize)]
struct ProducerImage(i64, i16, Vec<(i32, u32, u64)>);

#[derive(Serialize, Deserialize)]
struct WindowImage {
    producers: Vec<ProducerImage>,
}

impl ProducerWindow {
    /// A producer's epoch and recent batches (written ones: `At::Offset`).
    pub fn state_of<K>(&self, producer_id: i64) -> Option<(i16, Vec<Written<K>>)> {
        self.producers.get(&producer_id).map(|s| {
            (
                s.epoch,
                s.recent
                    .iter()
                    .map(|&(sequence, count, base)| Written {
                        sequence,
                        count,
                        at: At::Offset(base),
                    })
                    .collect(),
            )
        })
    }

    /// Decides what to do with a batch of `count` records.
    pub fn check(&self, f: ProducerFields, count: u32) -> Result<Check<()>, Refusal> {
        let state = self.state_of::<()>(f.producer_id);
        check_against(state.as_ref().map(|(e, r)| (*e, r.as_slice())), f, count)
    }

    /// Records a batch written at `base_offset` (it passed `check`).
    pub fn record(&mut self, f: ProducerFields, count: u32, base_offset: u64) {
        let state = self.producers.entry(f.producer_id).or_default();
        self.by_last.remove(&(state.last, f.producer_id));
        if f.epoch > state.epoch {
            state.epoch = f.epoch;
            state.recent.clear();
        }
        state.recent.push_back((f.sequence, count, base_offset));
        while state.recent.len() > PRODUCER_WINDOW_BATCHES {
            state.recent.pop_front();
        }
        state.last = base_offset;
        self.by_last.insert((base_offset, f.producer_id));
        while self.producers.len() > PRODUCER_WINDOW_PRODUCERS_MAX {
            let Some((_, oldest)) = self.by_last.pop_first() else {
                break;
            };
            self.producers.remove(&oldest);
        }
    }

    /// Applies one batch of an applied entry (its header): a batch
    /// without a producer stamp, or one the window takes, is answered its
    /// base offset (and recorded); a retry of a batch the window holds is
    /// answered the first write's offset and not recorded again; one the
    /// window refuses is answered the refusal. The last two do not happen
    /// when the leader's Proposer checked the batch (it never proposes
    /// them); applied the same way on every replica, they keep every
    /// window the same if ever they do.
    pub fn apply(&mut self, h: &es_storage::batch::BatchHeader) -> Result<u64, Refusal> {
        let base = h.base_offset.0;
        let Some(f) = ProducerFields::of(h.producer) else {
            return Ok(base);
        };
        match self.check(f, h.record_count)? {
            Check::Append => {
                self.record(f, h.record_count, base);
                Ok(base)
            }
            Check::Duplicate(At::Offset(first)) => {
                tracing::warn!(
                    producer_id = f.producer_id,
                    sequence = f.sequence,
                    base,
                    first,
                    "a retry reached the log as a new batch; answered with the first write"
                );
                Ok(first)
            }
            Check::Duplicate(At::Pending(())) => Ok(base),
        }
    }

    /// Producers the window holds.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The window as bytes (JSON `{"producers": [[id, epoch, [[seq,
    /// count, base], ..]], ..]}`, sorted by id): a partition snapshot's
    /// `producers`.
    pub fn image(&self) -> Vec<u8> {
        let mut producers: Vec<ProducerImage> = self
            .producers
            .iter()
            .map(|(id, s)| ProducerImage(*id, s.epoch, s.recent.iter().copied().collect()))
            .collect();
        producers.sort_by_key(|p| p.0);
        // Plain numbers: it always serializes.
        serde_json::to_vec(&WindowImage { producers }).unwrap_or_default()
    }

    /// The window of an [`image`](Self::image); empty bytes are an empty
    /// window.
    pub fn restore(bytes: &[u8]) -> Result<ProducerWindow, String> {
        let mut w = ProducerWindow::default();
        if bytes.is_empty() {
            return Ok(w);
        }
        let image: WindowImage =
            serde_json::from_slice(bytes).map_err(|e| format!("a producer window image: {e}"))?;
        for ProducerImage(id, epoch, recent) in image.producers {
            if recent.is_empty() || recent.len() > PRODUCER_WINDOW_BATCHES || w.producers.contains_key(&id) {
                return Err(format!("a producer window image: producer {id} is malformed"));
            }
            let last = recent.last().map_or(0, |r| r.2);
            w.by_last.insert((last, id));
            w.producers.insert(
                id,
                ProducerState {
                    epoch,
                    recent: recent.into(),
                    last,
                },
            );
        }
        if w.producers.len() > PRODUCER_WINDOW_PRODUCERS_MAX {
            return Err(format!(
                "a producer window image of {} producers",
                w.producers.len()
            ));
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any bytes: an image or an error, never a panic; an image read
        /// back writes the same bytes.
        #[test]
        fn restore_takes_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(w) = ProducerWindow::restore(&bytes) {
                prop_assert_eq!(ProducerWindow::restore(&w.image()).unwrap(), w);
            }
        }

        /// Any run of batches recorded: the image restores the same window,
        /// which gives the same answers.
        #[test]
        fn windows_round_trip(ops in proptest::collection::vec((0i64..4, 0i16..2, 0i32..12, 1u32..4), 0..40)) {
            let mut w = ProducerWindow::default();
            let mut offset = 0u64;
            for (id, epoch, seq, count) in ops {
                let f = ProducerFields { producer_id: id, epoch, sequence: seq };
                if w.check(f, count) == Ok(Check::Append) {
                    w.record(f, count, offset);
                    offset += count as u64;
                }
            }
            let back = ProducerWindow::restore(&w.image()).unwrap();
            prop_assert_eq!(&back, &w);
            for id in 0..4 {
                for seq in 0..12 {
                    let f = ProducerFields { producer_id: id, epoch: 0, sequence: seq };
                    prop_assert_eq!(back.check(f, 1), w.check(f, 1));
                }
            }
        }
    }

    fn f(seq: i32) -> ProducerFields {
        ProducerFields {
            producer_id: 7,
            epoch: 0,
            sequence: seq,
        }
    }

    fn code(r: Result<Check<()>, Refusal>) -> String {
        match r {
            Ok(Check::Append) => "append".into(),
            Ok(Check::Duplicate(At::Offset(o))) => format!("duplicate@{o}"),
            Ok(Check::Duplicate(At::Pending(()))) => "pending".into(),
            Err(e) => e.code,
        }
    }

    // The standalone broker's test (producers/idempotence.rs), the same
    // outcomes.
    #[test]
    fn sequences_duplicates_gaps_and_fencing() {
        let mut t = ProducerWindow::default();
        assert_eq!(code(t.check(f(1), 1)), "out_of_order_sequence");
        assert_eq!(code(t.check(f(0), 3)), "append");
        t.record(f(0), 3, 100);
        assert_eq!(code(t.check(f(0), 3)), "duplicate@100");
        assert_eq!(code(t.check(f(0), 2)), "invalid_request");
        assert_eq!(code(t.check(f(4), 1)), "out_of_order_sequence");
        assert_eq!(
            code(t.check(f(1), 2)),
            "invalid_request",
            "inside a written batch"
        );
        assert_eq!(code(t.check(f(3), 1)), "append");
        for i in 0..PRODUCER_WINDOW_BATCHES as i32 {
            t.record(f(3 + i), 1, 200 + i as u64);
        }
        assert_eq!(code(t.check(f(0), 3)), "duplicate_sequence", "out of the window");
        assert_eq!(code(t.check(f(7), 1)), "duplicate@204");
        let new = ProducerFields { epoch: 1, ..f(0) };
        assert_eq!(code(t.check(new, 1)), "append");
        t.record(new, 1, 300);
        assert_eq!(code(t.check(f(8), 1)), "producer_fenced");
        assert_eq!(code(t.check(ProducerFields { epoch: 1, ..f(1) }, 1)), "append");
        assert_eq!(
            code(t.check(
                ProducerFields {
                    producer_id: -1,
                    ..f(0)
                },
                1
            )),
            "invalid_request"
        );
    }

    fn header(base: u64, count: u32, pid: i64, seq: i32) -> es_storage::batch::BatchHeader {
        let recs: Vec<es_storage::Record> = (0..count)
            .map(|_| es_storage::Record {
                key: None,
                value: b"v".to_vec(),
                timestamp_ms: 1,
            })
            .collect();
        let stamp = if pid < 0 {
            ProducerStamp::NONE
        } else {
            ProducerStamp {
                producer_id: pid,
                epoch: 0,
                base_sequence: seq,
            }
        };
        let mut out = Vec::new();
        es_storage::batch::encode(es_storage::Offset(base), &recs, stamp, &mut out);
        es_storage::batch::BatchHeader::parse(&out).unwrap()
    }

    #[test]
    fn apply_records_new_batches_and_answers_the_rest_alike() {
        let mut w = ProducerWindow::default();
        assert_eq!(w.apply(&header(0, 2, -1, 0)), Ok(0), "no stamp");
        assert!(w.is_empty());
        assert_eq!(w.apply(&header(2, 2, 7, 0)), Ok(2));
        // A retry that reached the log: the first write's offset, not recorded.
        assert_eq!(w.apply(&header(4, 2, 7, 0)), Ok(2));
        assert_eq!(
            code(w.check(f(2), 1)),
            "append",
            "the window goes on from the first write"
        );
        assert_eq!(
            w.apply(&header(6, 1, 7, 5)).unwrap_err().code,
            "out_of_order_sequence"
        );
        assert_eq!(w.apply(&header(7, 1, 7, 2)), Ok(7));
        let mut again = ProducerWindow::default();
        for (b, c, p, s) in [
            (0, 2, -1, 0),
            (2, 2, 7, 0),
            (4, 2, 7, 0),
            (6, 1, 7, 5),
            (7, 1, 7, 2),
        ] {
            let _ = again.apply(&header(b, c, p, s));
        }
        assert_eq!(again, w, "the same entries, the same window");
    }

    #[test]
    fn the_image_round_trips_and_bad_images_are_refused() {
        let mut t = ProducerWindow::default();
        t.record(f(0), 2, 10);
        t.record(
            ProducerFields {
                producer_id: 3,
                ..f(0)
            },
            1,
            12,
        );
        t.record(f(2), 1, 13);
        let back = ProducerWindow::restore(&t.image()).unwrap();
        assert_eq!(back, t);
        assert_eq!(code(back.check(f(2), 1)), "duplicate@13");
        assert_eq!(ProducerWindow::restore(b"").unwrap(), ProducerWindow::default());
        for bad in [
            &b"{"[..],
            br#"{"producers": [[1, 0, []]]}"#,
            br#"{"producers": [[1, 0, [[0,1,1]]], [1, 0, [[0,1,1]]]]}"#,
            br#"{"producers": [[1, 0, [[0,1,1],[1,1,2],[2,1,3],[3,1,4],[4,1,5],[5,1,6]]]]}"#,
        ] {
            assert!(
                ProducerWindow::restore(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_producer_written_longest_ago_is_forgotten_past_the_bound() {
        let mut t = ProducerWindow::default();
        for id in 0..PRODUCER_WINDOW_PRODUCERS_MAX as i64 {
            t.record(
                ProducerFields {
                    producer_id: id,
                    ..f(0)
                },
                1,
                100 + id as u64,
            );
        }
        // Producer 0 writes again: producer 1 is now the oldest.
        t.record(
            ProducerFields {
                producer_id: 0,
                ..f(1)
            },
            1,
            1_000_000,
        );
        t.record(
            ProducerFields {
                producer_id: 1_000_000,
                ..f(0)
            },
            1,
            1_000_001,
        );
        assert_eq!(t.len(), PRODUCER_WINDOW_PRODUCERS_MAX);
        assert!(t.state_of::<()>(1).is_none(), "forgotten");
        assert!(t.state_of::<()>(0).is_some());
        assert_eq!(
            code(t.check(
                ProducerFields {
                    producer_id: 1,
                    ..f(1)
                },
                1
            )),
            "out_of_order_sequence",
            "as after an expiry"
        );
    }
}
