//! `Proposer`: a partition leader's produce queue, which keeps group
//! commit under replication (the spec's §2.3, docs/design/raft-produce.md).
//!
//! openraft 0.9 makes one entry, one append and one awaited flush of each
//! `client_write`; N produces proposed one by one would cost N flushes per
//! replica. So produces queue here (arrival order is log order) and, while
//! fewer than `in_flight_max` entries are in flight, [`flush`] takes
//! everything queued (up to `entry_bytes_max` of batches; a bigger batch
//! goes alone) as one `Proposal::Batches` entry. When its `client_write`
//! returns, each produce gets its batch's base offset from
//! `Applied::Offsets`, and the next round starts with whatever queued
//! meanwhile. With two entries in flight, entry k+1's leader flush overlaps
//! entry k's replication.
//!
//! The queue is bounded in bytes (`queue_bytes_max`): a produce that does
//! not fit waits for room (back-pressure), up to its produce timeout; an
//! empty queue takes any one batch.
//!
//! Answers (the spec's §2.4): only "never proposed" is a definite failure.
//! A produce refused before its entry went to openraft is `NotLeader` or
//! `LeaderNotAvailable`; once proposed, anything but the applied offsets is
//! `OutcomeUnknown` (a `ForwardToLeader` too: openraft also answers so the
//! entries a new leader cut, and a cut entry may still commit through
//! another replica that holds it), as is a produce whose commit is not seen
//! within the produce timeout.
//!
//! Idempotent batches (a producer stamp in the header) are checked here,
//! on the leader, right before their entry is handed to openraft, against
//! the partition's applied window and the idempotent batches in flight
//! (proposed, not yet answered): the check and the hand-over run with no
//! await between, so they see batches in log order. A retry of a written
//! batch is answered with its offsets and leaves the entry; a retry of a
//! batch in flight waits for that batch's answer and gets the same; a
//! refused one (fenced, out of order) is answered at once; the other
//! batches of the round still go in the entry. They are checked only once
//! this leader applied an entry of its own term (its blank one), so the
//! applied window holds everything committed before it
//! (docs/design/raft-produce.md "Idempotent producers").
//!
//! [`flush`]: Proposer::flush

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use es_storage::BatchBuf;
use futures::channel::oneshot;
use futures::future::{select, Either};
use glommio::timer::Timer;
use openraft::error::ClientWriteError;
use openraft::Raft;

use crate::controller::command::Refusal;
use crate::entry::{Applied, Proposal};
use crate::limits::PRODUCER_WINDOW_BATCHES;
use crate::partition_sm::PartitionSm;
use crate::producer_window::{check_against, At, Check, ProducerFields, Written};
use crate::replica_stats::{bump, ReplicaStats};
use crate::types::{EsRaft, NodeId};

/// Why a produce was not answered with an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProduceError {
    /// This replica does not lead the partition (`leader` does, if known):
    /// definite, the batch was never proposed.
    NotLeader { leader: Option<NodeId> },
    /// This replica leads but cannot take writes now (no quorum contact
    /// for longer than the election timeout, shutting down, the queue full
    /// for the whole timeout): definite, never proposed.
    LeaderNotAvailable(String),
    /// The batch was proposed and its fate is unknown: it may be committed
    /// (then it is in the log), or never.
    OutcomeUnknown(String),
    /// The batch itself is refused (malformed, too large): definite.
    Invalid(String),
    /// The partition's idempotent window refused the batch: `code` is
    /// `producer_fenced`, `out_of_order_sequence`, `duplicate_sequence` or
    /// `invalid_request` (a retry with another record count, a sequence
    /// inside a written batch): definite, nothing written.
    Refused(Refusal),
}

impl ProduceError {
    /// Whether the batch is known not to be written (every answer but
    /// `OutcomeUnknown`).
    pub fn is_definite(&self) -> bool {
        !matches!(self, ProduceError::OutcomeUnknown(_))
    }
}

impl fmt::Display for ProduceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProduceError::NotLeader { leader: Some(l) } => write!(f, "not the leader: node {l} leads"),
            ProduceError::NotLeader { leader: None } => write!(f, "not the leader, and no leader is known"),
            ProduceError::LeaderNotAvailable(why) => write!(f, "leader not available: {why}"),
            ProduceError::OutcomeUnknown(why) => write!(f, "outcome unknown: {why}"),
            ProduceError::Invalid(why) => write!(f, "invalid batch: {why}"),
            ProduceError::Refused(r) => write!(f, "refused: {r}"),
        }
    }
}

impl std::error::Error for ProduceError {}

