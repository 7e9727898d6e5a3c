//! `BatchBuf`: the bytes of one produced batch on their way into the log,
//! and `ReceivingBatch`, the page-aligned memory a large batch is received
//! into. Lives on the shard that received the batch, then on the one that
//! owns its partition.
//!
//! A direct write needs page-aligned memory, so a batch in an ordinary
//! buffer is copied into one before it is written, a copy in series before
//! every write (what it cost: docs/design/paged-batches.md). A batch
//! received into page-aligned memory, starting at the offset within a page
//! where the partition's log ended when it began to arrive, lies in memory
//! exactly as it will lie in the file's pages: if it is placed where
//! expected, the writer fills in the bytes before it in its first page
//! (the log's own, which it holds in `recent`) and writes the pages as
//! they are (`writer.rs`), then keeps them as the recent bytes readers
//! see. Placed anywhere else, it is copied like any other batch.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::io::page_buf::PAGE_BYTES;
use crate::io::page_buf::{ArrivingPages, PageBuf};

const PAGE: usize = PAGE_BYTES as usize;

/// A produced batch's bytes: a heap buffer, or the page-aligned memory it
/// was received into ([`ReceivingBatch`]). Dereferences to the batch.
pub struct BatchBuf(Repr);

enum Repr {
    Heap(Vec<u8>),
    /// The batch is `pages[head..head + len]`; the rest of its pages are
    /// zero until the writer fills in the first page's earlier bytes.
    /// `checksum`: the batch format's checksum of these bytes, computed as
    /// they arrived ([`ReceivingChecksum`]); `None` once they may have been
    /// changed.
    Paged {
        pages: PageBuf,
        head: usize,
        len: usize,
        checksum: Option<u32>,
    },
}

/// A batch's page-aligned memory, shared by its writes to disk and then by
/// the recent writes readers see: the batch is `pages[batch]`.
pub(crate) struct Pages {
    pub pages: Arc<PageBuf>,
    pub batch: Range<usize>,
}

impl AsRef<[u8]> for Pages {
    fn as_ref(&self) -> &[u8] {
        &self.pages[self.batch.clone()]
    }
}

impl BatchBuf {
    /// The checksum the batch format stores (`batch::checksum`) of these
    /// bytes, if it was computed as they arrived and they have not been
    /// changed since: checking the batch need not read them again.
    pub(crate) fn received_checksum(&self) -> Option<u32> {
        match &self.0 {
            Repr::Heap(_) => None,
            Repr::Paged { checksum, .. } => *checksum,
        }
    }

    /// Where the batch starts within its first page, if it lies in
    /// page-aligned memory.
    pub(crate) fn in_page_head(&self) -> Option<usize> {
        match &self.0 {
            Repr::Heap(_) => None,
            Repr::Paged { head, .. } => Some(*head),
        }
    }

    /// The page-aligned memory of a paged batch, its first page's bytes
    /// before the batch set to `before` (`before.len()` is its head); the
    /// batch back if it is not paged so.
    pub(crate) fn into_pages(self, before: &[u8]) -> Result<Pages, BatchBuf> {
        match self.0 {
            Repr::Paged {
                mut pages, head, len, ..
            } if head == before.len() => {
                pages[..head].copy_from_slice(before);
                Ok(Pages {
                    pages: Arc::new(pages),
                    batch: head..head + len,
                })
            }
            repr => Err(BatchBuf(repr)),
        }
    }

    /// The batch as `Bytes`, without a copy.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self.0 {
            Repr::Heap(v) => Bytes::from(v),
            Repr::Paged { pages, head, len, .. } => Bytes::from_owner(Pages {
                pages: Arc::new(pages),
                batch: head..head + len,
            }),
        }
    }

    /// The batch as a `Vec` (a copy if it is paged).
    pub(crate) fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Heap(v) => v,
            Repr::Paged { .. } => self.to_vec(),
        }
    }
}

impl From<Vec<u8>> for BatchBuf {
    fn from(v: Vec<u8>) -> BatchBuf {
        BatchBuf(Repr::Heap(v))
    }
}

impl std::ops::Deref for BatchBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Heap(v) => v,
            Repr::Paged { pages, head, len, .. } => &pages[*head..*head + *len],
        }
    }
}

