//! The key store's bounds (docs/security.md, "Limits"), each with its
//! unit and why. The broker's `limits.rs` re-exports them.

/// Keys the table holds, revoked ones included: the whole table is
/// rewritten on each change and held by every shard, so it stays a few
/// megabytes.
pub const KEYS_MAX: usize = 10_000;
/// Grants per key: a check scans them, so it stays a short list; a
/// service that needs more names a prefix.
pub const GRANTS_PER_KEY_MAX: usize = 100;
/// Longest key name, in characters (ASCII): a label for people and
/// tables, not data.
pub const KEY_NAME_CHARS_MAX: usize = 128;
/// Largest api_keys.json read, in bytes: KEYS_MAX keys of
/// GRANTS_PER_KEY_MAX grants each fit with room to spare.
pub const KEY_FILE_BYTES_MAX: u64 = 512 << 20;
// A full table of short grants fits the file bound (a grant is < 500
// bytes of JSON with the longest names).
const _: () = assert!((KEYS_MAX * GRANTS_PER_KEY_MAX * 500) as u64 <= KEY_FILE_BYTES_MAX);