/// How a Proposer batches and waits.
#[derive(Clone, Debug)]
pub struct ProposerConfig {
    /// Entries in flight at most (`--raft-proposals-in-flight`).
    pub in_flight_max: usize,
    /// Bytes of batches in one entry at most; a bigger batch goes alone
    /// (`--raft-entry-bytes-max`).
    pub entry_bytes_max: usize,
    /// Bytes of batches queued at most; a produce waits for room.
    pub queue_bytes_max: usize,
    /// How long a produce waits for its answer (`--produce-timeout-ms`).
    pub timeout: Duration,
}

/// Decides, before a batch is queued and again before its entry is
/// proposed, whether this replica may propose now.
pub type Gate = Rc<dyn Fn() -> Result<(), ProduceError>>;

type Answer = oneshot::Sender<Result<u64, ProduceError>>;

struct Pending {
    id: u64,
    batch: BatchBuf,
    /// The batch's producer stamp and record count (idempotent batches).
    producer: Option<(ProducerFields, u32)>,
    submitted: Instant,
    tx: Answer,
}

/// An idempotent batch proposed and not yet answered.
struct InFlight {
    key: u64,
    fields: ProducerFields,
    count: u32,
    /// Retries of it that arrived meanwhile: answered as it is.
    retries: Vec<Answer>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Pending>,
    queued_bytes: usize,
    in_flight: usize,
    next_id: u64,
    closed: bool,
    /// Produces waiting for room in the queue.
    room: Vec<oneshot::Sender<()>>,
    /// Idempotent batches in flight, per producer id, in log order.
    producers: HashMap<i64, Vec<InFlight>>,
    next_key: u64,
}

struct Inner {
    raft: Raft<EsRaft>,
    config: ProposerConfig,
    gate: Gate,
    /// Whether idempotent batches may be checked now (the leader applied
    /// an entry of its term).
    idempotent_gate: Gate,
    /// The applied window's owner.
    sm: PartitionSm,
    stats: Rc<ReplicaStats>,
    state: RefCell<State>,
}

/// A replica's produce queue; clones share it.
#[derive(Clone)]
pub struct Proposer(Rc<Inner>);

impl Proposer {
    /// The Proposer of the replica `raft` whose state machine is `sm`:
    /// `gate` checks its leadership, `idempotent_gate` whether it may check
    /// idempotent batches (see the module's notes).
    pub fn new(
        raft: Raft<EsRaft>,
        sm: PartitionSm,
        config: ProposerConfig,
        gate: Gate,
        idempotent_gate: Gate,
        stats: Rc<ReplicaStats>,
    ) -> Proposer {
        Proposer(Rc::new(Inner {
            raft,
            config,
            gate,
            idempotent_gate,
            sm,
            stats,
            state: RefCell::default(),
        }))
    }

    /// Queues `batch` (a checked version 2 data batch; `producer`: its
    /// stamp and record count when it has one) and answers its base offset
    /// once its entry is committed and applied (a retry of an idempotent
    /// batch: the first write's, nothing written).
    pub async fn submit(
        &self,
        batch: BatchBuf,
        producer: Option<(ProducerFields, u32)>,
    ) -> Result<u64, ProduceError> {
        let answer = self.submit_inner(batch, producer).await;
        match &answer {
            Ok(_) => {}
            Err(e) => self.0.stats.note_refused(e),
        }
        answer
    }