impl std::ops::DerefMut for BatchBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Repr::Heap(v) => v,
            Repr::Paged {
                pages,
                head,
                len,
                checksum,
            } => {
                // The bytes may change: their checksum must be computed
                // again.
                *checksum = None;
                &mut pages[*head..*head + *len]
            }
        }
    }
}

impl AsRef<[u8]> for BatchBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for BatchBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchBuf")
            .field("len", &self.len())
            .field("in_page_head", &self.in_page_head())
            .finish()
    }
}

/// A batch of known length arriving from a socket, received into
/// page-aligned memory that is not zeroed first (the socket writes every
/// byte): `head` bytes into its first page, the in-page offset where the
/// partition's log is expected to end. [`finish`](ReceivingBatch::finish)
/// once whole.
pub struct ReceivingBatch {
    /// The batch's pages, as far as they arrived.
    pages: ArrivingPages,
    /// The checksum of the bytes received so far.
    checksum: ReceivingChecksum,
}

impl ReceivingBatch {
    /// Memory for a `len`-byte batch that starts `in_page` bytes into a
    /// page (taken modulo a page).
    pub fn new(in_page: usize, len: usize) -> ReceivingBatch {
        ReceivingBatch {
            pages: ArrivingPages::new(in_page % PAGE, len),
            checksum: ReceivingChecksum::default(),
        }
    }

    /// The batch's length.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.len() == 0
    }

    /// Bytes received so far.
    pub fn filled_len(&self) -> usize {
        self.pages.filled_len()
    }

    /// The bytes received so far.
    pub fn filled(&self) -> &[u8] {
        self.pages.filled()
    }

    /// Appends `bytes`, received elsewhere: at most what the batch lacks.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        let from = self.pages.filled_len();
        let new = self.pages.extend_from_slice(bytes);
        self.checksum.update(from, new);
    }

    /// The bytes the batch still lacks, for a read that fills some of them
    /// (then [`assume_received`](ReceivingBatch::assume_received)).
    pub fn spare_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        self.pages.spare_mut()
    }

    /// The next bytes of the batch, at most `max`, zeroed first where not
    /// initialized yet: for a read through an API that takes `&mut [u8]`
    /// (then [`received`](ReceivingBatch::received)).
    pub fn unfilled_zeroed(&mut self, max: usize) -> &mut [u8] {
        self.pages.unfilled_zeroed(max)
    }

    /// `n` more bytes were written into [`unfilled_zeroed`](ReceivingBatch::unfilled_zeroed)'s slice.
    pub fn received(&mut self, n: usize) {
        let from = self.pages.filled_len();
        let new = self.pages.received(n);
        // Summed while the bytes are still in the CPU's cache (and, with
        // more to come, while the socket is still bringing the rest).
        self.checksum.update(from, new);
    }

    /// `n` more bytes were written into [`spare_mut`](ReceivingBatch::spare_mut)'s slice.
    ///
    /// # Safety
    /// The first `n` bytes of that slice must have been initialized.
    pub unsafe fn assume_received(&mut self, n: usize) {
        let from = self.pages.filled_len();
        // SAFETY: this function's own contract, passed on: the first `n`
        // bytes of `spare_mut`'s slice were initialized.
        let new = unsafe { self.pages.assume_received(n) };
        self.checksum.update(from, new);
    }

    /// The whole batch, its checksum field set to the checksum of the
    /// bytes received (the field's own bytes, as received, are left out
    /// of it): for a batch the broker writes itself, in order, whose
    /// checksum is known only once its last byte is (the Kafka listener's
    /// conversion). Panics unless all of it was received.
    pub fn finish_stamped(self) -> BatchBuf {
        let mut batch = self.finish();
        if let Repr::Paged {
            pages,
            head,
            checksum: Some(sum),
            ..
        } = &mut batch.0
        {
            let field = *head + CHECKSUM_FIELD.start..*head + CHECKSUM_FIELD.end;
            pages[field].copy_from_slice(&sum.to_le_bytes());
        }
        batch
    }

    /// The whole batch. Panics unless all of it was received.
    pub fn finish(self) -> BatchBuf {
        let (head, len) = (self.pages.head(), self.pages.len());
        BatchBuf(Repr::Paged {
            pages: self.pages.into_pages(),
            head,
            len,
            checksum: self.checksum.finish(),
        })
    }
}

