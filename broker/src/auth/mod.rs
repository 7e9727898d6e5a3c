//! Authentication and authorization (docs/security.md): API keys, their
//! store and the table every shard reads, grants, and who a request runs
//! as. With `--auth disabled` (the default) every request runs as
//! `Principal::Anonymous` and nothing here refuses anything.

pub mod admin; // key management: reads on any shard, changes on the controller
pub mod bootstrap; // the table at start-up: the file, or the first admin key
pub mod grants; // resources, patterns, operations, and what a grant allows
pub mod principal; // who a request runs as, and the checks operations make
pub mod quota; // per-key GCRA buckets: produce and fetch bytes per second
pub mod reload; // SIGHUP: read api_keys.json again
pub mod store; // api_keys.json: parse, render, durable private writes
pub mod table; // the shared table (ArcSwap), authentication, revocation

/// The key format (esk_<id>_<secret>_<crc>): es-keys', shared with es-tools.
pub use es_keys::token;

pub use principal::Principal;
pub use table::{AuthMode, Keys};
