//! The HTTP + JSON API: a listener on every shard (SO_REUSEPORT spreads
//! connections over them), hyper http1 per connection, routes to handlers.

mod auth;
mod groups;
mod io;
mod keys;
mod producers;
mod records;
mod response;
mod routes;
mod server;
mod topics;

pub use server::serve;
