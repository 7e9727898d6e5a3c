//! `EarlyWrite`: the pages of a large produced batch written while the rest
//! of it is still arriving. Lives on the shard that owns the partition.
//!
//! A batch of a megabyte takes about as long to arrive over the network as
//! to be written; receiving it whole, then writing it, then fsyncing it
//! puts the three end to end. An early write overlaps the first two: as the
//! batch's pages arrive they are written where the batch will go if nothing
//! else is placed first, the end of the log when the early write began.
//! When the batch is whole it is placed as usual (checked in full, given
//! its offsets). If it landed where the early write assumed, the write loop
//! writes only the rest: the first page, which holds the batch header with
//! its offsets, and the last pages that arrived after the early writes;
//! then the usual fsync. If anything else was placed first, the early write
//! is void and the batch is written whole, over the early pages.
//!
//! Why this never exposes or loses a byte:
//! - early pages lie past the log's written end, where no reader looks,
//!   until the batch is placed there, written and fsynced; nothing is
//!   acknowledged before that;
//! - the pages holding the batch header are only written by the write
//!   loop, after placement, with the header's offsets and checksum
//!   rewritten for where it landed: a crash before that leaves no header at
//!   the batch's position, so recovery stops at the log's end and trims the
//!   early pages as a torn tail (a clean close truncates them); a header
//!   that straddles a page boundary keeps both its pages out of the early
//!   write;
//! - early pages start past the page holding the log's end, so they never
//!   overlap a write queued before the early write began;
//! - any other placement, a close or a failure ends the early write: it
//!   issues nothing more, and the write loop waits for its writes still in
//!   flight before its next write, which may cover the same pages;
//! - the write loop writes the placed batch's other pages while its early
//!   writes finish, and waits for all of them before the batch counts as
//!   written (and is synced); if an early write failed, it writes those
//!   pages again.
//! - pages of an early write that ended unplaced are bytes a client chose
//!   lying past the log's end: before the write loop writes a batch that
//!   ends within a header's length of them, it cuts the file back to its
//!   written pages (`cut_stale_early` in `log/write_loop.rs`), so recovery
//!   never finds them where a batch could start (`recovery.rs`);
//! - no early write begins while an ended one's writes are in flight: two
//!   writes of the same pages in flight could land in either order.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::channel::oneshot;

use crate::batch::HEADER_BYTES;
use crate::io::page_buf::{page_floor, PAGE_BYTES};
use crate::limits::{DIRECT_WRITE_BYTES_MAX, EARLY_WRITE_CHUNK_BYTES};
use crate::log::partition::LogState;
use crate::write::writer::SegmentWriter;
use crate::Offset;

/// Names one early write, so a request that carries its batch by value
/// (`Send`, forwarded or not) can say which early write the batch belongs
/// to. Unique in the process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EarlyTicket(u64);

static NEXT_TICKET: AtomicU64 = AtomicU64::new(1);

/// Early page writes in flight for one batch. Detached tasks do the writes
/// (a dropped write future could still land later, over a newer write); the
/// write loop waits here for them.
#[derive(Default)]
pub(crate) struct Writes {
    done: RefCell<Vec<oneshot::Receiver<bool>>>,
    /// Writes issued and not yet finished, whoever waits for them.
    in_flight: Rc<Cell<usize>>,
}

impl Writes {
    /// Waits for every write so far; whether all of them succeeded.
    pub async fn wait(&self) -> bool {
        let done = std::mem::take(&mut *self.done.borrow_mut());
        let mut ok = true;
        for rx in done {
            ok &= rx.await.unwrap_or(false);
        }
        ok
    }

    /// Whether no write is in flight any more.
    fn settled(&self) -> bool {
        self.in_flight.get() == 0
    }

    /// Keeps track of one write issued, whose end `rx` says.
    fn track(&self, rx: oneshot::Receiver<bool>) {
        let (tx, done) = oneshot::channel();
        let in_flight = self.in_flight.clone();
        in_flight.set(in_flight.get() + 1);
        glommio::spawn_local(async move {
            let ok = rx.await.unwrap_or(false);
            in_flight.set(in_flight.get() - 1);
            let _ = tx.send(ok);
        })
        .detach();
        self.done.borrow_mut().push(done);
    }
}