/// The batch format's checksum (`batch::checksum`: CRC-32 of bytes
/// `[0, 12)` and `[16, len)`, the stored checksum's own 4 bytes left out)
/// of a batch's bytes as they arrive in order. Checking a received batch
/// read all of it again after its last byte, on the request's path
/// (docs/design/paged-batches.md); summed as it arrives, the last read's
/// bytes are all that is left to sum then.
#[derive(Default)]
struct ReceivingChecksum {
    hasher: crc32fast::Hasher,
    /// Bytes of the batch seen.
    seen: usize,
}

/// Where the batch format's checksum field lies in a batch (`batch.rs`).
const CHECKSUM_FIELD: Range<usize> = 12..16;

impl ReceivingChecksum {
    /// Adds `bytes`, the batch's bytes from `at` on (`at` = those seen so
    /// far).
    fn update(&mut self, at: usize, bytes: &[u8]) {
        assert_eq!(at, self.seen, "bytes arrive in order");
        let end = at + bytes.len();
        let covered = |r: Range<usize>| {
            let (from, to) = (r.start.max(at), r.end.min(end));
            (from < to).then(|| &bytes[from - at..to - at])
        };
        if let Some(b) = covered(0..CHECKSUM_FIELD.start) {
            self.hasher.update(b);
        }
        if let Some(b) = covered(CHECKSUM_FIELD.end..usize::MAX) {
            self.hasher.update(b);
        }
        self.seen = end;
    }

