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

pub use server::serve;