/// A placed batch's pages already written early: file positions
/// `[from, to)`, page aligned, inside the batch, once `writes` are done.
pub(crate) struct Prewritten {
    pub from: u64,
    pub to: u64,
    pub writes: Rc<Writes>,
}

/// The early write under way on this partition, if any.
struct Current {
    ticket: EarlyTicket,
    segment: Offset,
    position: u64,
    /// Early pages start here: the page after the one holding the batch
    /// header's last byte.
    from: u64,
    /// How far early writes have been issued.
    to: Rc<Cell<u64>>,
    writes: Rc<Writes>,
}

/// A partition's early writes: at most one under way, and ended ones whose
/// writes may still be in flight. Kept in the partition's `Inner`.
#[derive(Default)]
pub(crate) struct EarlyState {
    current: Option<Current>,
    ended: Vec<Rc<Writes>>,
    /// Ended early writes whose writes may still be in flight: no new
    /// early write begins until they are done, or its pages could land
    /// before theirs on the same pages.
    unsettled: Vec<Rc<Writes>>,
    /// Per segment, the first page of the lowest early pages written for
    /// a batch that did not land there (void, or never placed): bytes a
    /// client chose, past the log's written end, until the write loop cuts
    /// them off (`cut_stale_early` in `log/write_loop.rs`) or the segment is
    /// sealed.
    stale: BTreeMap<Offset, u64>,
    /// The write loop is cutting them off: no early write begins.
    cutting: bool,
}

impl EarlyState {
    /// Whether a new early write must wait: one is under way, an ended
    /// one's writes are still in flight, or stale pages are being cut.
    pub fn is_busy(&mut self) -> bool {
        self.unsettled.retain(|w| !w.settled());
        self.current.is_some() || !self.unsettled.is_empty() || self.cutting
    }

    /// Where stale early pages of segment `segment` start, if any lie
    /// past its written end.
    pub fn stale(&self, segment: Offset) -> Option<u64> {
        self.stale.get(&segment).copied()
    }

    /// Forgets stale pages of segments before `segment`: they were sealed
    /// (rolled), which cuts a file to the bytes written.
    pub fn sealed_before(&mut self, segment: Offset) {
        self.stale.retain(|&s, _| s >= segment);
    }

    /// Segment `segment` was cut back to its written end and the ones
    /// after it dropped (a refused write's rewind): no stale pages are left
    /// past any of them.
    pub fn cut_from(&mut self, segment: Offset) {
        self.stale.retain(|&s, _| s < segment);
    }

    /// The write loop starts cutting stale pages off: ends the early write
    /// under way (its pages may lie in the cut) and holds new ones off.
    pub fn begin_cut(&mut self) {
        self.end();
        self.cutting = true;
    }

    /// The stale pages of `segment` are cut off.
    pub fn end_cut(&mut self, segment: Offset) {
        self.cutting = false;
        self.stale.remove(&segment);
    }

    pub(crate) fn is_current(&self, ticket: EarlyTicket) -> bool {
        self.current.as_ref().is_some_and(|c| c.ticket == ticket)
    }

    /// Ends the early write under way, if any: its writes must finish
    /// before the write loop writes again.
    pub fn end(&mut self) {
        if let Some(c) = self.current.take() {
            metrics::counter!("es_early_writes_total", "outcome" => "void").increment(1);
            if c.to.get() > c.from {
                let from = self.stale.entry(c.segment).or_insert(c.from);
                *from = (*from).min(c.from);
            }
            self.ended.retain(|w| !w.settled());
            self.ended.push(c.writes.clone());
            self.unsettled.push(c.writes);
        }
    }

    pub(crate) fn end_if(&mut self, ticket: EarlyTicket) {
        if self.is_current(ticket) {
            self.end();
        }
    }

