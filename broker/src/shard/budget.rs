//! `Budget`: bytes of client requests and responses held at once, granted
//! strictly in the order they are asked for: a large charge waiting for
//! room is never overtaken by later, smaller ones (a semaphore that lets
//! any charge through that fits would starve it). Each shard has one
//! (`--request-shard-bytes`: large requests from their header until
//! handled, fetch responses from before they are read until written, HTTP
//! bodies while they arrive); each binary connection has one for its
//! unwritten responses (`--response-connection-bytes`). A [`Charge`] holds
//! bytes of both. Lives on one shard.
//!
//! Deadlock freedom rests on one rule, kept by every caller: nothing waits
//! for a budget while it holds bytes of the same budget, and a connection's
//! budget is always taken before its shard's. Whatever holds bytes only
//! waits for a client's bytes, the disk or the socket, each bounded by
//! `--frame-stall-ms` or a request's own end.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

pub struct Budget {
    capacity: u64,
    state: RefCell<State>,
    /// `es_request_budget_bytes_held{shard}`, for a shard's budget.
    held_gauge: Option<metrics::Gauge>,
}

struct State {
    /// Below zero while more is held than the capacity (`Held::resize`).
    available: i64,
    /// Charges waiting for room, oldest first.
    queue: VecDeque<Waiting>,
    next_ticket: u64,
}

struct Waiting {
    ticket: u64,
    bytes: u64,
    waker: Waker,
}

/// Bytes of a budget, given back when dropped.
pub struct Held {
    budget: Rc<Budget>,
    bytes: u64,
}

impl Budget {
    /// A budget of `capacity` bytes, its bytes held shown on `held_gauge`.
    pub fn new(capacity: u64, held_gauge: Option<metrics::Gauge>) -> Rc<Budget> {
        Rc::new(Budget {
            capacity,
            state: RefCell::new(State {
                available: capacity as i64,
                queue: VecDeque::new(),
                next_ticket: 0,
            }),
            held_gauge,
        })
    }

    /// Bytes held now (more than the capacity while a resize took more).
    pub fn held(&self) -> u64 {
        (self.capacity as i64 - self.state.borrow().available).max(0) as u64
    }

    /// What a charge of `bytes` takes: at most the whole budget, so that
    /// a charge larger than it waits for all of it and then goes through.
    fn clamp(&self, bytes: u64) -> u64 {
        bytes.min(self.capacity)
    }

    /// `bytes` at once if they are free and nobody waits, else `None`.
    pub fn try_take(self: &Rc<Self>, bytes: u64) -> Option<Held> {
        let bytes = self.clamp(bytes);
        let mut st = self.state.borrow_mut();
        if !st.queue.is_empty() || st.available < bytes as i64 {
            return None;
        }
        st.available -= bytes as i64;
        drop(st);
        Some(self.granted(bytes))
    }

    /// `bytes` (at most the capacity) once they are free, after every
    /// charge that asked before. Dropping the future gives up its turn.
    pub fn take(self: &Rc<Self>, bytes: u64) -> Take {
        Take {
            budget: self.clone(),
            bytes: self.clamp(bytes),
            ticket: None,
        }
    }

    fn granted(self: &Rc<Self>, bytes: u64) -> Held {
        self.show();
        Held {
            budget: self.clone(),
            bytes,
        }
    }

    fn show(&self) {
        if let Some(g) = &self.held_gauge {
            g.set(self.held() as f64);
        }
    }

