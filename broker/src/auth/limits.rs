//! Bounds of the key store, each with its reason (docs/security.md,
//! "Limits").

/// Keys the table holds, revoked ones included: the whole table is
/// rewritten on each change and held by every shard, so it stays a few
/// megabytes.
pub const KEYS_MAX: usize = 10_000;
/// Grants per key: a check scans them, so it stays a short list; a
/// service that needs more names a prefix.
pub const GRANTS_PER_KEY_MAX: usize = 100;
/// Longest key name: a label for people and tables, not data.
pub const KEY_NAME_CHARS_MAX: usize = 128;
/// Longest grant name for topics and groups: their own name limit.
pub const GRANT_NAME_CHARS_MAX: usize = 249;
/// Longest grant name for subjects: the registry's subject limit.
pub const SUBJECT_NAME_BYTES_MAX: usize = 255;
/// Largest api_keys.json read at start-up: KEYS_MAX keys of
/// GRANTS_PER_KEY_MAX grants each fit with room to spare.
pub const KEY_FILE_BYTES_MAX: u64 = 512 << 20;