    /// A batch is being placed at `position` of segment `segment`: its
    /// early pages, if it is the current early write's batch and lands
    /// where that assumed. Any early write under way ends either way.
    pub fn place(
        &mut self,
        ticket: Option<EarlyTicket>,
        segment: Offset,
        position: u64,
    ) -> Option<Prewritten> {
        let hit = match (&self.current, ticket) {
            (Some(c), Some(t)) => c.ticket == t && c.segment == segment && c.position == position,
            _ => false,
        };
        if !hit {
            self.end();
            return None;
        }
        let c = self.current.take().expect("checked above");
        let to = c.to.get();
        if to == c.from {
            // Arrived whole before anything was written early.
            return None;
        }
        metrics::counter!("es_early_writes_total", "outcome" => "placed").increment(1);
        Some(Prewritten {
            from: c.from,
            to,
            writes: c.writes,
        })
    }

    /// Ended early writes, for the write loop to wait on.
    pub fn take_ended(&mut self) -> Vec<Rc<Writes>> {
        std::mem::take(&mut self.ended)
    }
}

/// The connection's side of an early write: it hands over the batch's bytes
/// as they arrive ([`arrived`](EarlyWrite::arrived)), then passes the
/// [`ticket`](EarlyWrite::ticket) with the whole batch to
/// `PartitionLog::append_batch_placed` (or `append_batch_durable`). Keep it
/// until the batch is placed: dropping it ends the early write.
pub struct EarlyWrite {
    shared: Rc<LogState>,
    ticket: EarlyTicket,
    writer: Rc<SegmentWriter>,
    /// File position of the batch's first byte.
    position: u64,
    /// End of the pages that may be written early (the batch's last whole
    /// page).
    end: u64,
    /// Next page to write early (shared with the partition's `Current`).
    to: Rc<Cell<u64>>,
    writes: Rc<Writes>,
}

impl std::fmt::Debug for EarlyWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyWrite")
            .field("ticket", &self.ticket)
            .field("position", &self.position)
            .field("next", &self.to.get())
            .field("end", &self.end)
            .finish()
    }
}

impl EarlyWrite {
    /// Starts an early write of a `len`-byte batch at `position` of the
    /// active segment `segment`, written by `writer`; `None` when the batch
    /// has no page to write early.
    pub(crate) fn begin(
        shared: &Rc<LogState>,
        state: &mut EarlyState,
        writer: Rc<SegmentWriter>,
        segment: Offset,
        position: u64,
        len: usize,
    ) -> Option<EarlyWrite> {
        assert!(state.current.is_none(), "one early write at a time");
        let from = page_floor(position + HEADER_BYTES as u64 - 1) + PAGE_BYTES;
        let end = page_floor(position + len as u64);
        if end <= from {
            return None;
        }
        let ticket = EarlyTicket(NEXT_TICKET.fetch_add(1, Ordering::Relaxed));
        let (to, writes) = (Rc::new(Cell::new(from)), Rc::new(Writes::default()));
        state.current = Some(Current {
            ticket,
            segment,
            position,
            from,
            to: to.clone(),
            writes: writes.clone(),
        });
        Some(EarlyWrite {
            shared: shared.clone(),
            ticket,
            writer,
            position,
            end,
            to,
            writes,
        })
    }

    pub fn ticket(&self) -> EarlyTicket {
        self.ticket
    }

    /// The batch's first `arrived.len()` bytes have arrived: writes the
    /// whole pages among them not written yet, once there are
    /// [`EARLY_WRITE_CHUNK_BYTES`] of them or they complete the early pages.
    /// Does nothing once the early write has ended.
    pub fn arrived(&mut self, arrived: &[u8]) {
        let upto = page_floor(self.position + arrived.len() as u64).min(self.end);
        let mut next = self.to.get();
        if upto <= next || (upto < self.end && upto - next < EARLY_WRITE_CHUNK_BYTES as u64) {
            return;
        }
        if !self.shared.early_is_current(self.ticket) {
            return;
        }
        while next < upto {
            let n = (upto - next).min(DIRECT_WRITE_BYTES_MAX as u64);
            let at = (next - self.position) as usize;
            let done = self
                .writer
                .write_pages_detached(&arrived[at..at + n as usize], next);
            self.writes.track(done);
            next += n;
        }
        self.to.set(next);
    }
}

impl Drop for EarlyWrite {
    fn drop(&mut self) {
        self.shared.end_early_if(self.ticket);
    }
}