    /// Wakes the oldest waiting charge if it fits now.
    fn wake_front(&self) {
        let waker = {
            let st = self.state.borrow();
            st.queue
                .front()
                .filter(|w| w.bytes as i64 <= st.available)
                .map(|w| w.waker.clone())
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Held {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `bytes` from now on: gives back what is no longer needed, or
    /// takes more at once, past the capacity if need be. For memory that
    /// already exists (a response found larger than its charge): it is
    /// counted, and later charges wait until the budget is back under its
    /// capacity.
    pub fn resize(&mut self, bytes: u64) {
        let before = self.bytes;
        self.budget.state.borrow_mut().available += before as i64 - bytes as i64;
        self.bytes = bytes;
        self.budget.show();
        if bytes < before {
            self.budget.wake_front();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.state.borrow_mut().available += self.bytes as i64;
        self.budget.show();
        self.budget.wake_front();
    }
}

/// A charge waiting for its turn ([`Budget::take`]).
pub struct Take {
    budget: Rc<Budget>,
    bytes: u64,
    /// Its place in the queue, once it had to wait.
    ticket: Option<u64>,
}

impl Future for Take {
    type Output = Held;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Held> {
        let this = &mut *self;
        let mut st = this.budget.state.borrow_mut();
        let fits = st.available >= this.bytes as i64;
        let turn = match this.ticket {
            None => st.queue.is_empty(),
            Some(t) => st.queue.front().is_some_and(|w| w.ticket == t),
        };
        if turn && fits {
            if this.ticket.take().is_some() {
                st.queue.pop_front();
            }
            st.available -= this.bytes as i64;
            drop(st);
            // The next in line may fit as well.
            this.budget.wake_front();
            return Poll::Ready(this.budget.granted(this.bytes));
        }
        match this.ticket {
            None => {
                let ticket = st.next_ticket;
                st.next_ticket += 1;
                st.queue.push_back(Waiting {
                    ticket,
                    bytes: this.bytes,
                    waker: cx.waker().clone(),
                });
                this.ticket = Some(ticket);
            }
            Some(t) => {
                if let Some(w) = st.queue.iter_mut().find(|w| w.ticket == t) {
                    w.waker.clone_from(cx.waker());
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Take {
    fn drop(&mut self) {
        let Some(t) = self.ticket else { return };
        let was_front = {
            let mut st = self.budget.state.borrow_mut();
            let front = st.queue.front().is_some_and(|w| w.ticket == t);
            st.queue.retain(|w| w.ticket != t);
            front
        };
        if was_front {
            self.budget.wake_front();
        }
    }
}

/// Bytes held in a connection's budget (where it has one) and in its
/// shard's, for one request or response.
pub struct Charge {
    connection: Option<Held>,
    shard: Held,
}

impl Charge {
    /// `bytes` of both at once if both have them free and nobody waits
    /// for either.
    pub fn try_take(connection: Option<&Rc<Budget>>, shard: &Rc<Budget>, bytes: u64) -> Option<Charge> {
        let connection = match connection {
            Some(c) => Some(c.try_take(bytes)?),
            None => None,
        };
        Some(Charge {
            connection,
            shard: shard.try_take(bytes)?,
        })
    }

    /// `bytes` of both, in turn: the connection's first, then the
    /// shard's (always in this order: see the module's rule).
    pub async fn take(connection: Option<&Rc<Budget>>, shard: &Rc<Budget>, bytes: u64) -> Charge {
        let connection = match connection {
            Some(c) => Some(c.take(bytes).await),
            None => None,
        };
        Charge {
            connection,
            shard: shard.take(bytes).await,
        }
    }

    /// A charge of the shard's budget alone.
    pub fn shard_only(shard: Held) -> Charge {
        Charge {
            connection: None,
            shard,
        }
    }

    /// Bytes held in the shard's budget.
    pub fn bytes(&self) -> u64 {
        self.shard.bytes()
    }

    /// [`Held::resize`] on both.
    pub fn resize(&mut self, bytes: u64) {
        if let Some(c) = &mut self.connection {
            c.resize(bytes);
        }
        self.shard.resize(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::task::noop_waker;

    fn poll(f: &mut Take) -> Option<Held> {
        let waker = noop_waker();
        match Pin::new(f).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(h) => Some(h),
            Poll::Pending => None,
        }
    }

    #[test]
    fn charges_are_granted_in_the_order_asked() {
        let budget = Budget::new(10, None);
        let a = budget.try_take(8).expect("free");
        assert_eq!(budget.held(), 8);
        let mut b = budget.take(5);
        assert!(poll(&mut b).is_none(), "does not fit");
        // 1 byte would fit, but B asked first.
        assert!(budget.try_take(1).is_none());
        let mut c = budget.take(1);
        assert!(poll(&mut c).is_none(), "waits behind B");
        drop(a);
        assert!(poll(&mut c).is_none(), "still behind B");
        let b = poll(&mut b).expect("B's turn");
        let c = poll(&mut c).expect("then C's");
        assert_eq!(budget.held(), 6);
        drop((b, c));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_charge_that_gives_up_leaves_the_queue() {
        let budget = Budget::new(10, None);
        let a = budget.try_take(10).expect("free");
        let mut b = budget.take(10);
        assert!(poll(&mut b).is_none());
        let mut c = budget.take(3);
        assert!(poll(&mut c).is_none());
        drop(b);
        drop(a);
        let c = poll(&mut c).expect("C is first now");
        assert!(budget.try_take(7).is_some(), "the rest is free");
        drop(c);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_charge_larger_than_the_budget_waits_for_all_of_it() {
        let budget = Budget::new(10, None);
        let a = budget.try_take(1).expect("free");
        let mut big = budget.take(25);
        assert!(poll(&mut big).is_none(), "1 byte is held");
        drop(a);
        let big = poll(&mut big).expect("all of it is free");
        assert_eq!((big.bytes(), budget.held()), (10, 10));
        assert!(budget.try_take(1).is_none());
    }

    #[test]
    fn a_resize_past_the_capacity_makes_later_charges_wait_until_back_under() {
        let budget = Budget::new(10, None);
        let mut a = budget.try_take(4).expect("free");
        a.resize(14);
        assert_eq!(budget.held(), 14);
        let mut b = budget.take(1);
        assert!(poll(&mut b).is_none(), "over the capacity");
        a.resize(9);
        let b = poll(&mut b).expect("back under, with room");
        assert_eq!(budget.held(), 10);
        drop((a, b));
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_charge_takes_the_connections_budget_then_the_shards() {
        let (conn, shard) = (Budget::new(4, None), Budget::new(10, None));
        let mut c = Charge::try_take(Some(&conn), &shard, 3).expect("free");
        assert_eq!((conn.held(), shard.held()), (3, 3));
        assert!(
            Charge::try_take(Some(&conn), &shard, 3).is_none(),
            "the connection's budget is full"
        );
        assert_eq!(shard.held(), 3, "and nothing of the shard's was kept");
        c.resize(1);
        assert_eq!((conn.held(), shard.held()), (1, 1));
        drop(c);
        assert_eq!((conn.held(), shard.held()), (0, 0));
    }
}
