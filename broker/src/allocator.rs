//! The broker's memory allocator: mimalloc, per-thread heaps.
//!
//! Each shard allocates and frees small buffers for every request (a frame,
//! a batch, a reply, a task). With glibc's malloc these cost ~16% of the
//! broker's CPU under 50 connections x 16 single-record produces (its bins
//! consolidate on every allocation just above 1 KiB, the size of a
//! one-record batch); with mimalloc that load ran ~20% faster
//! (docs/benchmarks.md). Large fetch and produce buffers are reused from
//! its heaps as well, so they are not faulted in anew each time.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
