//! `RequestBudget`: the bytes of large binary requests a shard holds at
//! once (`--request-shard-bytes`), from a frame's header until its request
//! is handled. Granted strictly in the order connections ask: a large frame
//! waiting for room is never overtaken by later, smaller ones (a semaphore
//! that lets any request through that fits would starve it). Lives on one
//! shard.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::placement::ShardId;

pub struct RequestBudget {
    capacity: u64,
    state: RefCell<State>,
    /// `es_binary_request_bytes_held{shard}`.
    held_gauge: metrics::Gauge,
}

struct State {
    available: u64,
    /// Charges waiting for room, oldest first.
    queue: VecDeque<Waiting>,
    next_ticket: u64,
}

struct Waiting {
    ticket: u64,
    bytes: u64,
    waker: Waker,
}

/// Bytes of the budget, given back when dropped.
pub struct Held {
    budget: Rc<RequestBudget>,
    bytes: u64,
}

impl RequestBudget {
    pub fn new(capacity: u64, shard: ShardId) -> Rc<RequestBudget> {
        Rc::new(RequestBudget {
            capacity,
            state: RefCell::new(State {
                available: capacity,
                queue: VecDeque::new(),
                next_ticket: 0,
            }),
            held_gauge: metrics::gauge!("es_binary_request_bytes_held", "shard" => shard.to_string()),
        })
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.capacity - self.state.borrow().available
    }

    /// `bytes` at once if they are free and nobody waits, else `None`.
    pub fn try_take(self: &Rc<Self>, bytes: u64) -> Option<Held> {
        let mut st = self.state.borrow_mut();
        if !st.queue.is_empty() || st.available < bytes {
            return None;
        }
        st.available -= bytes;
        drop(st);
        Some(self.granted(bytes))
    }

    /// `bytes` (at most the capacity) once they are free, after every
    /// charge that asked before. Dropping the future gives up its turn.
    pub fn take(self: &Rc<Self>, bytes: u64) -> Take {
        assert!(
            bytes <= self.capacity,
            "a charge fits the budget (--request-shard-bytes >= --frame-bytes-max)"
        );
        Take {
            budget: self.clone(),
            bytes,
            ticket: None,
        }
    }

    fn granted(self: &Rc<Self>, bytes: u64) -> Held {
        self.held_gauge.set(self.held() as f64);
        Held {
            budget: self.clone(),
            bytes,
        }
    }

    /// Wakes the oldest waiting charge if it fits now.
    fn wake_front(&self) {
        let waker = {
            let st = self.state.borrow();
            st.queue
                .front()
                .filter(|w| w.bytes <= st.available)
                .map(|w| w.waker.clone())
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.state.borrow_mut().available += self.bytes;
        self.budget.held_gauge.set(self.budget.held() as f64);
        self.budget.wake_front();
    }
}

/// A charge waiting for its turn ([`RequestBudget::take`]).
pub struct Take {
    budget: Rc<RequestBudget>,
    bytes: u64,
    /// Its place in the queue, once it had to wait.
    ticket: Option<u64>,
}

impl Future for Take {
    type Output = Held;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Held> {
        let this = &mut *self;
        let mut st = this.budget.state.borrow_mut();
        let (turn, fits) = match this.ticket {
            None => (st.queue.is_empty(), st.available >= this.bytes),
            Some(t) => (
                st.queue.front().is_some_and(|w| w.ticket == t),
                st.available >= this.bytes,
            ),
        };
        if turn && fits {
            if this.ticket.take().is_some() {
                st.queue.pop_front();
            }
            st.available -= this.bytes;
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
        let budget = RequestBudget::new(10, 0);
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
        let budget = RequestBudget::new(10, 0);
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
}
