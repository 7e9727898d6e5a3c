//! The HTTP + JSON API: a listener on every shard (SO_REUSEPORT spreads
//! connections over them), hyper http1 per connection, routes to handlers.

pub mod auth;
mod groups;
pub mod io;
mod keys;
mod producers;
mod records;
pub mod response;
mod routes;
mod server;
mod topics;

pub use server::{serve, serve_routes, Conn};
