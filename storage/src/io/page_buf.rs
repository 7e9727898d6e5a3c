//! `PageBuf`: page-aligned buffers of whole pages, for direct writes
//! (O_DIRECT needs aligned memory), and the page buffers a shard keeps for
//! reuse. Every `unsafe` that touches a page buffer's memory is in this
//! module: the allocation, the slices over it, and `ArrivingPages`, the
//! partly initialized pages a batch is received into (`batch_buf.rs`).

use std::alloc::Layout;
use std::cell::RefCell;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::limits::{POOLED_BUFS_MAX, POOLED_BUF_BYTES, POOLED_MIN_BYTES};

/// Direct I/O alignment of positions and lengths: one page (devices with
/// 512-byte sectors accept it too), and `page_floor` rounds down to one.
/// es-format's, because recovery's scan knows the padding a direct write
/// leaves.
pub use es_format::scan::{page_floor, PAGE_BYTES};

thread_local! {
    /// This shard's page buffers kept for reuse, each `POOLED_BUF_BYTES`.
    static KEPT_PAGE_BUFS: RefCell<Vec<PageBuf>> = const { RefCell::new(Vec::new()) };
}

/// A page-aligned buffer of whole pages that may cross to a disk thread
/// (a direct write needs aligned memory). Its bytes are `len` of an
/// allocation of `layout.size()`.
pub(crate) struct PageBuf {
    ptr: NonNull<u8>,
    layout: Layout,
    len: usize,
}

// SAFETY: `PageBuf` owns its allocation outright (like a `Vec<u8>`); the
// pointer is never shared.
unsafe impl Send for PageBuf {}
// SAFETY: a shared `&PageBuf` only reads (like a `&Vec<u8>`).
unsafe impl Sync for PageBuf {}

impl PageBuf {
    /// `len` bytes (a positive multiple of a page), all zero.
    pub fn zeroed(len: usize) -> PageBuf {
        PageBuf::with_capacity(len, len)
    }

    /// `len` bytes (a positive multiple of a page) for a write that sets
    /// every one of them: a buffer this shard kept for reuse (holding the
    /// bytes of an earlier write) when `len` is one it pools, else a
    /// zeroed one.
    pub fn for_write(len: usize) -> PageBuf {
        if (POOLED_MIN_BYTES..=POOLED_BUF_BYTES).contains(&len) {
            if let Some(mut buf) = KEPT_PAGE_BUFS.with(|p| p.borrow_mut().pop()) {
                buf.len = len;
                return buf;
            }
            return PageBuf::with_capacity(len, POOLED_BUF_BYTES);
        }
        PageBuf::zeroed(len)
    }

    fn with_capacity(len: usize, capacity: usize) -> PageBuf {
        let layout = PageBuf::layout(len, capacity);
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PageBuf { ptr, layout, len }
    }

    /// `len` bytes (a positive multiple of a page) as the allocator left
    /// them: for memory that is about to be filled anyway (zeroing a
    /// megabyte first costs as much as copying it).
    ///
    /// # Safety
    /// Every byte must be written through [`as_mut_ptr`](PageBuf::as_mut_ptr)
    /// before the buffer is read or borrowed as a slice (`Deref`,
    /// `DerefMut`), which assume initialized bytes.
    pub unsafe fn uninit(len: usize) -> PageBuf {
        let layout = PageBuf::layout(len, len);
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        PageBuf { ptr, layout, len }
    }

    fn layout(len: usize, capacity: usize) -> Layout {
        assert!(
            len > 0 && (len as u64).is_multiple_of(PAGE_BYTES) && len <= capacity,
            "a page buffer is whole pages"
        );
        Layout::from_size_align(capacity, PAGE_BYTES as usize).expect("a valid page layout")
    }