    async fn submit_inner(
        &self,
        batch: BatchBuf,
        producer: Option<(ProducerFields, u32)>,
    ) -> Result<u64, ProduceError> {
        let submitted = Instant::now();
        let deadline = submitted + self.0.config.timeout;
        (self.0.gate)()?;
        let len = batch.len();
        let (tx, rx) = oneshot::channel();
        let mut batch = Some(batch);
        let id = loop {
            let wait = {
                let mut st = self.0.state.borrow_mut();
                if st.closed {
                    return Err(stopping());
                }
                if st.queued_bytes == 0 || st.queued_bytes + len <= self.0.config.queue_bytes_max {
                    let id = st.next_id;
                    st.next_id += 1;
                    st.queued_bytes += len;
                    st.queue.push_back(Pending {
                        id,
                        batch: batch.take().expect("queued once"),
                        producer,
                        submitted,
                        tx,
                    });
                    break id;
                }
                let (room_tx, room_rx) = oneshot::channel();
                st.room.push(room_tx);
                room_rx
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if let Either::Right(_) = select(wait, pin!(Timer::new(left))).await {
                return Err(ProduceError::LeaderNotAvailable(format!(
                    "the partition's proposal queue stayed full for {:?}",
                    self.0.config.timeout
                )));
            }
        };
        self.flush();
        let left = deadline.saturating_duration_since(Instant::now());
        match select(rx, pin!(Timer::new(left))).await {
            Either::Left((Ok(answer), _)) => answer,
            Either::Left((Err(_), _)) => Err(ProduceError::OutcomeUnknown(
                "the replica stopped before the entry was applied".into(),
            )),
            Either::Right(_) => {
                if self.unqueue(id) {
                    Err(ProduceError::LeaderNotAvailable(format!(
                        "not proposed within the produce timeout ({:?})",
                        self.0.config.timeout
                    )))
                } else {
                    Err(ProduceError::OutcomeUnknown(format!(
                        "proposed, not committed within the produce timeout ({:?})",
                        self.0.config.timeout
                    )))
                }
            }
        }
    }

    /// Takes `id` out of the queue if it is still there (never proposed).
    fn unqueue(&self, id: u64) -> bool {
        let mut st = self.0.state.borrow_mut();
        let Some(i) = st.queue.iter().position(|p| p.id == id) else {
            return false;
        };
        let p = st.queue.remove(i).expect("found");
        st.queued_bytes -= p.batch.len();
        let room = std::mem::take(&mut st.room);
        drop(st);
        wake(room);
        true
    }

    /// Proposes what is queued, one entry per round, while fewer than
    /// `in_flight_max` entries are in flight.
    pub fn flush(&self) {
        loop {
            let (round, room) = {
                let mut st = self.0.state.borrow_mut();
                if st.closed || st.in_flight >= self.0.config.in_flight_max || st.queue.is_empty() {
                    return;
                }
                let mut bytes = 0;
                let mut round = Vec::new();
                while let Some(p) = st.queue.front() {
                    let len = p.batch.len();
                    if !round.is_empty() && bytes + len > self.0.config.entry_bytes_max {
                        break;
                    }
                    bytes += len;
                    round.push(st.queue.pop_front().expect("front"));
                }
                st.queued_bytes -= bytes;
                st.in_flight += 1;
                (round, std::mem::take(&mut st.room))
            };
            wake(room);
            let this = self.clone();
            glommio::spawn_local(async move {
                this.propose(round).await;
                this.0.state.borrow_mut().in_flight -= 1;
                this.flush();
            })
            .detach();
        }
    }

    /// How the window sees `f` now: the applied window, then the
    /// idempotent batches in flight, in log order.
    fn check_idempotent(&self, st: &State, f: ProducerFields, count: u32) -> Result<Check<u64>, Refusal> {
        let applied = self.0.sm.with_window(|w| w.state_of::<u64>(f.producer_id));
        let (mut epoch, mut recent) = match applied {
            Some((e, r)) => (Some(e), r),
            None => (None, Vec::new()),
        };
        // The last sequence applied, of the applied epoch: in-flight
        // batches at or below it were applied already (their answers are
        // on their way), whether the window still holds them or not.
        let applied_epoch = epoch;
        let applied_last = recent.last().map(|w| w.sequence);
        for b in st.producers.get(&f.producer_id).into_iter().flatten() {
            let e = b.fields.epoch;
            if epoch.is_some_and(|cur| e < cur) {
                continue;
            }
            if applied_epoch == Some(e) && applied_last.is_some_and(|last| b.fields.sequence <= last) {
                continue;
            }
            if epoch.is_none_or(|cur| e > cur) {
                epoch = Some(e);
                recent.clear();
            }
            recent.push(Written {
                sequence: b.fields.sequence,
                count: b.count,
                at: At::Pending(b.key),
            });
            if recent.len() > PRODUCER_WINDOW_BATCHES {
                recent.remove(0);
            }
        }
        check_against(epoch.map(|e| (e, recent.as_slice())), f, count)
    }

    /// Proposes one entry and answers its produces.
    async fn propose(&self, round: Vec<Pending>) {
        // Leadership may have moved while they queued: never proposed.
        if let Err(e) = (self.0.gate)() {
            for p in round {
                let _ = p.tx.send(Err(e.clone()));
            }
            return;
        }
        let mut batches = Vec::with_capacity(round.len());
        // Per batch proposed: its producer's submit time and answer, and
        // its in-flight key when idempotent.
        let mut waiters = Vec::with_capacity(round.len());
        {
            let idempotent = (self.0.idempotent_gate)();
            let mut st = self.0.state.borrow_mut();
            for p in round {
                let Some((f, count)) = p.producer else {
                    batches.push(p.batch);
                    waiters.push((p.submitted, p.tx, None));
                    continue;
                };
                if let Err(e) = &idempotent {
                    let _ = p.tx.send(Err(e.clone()));
                    continue;
                }
                match self.check_idempotent(&st, f, count) {
                    Ok(Check::Append) => {
                        let key = st.next_key;
                        st.next_key += 1;
                        st.producers.entry(f.producer_id).or_default().push(InFlight {
                            key,
                            fields: f,
                            count,
                            retries: Vec::new(),
                        });
                        batches.push(p.batch);
                        waiters.push((p.submitted, p.tx, Some((f.producer_id, key))));
                    }
                    Ok(Check::Duplicate(At::Offset(base))) => {
                        bump(&self.0.stats.duplicates);
                        self.0.stats.note_committed(p.submitted.elapsed());
                        let _ = p.tx.send(Ok(base));
                    }
                    Ok(Check::Duplicate(At::Pending(key))) => {
                        let first = st
                            .producers
                            .get_mut(&f.producer_id)
                            .and_then(|v| v.iter_mut().find(|b| b.key == key));
                        match first {
                            Some(b) => b.retries.push(p.tx),
                            None => {
                                let _ = p.tx.send(Err(ProduceError::OutcomeUnknown(
                                    "the first write of this batch is in flight".into(),
                                )));
                            }
                        }
                    }
                    Err(r) => {
                        let _ = p.tx.send(Err(ProduceError::Refused(r)));
                    }
                }
            }
        }
        if batches.is_empty() {
            return;
        }
        let n = batches.len();
        let bytes = batches.iter().map(|b| b.len()).sum();
        self.0.stats.note_proposed(n, bytes);
        // No await between the idempotent checks above and this hand-over:
        // entries reach openraft in the order their batches were checked.
        let answer = match self.0.raft.client_write_ff(Proposal::Batches(batches)).await {
            // The request never reached the replica's core: not proposed.
            Err(_) => Err(stopping()),
            Ok(rx) => match rx.await {
                Ok(Ok(resp)) => match resp.data {
                    Applied::Offsets(offsets) if offsets.len() == n => Ok(offsets.into_iter().map(Ok).collect()),
                    Applied::Produced(answers) if answers.len() == n => Ok(answers
                        .into_iter()
                        .map(|a| a.map_err(ProduceError::Refused))
                        .collect::<Vec<_>>()),
                    // The log refused the entry's batches and wrote a
                    // blank entry in its place (`LogStore::append`).
                    Applied::None => Err(ProduceError::Invalid(
                        "the partition log refused a batch of this entry (over the topic's limits); nothing of it was written"
                            .into(),
                    )),
                    other => Err(ProduceError::OutcomeUnknown(format!(
                        "entry {} applied as {other:?}, not the {n} offsets proposed",
                        resp.log_id
                    ))),
                },
                Ok(Err(ClientWriteError::ForwardToLeader(f))) => Err(ProduceError::OutcomeUnknown(format!(
                    "leadership moved (to {:?}) while the entry was proposed",
                    f.leader_id
                ))),
                Ok(Err(e)) => Err(ProduceError::OutcomeUnknown(e.to_string())),
                Err(_) => Err(ProduceError::OutcomeUnknown(
                    "the replica stopped before the entry was applied".into(),
                )),
            },
        };
        let answers: Vec<Result<u64, ProduceError>> = match answer {
            Ok(a) => a,
            Err(e) => vec![Err(e); n],
        };
        for ((submitted, tx, key), a) in waiters.into_iter().zip(answers) {
            let retries = match key {
                Some((id, key)) => self.landed(id, key),
                None => Vec::new(),
            };
            if a.is_ok() {
                self.0.stats.note_committed(submitted.elapsed());
            }
            for r in retries {
                if a.is_ok() {
                    bump(&self.0.stats.duplicates);
                }
                let _ = r.send(a.clone());
            }
            let _ = tx.send(a);
        }
    }

    /// The idempotent batch `key` of producer `id` got its answer: no
    /// longer in flight; its retries.
    fn landed(&self, id: i64, key: u64) -> Vec<Answer> {
        let mut st = self.0.state.borrow_mut();
        let Some(v) = st.producers.get_mut(&id) else {
            return Vec::new();
        };
        let Some(i) = v.iter().position(|b| b.key == key) else {
            return Vec::new();
        };
        let b = v.remove(i);
        if v.is_empty() {
            st.producers.remove(&id);
        }
        b.retries
    }

    /// Bytes of batches queued, not yet proposed.
    pub fn queued_bytes(&self) -> usize {
        self.0.state.borrow().queued_bytes
    }

    /// Entries in flight.
    pub fn in_flight(&self) -> usize {
        self.0.state.borrow().in_flight
    }

    /// Stops taking produces: each queued one is answered
    /// `LeaderNotAvailable` (never proposed); entries in flight are
    /// answered as openraft ends them.
    pub fn close(&self) {
        let (queue, room) = {
            let mut st = self.0.state.borrow_mut();
            st.closed = true;
            st.queued_bytes = 0;
            (std::mem::take(&mut st.queue), std::mem::take(&mut st.room))
        };
        for p in queue {
            let _ = p.tx.send(Err(stopping()));
        }
        wake(room);
    }
}

fn stopping() -> ProduceError {
    ProduceError::LeaderNotAvailable("the replica is shutting down".into())
}

fn wake(room: Vec<oneshot::Sender<()>>) {
    for w in room {
        let _ = w.send(());
    }
}
