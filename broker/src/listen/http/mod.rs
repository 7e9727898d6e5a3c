//! The HTTP + JSON API: a listener on every shard (SO_REUSEPORT spreads
//! connections over them), hyper http1 per connection, routes to handlers.

mod groups;
mod io;
mod producers;
mod records;
mod response;
mod routes;
mod server;
mod topics;

pub use groups::{commit_op as groups_commit_op, join_op as groups_join_op, reset_args as groups_reset_args};
pub use producers::init_json as init_producer_json;
pub use server::serve;