    /// The first byte, for writes into memory not initialized yet
    /// ([`uninit`](PageBuf::uninit)).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The first byte, for reads of the initialized part of memory that
    /// is not all initialized yet ([`uninit`](PageBuf::uninit)).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Keeps the buffer for this shard's next write, if it is of the
    /// pooled size and the pool has room; else frees it.
    pub(crate) fn recycle(self) {
        if self.layout.size() == POOLED_BUF_BYTES {
            KEPT_PAGE_BUFS.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.len() < POOLED_BUFS_MAX {
                    pool.push(self);
                }
            });
        }
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the allocation holds `layout.size() >= len` initialized
        // bytes (zeroed at birth, or written before this per `uninit`'s
        // contract) and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `with_capacity` or `uninit` with this very
        // layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// The pages a batch of `len` bytes is received into, `head` bytes into
/// its first page, not zeroed first (the socket writes every byte of the
/// batch): zero before `head` and after `head + len`; the batch's bytes
/// count as initialized up to `init`, as received up to `filled`.
/// Invariant: `filled <= init <= len`, so every slice handed out covers
/// initialized bytes only, or is `MaybeUninit`.
pub(crate) struct ArrivingPages {
    pages: PageBuf,
    head: usize,
    len: usize,
    filled: usize,
    init: usize,
}

impl ArrivingPages {
    /// Pages for a `len`-byte batch starting `head` bytes (under a page)
    /// into the first one.
    pub fn new(head: usize, len: usize) -> ArrivingPages {
        let page = PAGE_BYTES as usize;
        assert!(head < page, "the batch starts in the first page");
        let total = (head + len).next_multiple_of(page).max(page);
        // SAFETY: every byte is written before the buffer is read: the
        // head and the padding after the batch just below, the batch as
        // it arrives (`filled`/`init` track it; `into_pages` checks all
        // of it arrived).
        let mut pages = unsafe { PageBuf::uninit(total) };
        // SAFETY: `[0, head)` and `[head + len, total)` lie inside the
        // allocation of `total` bytes.
        unsafe {
            std::ptr::write_bytes(pages.as_mut_ptr(), 0, head);
            std::ptr::write_bytes(pages.as_mut_ptr().add(head + len), 0, total - head - len);
        }
        ArrivingPages {
            pages,
            head,
            len,
            filled: 0,
            init: 0,
        }
    }

    /// The batch's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Where the batch starts in its first page.
    pub fn head(&self) -> usize {
        self.head
    }

    /// Bytes of the batch received so far.
    pub fn filled_len(&self) -> usize {
        self.filled
    }

    /// The bytes received so far.
    pub fn filled(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes of the batch were written; `head`
        // lies inside the allocation.
        unsafe { std::slice::from_raw_parts(self.pages.as_ptr().add(self.head), self.filled) }
    }

