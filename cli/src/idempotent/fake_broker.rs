//! The fake broker behind the idempotent producer's tests: the real
//! idempotence rules (a window of 5 batches per partition), a script of
//! faults by request number, and a record of every request it saw, behind
//! a `Link` the producer drives as it would a connection.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;

/// What the fake broker does with the next request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Fault {
    /// Written; the connection drops before the answer arrives.
    AnswerLost,
    /// The connection drops before the broker reads the request.
    Lost,
    /// Answered `unavailable`, nothing written; the connection stays.
    Unavailable,
    /// Answered `producer_fenced`.
    Fenced,
}

/// The producer id the fake broker hands out first.
pub(super) const FIRST_ID: i64 = 7;

/// A partition's producer window: its epoch, and (sequence, count, base offset) of the last batches.
pub(super) type Window = (i16, VecDeque<(i32, usize, u64)>);

/// A broker with the real idempotence rules (a window of 5 batches per
/// partition), a script of faults by request number, and a record of
/// every request it saw.
#[derive(Default)]
pub(super) struct Broker {
    pub(super) connected: bool,
    pub(super) faults: HashMap<usize, Fault>,
    /// Reconnects that fail (connection refused) before one succeeds.
    pub(super) refuse_reconnects: u32,
    pub(super) epoch: i16,
    /// Per partition: the values; per producer id and partition, the
    /// window (sequence, count, base offset).
    pub(super) logs: BTreeMap<u32, Vec<Vec<u8>>>,
    pub(super) windows: BTreeMap<(i64, u32), Window>,
    /// Every request: (partition, sequence, record count), in order.
    pub(super) seen: Vec<(u32, i32, usize)>,
    pub(super) pauses: Vec<Duration>,
    pub(super) reconnects: u32,
    /// Unanswered requests per partition now, and the most ever.
    pub(super) outstanding: BTreeMap<u32, usize>,
    pub(super) most_outstanding: usize,
    /// From this request number on, the first id is unknown (expired).
    pub(super) expire_from: Option<usize>,
    /// New ids handed out (InitProducer without an id).
    pub(super) issued: i64,
    /// The producer id of every request, in order.
    pub(super) seen_ids: Vec<i64>,
}

impl Broker {
    fn produce(&mut self, ip: &IdempotentProduce) -> Result<Vec<(u32, u64)>, ClientError> {
        if ip.epoch < self.epoch {
            return Err(broker_error("producer_fenced"));
        }
        let p = ip.produce.records[0].partition.expect("a partition");
        assert!(
            ip.produce.records.iter().all(|r| r.partition == Some(p)),
            "one partition per request"
        );
        let n = ip.produce.records.len();
        let (window_epoch, window) = self.windows.entry((ip.producer_id, p)).or_default();
        if ip.epoch > *window_epoch {
            *window_epoch = ip.epoch;
            window.clear();
        }
        let log = self.logs.entry(p).or_default();
        if let Some(&(_, count, base)) = window.iter().find(|w| w.0 == ip.sequence) {
            assert_eq!(count, n, "a retry has the original records");
            return Ok((0..n as u64).map(|k| (p, base + k)).collect());
        }
        let expected = window.back().map_or(0, |w| w.0 + w.1 as i32);
        if ip.sequence != expected {
            return Err(broker_error("out_of_order_sequence"));
        }
        let base = log.len() as u64;
        log.extend(ip.produce.records.iter().map(|r| r.value.clone()));
        window.push_back((ip.sequence, n, base));
        if window.len() > PARTITION_BATCHES_INFLIGHT_MAX {
            window.pop_front();
        }
        Ok((0..n as u64).map(|k| (p, base + k)).collect())
    }
}

pub(super) fn broker_error(code: &str) -> ClientError {
    ClientError::Broker {
        code: code.into(),
        message: code.into(),
        details: None,
    }
}

pub(super) struct FakeLink(pub(super) Rc<RefCell<Broker>>);

pub(super) struct FakeAnswer {
    broker: Rc<RefCell<Broker>>,
    partition: u32,
    answer: Result<Vec<(u32, u64)>, ClientError>,
}

impl Answer for FakeAnswer {
    fn offsets(self) -> Result<Vec<(u32, u64)>, ClientError> {
        if let Some(n) = self.broker.borrow_mut().outstanding.get_mut(&self.partition) {
            *n -= 1;
        }
        self.answer
    }
}

impl Link for FakeLink {
    type Pending = FakeAnswer;

    fn send(&mut self, request: &Request) -> Result<FakeAnswer, ClientError> {
        let Request::IdempotentProduce(ip) = request else {
            panic!("not an idempotent produce: {request:?}");
        };
        let mut b = self.0.borrow_mut();
        if !b.connected {
            return Err(ClientError::Closed);
        }
        let partition = ip.produce.records[0].partition.expect("a partition");
        let number = b.seen.len();
        b.seen.push((partition, ip.sequence, ip.produce.records.len()));
        b.seen_ids.push(ip.producer_id);
        let expired = ip.producer_id == FIRST_ID && b.expire_from.is_some_and(|n| number >= n);
        let answer = match b.faults.get(&number).copied() {
            None if expired => Err(broker_error("unknown_producer_id")),
            None => b.produce(ip),
            Some(Fault::AnswerLost) => {
                let _ = b.produce(ip);
                b.connected = false;
                Err(ClientError::Protocol(
                    "connection lost: closed by the broker".into(),
                ))
            }
            Some(Fault::Lost) => {
                b.connected = false;
                Err(ClientError::Protocol(
                    "connection lost: closed by the broker".into(),
                ))
            }
            Some(Fault::Unavailable) => Err(broker_error("unavailable")),
            Some(Fault::Fenced) => Err(broker_error("producer_fenced")),
        };
        let n = b.outstanding.entry(partition).or_default();
        *n += 1;
        let n = *n;
        b.most_outstanding = b.most_outstanding.max(n);
        drop(b);
        Ok(FakeAnswer {
            broker: self.0.clone(),
            partition,
            answer,
        })
    }

    fn reconnect(&mut self) -> Result<(), ClientError> {
        let mut b = self.0.borrow_mut();
        b.reconnects += 1;
        if b.refuse_reconnects > 0 {
            b.refuse_reconnects -= 1;
            return Err(ClientError::Io(std::io::ErrorKind::ConnectionRefused.into()));
        }
        b.connected = true;
        Ok(())
    }

    fn pause(&mut self, d: Duration) {
        self.0.borrow_mut().pauses.push(d);
    }

    fn init_producer(&mut self, existing: Option<i64>) -> Result<(i64, i16), ClientError> {
        let mut b = self.0.borrow_mut();
        match existing {
            Some(id) => {
                b.epoch += 1;
                Ok((id, b.epoch))
            }
            None => {
                b.issued += 1;
                Ok((FIRST_ID + b.issued - 1, 0))
            }
        }
    }
}