    /// The checksum, if the bytes seen hold a checksum field at all.
    fn finish(self) -> Option<u32> {
        (self.seen >= CHECKSUM_FIELD.end).then(|| self.hasher.finalize())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_lies_at_its_in_page_offset_with_zeros_around_it() {
        let mut r = ReceivingBatch::new(PAGE + 100, 5000);
        assert_eq!(r.len(), 5000);
        r.extend_from_slice(&[1; 1000]);
        let spare = r.spare_mut();
        assert_eq!(spare.len(), 4000);
        for b in &mut spare[..3000] {
            b.write(2);
        }
        // SAFETY: 3000 bytes were just written.
        unsafe { r.assume_received(3000) };
        let last = r.unfilled_zeroed(4096);
        assert_eq!(last, &[0; 1000][..], "zeroed, at most what is left");
        last.fill(3);
        r.received(1000);
        assert_eq!(r.filled_len(), 5000);
        let batch = r.finish();
        assert_eq!(batch.in_page_head(), Some(100));
        assert_eq!(&batch[..1000], &[1; 1000][..]);
        assert_eq!(&batch[1000..4000], &[2; 3000][..]);
        assert_eq!(&batch[4000..], &[3; 1000][..]);
        let pages = batch.into_pages(&[7; 100]).map_err(|_| ()).unwrap();
        assert_eq!(pages.pages.len(), 2 * PAGE);
        assert_eq!(pages.pages.as_ptr() as usize % PAGE, 0, "page aligned");
        assert_eq!(
            &pages.pages[..100],
            &[7; 100][..],
            "the first page's earlier bytes"
        );
        assert!(
            pages.pages[100 + 5000..].iter().all(|&b| b == 0),
            "zero after the batch"
        );
        assert_eq!(pages.as_ref().len(), 5000);
    }

    #[test]
    fn a_batch_whose_head_differs_is_not_taken_as_pages() {
        let mut r = ReceivingBatch::new(10, 3);
        r.extend_from_slice(b"abc");
        let batch = r.finish();
        let back = batch.into_pages(&[0; 11]).err().expect("another head");
        assert_eq!(&back[..], b"abc");
        assert_eq!(&back.into_bytes()[..], b"abc");
    }

    #[test]
    fn zeroed_bytes_are_zeroed_once_and_kept_when_read_again() {
        let mut r = ReceivingBatch::new(0, 10);
        r.unfilled_zeroed(4)[..2].copy_from_slice(b"xy");
        r.received(2);
        // The two zeroed but unfilled bytes stay as they were.
        assert_eq!(r.unfilled_zeroed(4), &[0, 0, 0, 0][..]);
        assert_eq!(r.filled(), b"xy");
    }

    #[test]
    #[should_panic(expected = "once whole")]
    fn an_unfinished_batch_is_not_a_batch() {
        let r = ReceivingBatch::new(0, 10);
        let _ = r.finish();
    }

    #[test]
    fn a_stamped_batch_carries_the_checksum_of_its_bytes() {
        let mut batch = a_batch();
        let crc = batch[12..16].to_vec();
        batch[12..16].fill(0);
        let mut r = ReceivingBatch::new(300, batch.len());
        r.extend_from_slice(&batch[..40]);
        r.extend_from_slice(&batch[40..]);
        let stamped = r.finish_stamped();
        assert_eq!(&stamped[12..16], &crc[..]);
        assert_eq!(
            stamped.received_checksum(),
            Some(u32::from_le_bytes(crc[..].try_into().unwrap()))
        );
        assert!(crate::batch::check(&stamped).is_ok());
    }

    #[test]
    fn heap_batches_stay_heap_batches() {
        let b = BatchBuf::from(b"xyz".to_vec());
        assert_eq!(b.in_page_head(), None);
        assert_eq!(b.into_vec(), b"xyz");
    }

    /// A real produced batch: 3 records.
    fn a_batch() -> Vec<u8> {
        let records: Vec<crate::Record> = (0..3u8)
            .map(|i| crate::Record {
                key: Some(vec![i; 3]),
                value: vec![i; 700],
                timestamp_ms: 5,
            })
            .collect();
        let mut out = Vec::new();
        crate::batch::encode(crate::Offset(0), &records, crate::ProducerStamp::NONE, &mut out);
        out
    }

    /// Receives `batch` in pieces that end at `cuts`, through each way
    /// bytes come in.
    fn receive(batch: &[u8], cuts: &[usize]) -> BatchBuf {
        let mut r = ReceivingBatch::new(77, batch.len());
        let mut at = 0;
        for (i, &cut) in cuts.iter().chain([&batch.len()]).enumerate() {
            let cut = cut.clamp(at, batch.len());
            let piece = &batch[at..cut];
            match i % 3 {
                0 => r.extend_from_slice(piece),
                1 => {
                    for (b, &v) in r.spare_mut().iter_mut().zip(piece) {
                        b.write(v);
                    }
                    // SAFETY: `piece.len()` bytes were just written.
                    unsafe { r.assume_received(piece.len()) };
                }
                _ => {
                    r.unfilled_zeroed(piece.len()).copy_from_slice(piece);
                    r.received(piece.len());
                }
            }
            at = cut;
        }
        r.finish()
    }

    #[test]
    fn the_checksum_is_summed_as_the_batch_arrives() {
        let batch = a_batch();
        let want = crate::batch::checksum(&batch);
        // Pieces that end before, inside and after the checksum field.
        for cuts in [
            vec![],
            vec![1],
            vec![12],
            vec![13],
            vec![14, 15],
            vec![16],
            vec![5, 40, 1000],
        ] {
            let got = receive(&batch, &cuts);
            assert_eq!(got.received_checksum(), Some(want), "cuts {cuts:?}");
            let (h, _) = crate::batch::check_produced_summed(&got, got.received_checksum()).unwrap();
            assert_eq!(h.record_count, 3);
        }
    }

    #[test]
    fn a_changed_batch_has_its_checksum_summed_again() {
        let batch = a_batch();
        let mut got = receive(&batch, &[100]);
        assert!(got.received_checksum().is_some());
        got[200] ^= 1;
        assert_eq!(got.received_checksum(), None, "its bytes may have changed");
        let e = crate::batch::check_produced_summed(&got, got.received_checksum()).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn a_batch_received_wrong_is_refused_with_a_checksum_summed_on_arrival() {
        let mut batch = a_batch();
        batch[500] ^= 0x40;
        let got = receive(&batch, &[3000]);
        assert_eq!(got.received_checksum(), Some(crate::batch::checksum(&batch)));
        let e = crate::batch::check_produced_summed(&got, got.received_checksum()).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
        // Too short to hold a checksum field: none summed.
        assert_eq!(receive(&batch[..14], &[]).received_checksum(), None);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_in_any_pieces_sum_as_a_whole(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 16..3000),
            mut cuts in proptest::collection::vec(0usize..3000, 0..6),
        ) {
            cuts.sort_unstable();
            let got = receive(&bytes, &cuts);
            proptest::prop_assert_eq!(got.received_checksum(), Some(crate::batch::checksum(&bytes)));
        }
    }
}
