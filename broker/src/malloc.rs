//! Allocator settings for the large, short-lived buffers of fetches.
//!
//! A fetch reply is one buffer of up to `max_bytes` (1 MiB from the es
//! client). glibc serves anything above 128 KiB with a fresh mmap and
//! unmaps it on free, so every fetch page-faulted its whole buffer back in,
//! zero-filled by the kernel: measured, consume from the page cache ran at
//! ~60% of what it does with the buffers reused. Raising the mmap threshold
//! to glibc's largest (32 MiB) keeps such buffers in the heap, and the trim
//! threshold keeps a freed one for the next fetch instead of handing its
//! pages back at once.

/// Buffers up to this size come from the heap, not their own mmap.
pub const MMAP_THRESHOLD_BYTES: i32 = 32 << 20;
/// Free memory at the top of a heap kept for reuse before trimming.
pub const TRIM_THRESHOLD_BYTES: i32 = 64 << 20;

/// Applies the settings above; call once at start, before any thread.
pub fn keep_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
    }
}