    /// Appends `bytes`, received elsewhere: at most what the batch lacks.
    /// Returns them as they now lie in the pages.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> &[u8] {
        assert!(
            bytes.len() <= self.len - self.filled,
            "no more than the batch's length"
        );
        // SAFETY: `bytes.len()` bytes from `filled` lie inside the batch;
        // `bytes` cannot overlap memory this buffer owns uniquely.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.batch_ptr().add(self.filled), bytes.len())
        };
        self.arrived(bytes.len())
    }

    /// The bytes the batch still lacks, for a read that fills some of them
    /// (then [`assume_received`](ArrivingPages::assume_received)).
    pub fn spare_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        // The caller may leave any of these bytes uninitialized, those
        // `unfilled_zeroed` zeroed included: they count as not initialized.
        self.init = self.filled;
        let room = self.len - self.filled;
        // SAFETY: `room` bytes from `filled` lie inside the batch and are
        // borrowed uniquely; `MaybeUninit` makes no claim on their values.
        unsafe { std::slice::from_raw_parts_mut(self.batch_ptr().add(self.filled).cast(), room) }
    }

    /// The next bytes of the batch, at most `max`, zeroed first where not
    /// initialized yet: for a read through an API that takes `&mut [u8]`
    /// (then [`received`](ArrivingPages::received)).
    pub fn unfilled_zeroed(&mut self, max: usize) -> &mut [u8] {
        let n = max.min(self.len - self.filled);
        let upto = self.filled + n;
        if upto > self.init {
            // SAFETY: `[init, upto)` lies inside the batch.
            unsafe { std::ptr::write_bytes(self.batch_ptr().add(self.init), 0, upto - self.init) };
            self.init = upto;
        }
        // SAFETY: `[filled, upto)` is initialized and borrowed uniquely.
        unsafe { std::slice::from_raw_parts_mut(self.batch_ptr().add(self.filled), n) }
    }

    /// `n` more bytes were written into
    /// [`unfilled_zeroed`](ArrivingPages::unfilled_zeroed)'s slice: returns
    /// them.
    pub fn received(&mut self, n: usize) -> &[u8] {
        assert!(self.filled + n <= self.init, "received bytes were initialized");
        self.arrived(n)
    }

    /// `n` more bytes were written into
    /// [`spare_mut`](ArrivingPages::spare_mut)'s slice: returns them.
    ///
    /// # Safety
    /// The first `n` bytes of that slice must have been initialized.
    pub unsafe fn assume_received(&mut self, n: usize) -> &[u8] {
        assert!(n <= self.len - self.filled, "no more than the batch's length");
        self.arrived(n)
    }

    /// `n` more bytes, initialized, were received: counted, and returned.
    fn arrived(&mut self, n: usize) -> &[u8] {
        let from = self.filled;
        self.filled += n;
        self.init = self.init.max(self.filled);
        // SAFETY: `[from, filled)` of the batch was just initialized.
        unsafe { std::slice::from_raw_parts(self.pages.as_ptr().add(self.head + from), n) }
    }

    /// The whole pages, the batch at `head`. Panics unless all of it was
    /// received (only then is every byte initialized).
    pub fn into_pages(self) -> PageBuf {
        assert_eq!(self.filled, self.len, "a batch is finished once whole");
        self.pages
    }

    fn batch_ptr(&mut self) -> *mut u8 {
        // SAFETY: `head` < a page lies inside the allocation.
        unsafe { self.pages.as_mut_ptr().add(self.head) }
    }
}

/// Page buffers this shard keeps for reuse now.
#[cfg(test)]
pub(crate) fn kept_page_bufs() -> usize {
    KEPT_PAGE_BUFS.with(|p| p.borrow().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_buffers_are_aligned_and_zeroed() {
        for pages in [1usize, 3, 256] {
            let mut buf = PageBuf::zeroed(pages * PAGE_BYTES as usize);
            assert_eq!(buf.as_ptr() as usize % PAGE_BYTES as usize, 0);
            assert!(buf.iter().all(|&b| b == 0));
            buf[0] = 1;
            let last = buf.len() - 1;
            buf[last] = 2;
            assert_eq!((buf[0], buf[last]), (1, 2));
        }
    }

    #[test]
    fn write_buffers_are_reused_up_to_the_pool_size() {
        let page = PAGE_BYTES as usize;
        let mut first = PageBuf::for_write(POOLED_BUF_BYTES);
        assert_eq!(first.len(), POOLED_BUF_BYTES);
        first[0] = 9;
        let at = first.as_ptr() as usize;
        first.recycle();
        // The same allocation, now of another length, with the old bytes.
        let second = PageBuf::for_write(POOLED_MIN_BYTES);
        assert_eq!(
            (second.as_ptr() as usize, second.len(), second[0]),
            (at, POOLED_MIN_BYTES, 9)
        );
        // Larger than a pooled buffer, or smaller than the pooled minimum:
        // a zeroed one of its own size, not kept.
        for len in [POOLED_BUF_BYTES + page, POOLED_MIN_BYTES - page] {
            let own = PageBuf::for_write(len);
            assert_eq!(own.len(), len);
            assert!(own.iter().all(|&b| b == 0));
            own.recycle();
            assert_eq!(kept_page_bufs(), 0);
        }
        // The pool keeps at most `POOLED_BUFS_MAX`.
        second.recycle();
        let bufs: Vec<_> = (0..POOLED_BUFS_MAX + 3)
            .map(|_| PageBuf::for_write(POOLED_MIN_BYTES))
            .collect();
        bufs.into_iter().for_each(PageBuf::recycle);
        assert_eq!(kept_page_bufs(), POOLED_BUFS_MAX);
    }

    #[test]
    #[should_panic(expected = "whole pages")]
    fn a_page_buffer_is_whole_pages() {
        let _ = PageBuf::zeroed(100);
    }
}
