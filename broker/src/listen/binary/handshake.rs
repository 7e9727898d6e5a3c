//! The handshake of a binary connection: the first frame must be a Hello
//! with a version the broker speaks, and may be no larger than a Hello can
//! be; with `--auth required`, its api_key must authenticate. Each later
//! request checks the key is still valid (not revoked) and takes its
//! current grants.

use es_protocol::requests::hello::HelloOk;
use es_protocol::{ErrorCode, Request, Response, PROTOCOL_VERSION, PROTOCOL_VERSION_MIN};

use crate::auth::principal::unauthenticated;
use crate::auth::Principal;
use crate::shard::Shard;

/// The handshake: the first frame must be a Hello with a version we speak
/// and, with `--auth required`, a key that authenticates: the answer and
/// who the connection runs as, with the version agreed (the newest both
/// speak), or the error frame that closes it.
pub fn hello(shard: &Shard, req: Option<&Request>) -> Result<(Response, Principal, u16), Response> {
    let Some(Request::Hello(h)) = req else {
        return Err(Response::error(
            ErrorCode::HANDSHAKE_REQUIRED,
            "the first frame must be a Hello",
        ));
    };
    let Some(version) = es_protocol::negotiate(h.min_version, h.max_version) else {
        return Err(Response::error(
            ErrorCode::UNSUPPORTED_VERSION,
            format!(
                "client speaks versions {}..={}, the broker speaks {PROTOCOL_VERSION_MIN}..={PROTOCOL_VERSION}",
                h.min_version, h.max_version
            ),
        ));
    };
    let principal = if shard.state.keys.required() {
        match shard.state.keys.authenticate(&h.api_key) {
            Ok(key) => Principal::Key(key),
            Err(refused) => return Err(refused_frame(refused)),
        }
    } else {
        Principal::Anonymous
    };
    let ok = Response::HelloOk(HelloOk {
        version,
        frame_bytes_max: shard.config.frame_bytes_max as u32,
        inflight_requests_max: shard.config.inflight_requests_max as u32,
        broker_version: env!("CARGO_PKG_VERSION").to_string(),
    });
    Ok((ok, principal, version))
}

/// Before each request after the Hello: the connection's key, with its
/// grants as they are now; or, revoked since, the `unauthenticated` error
/// frame that closes the connection.
pub fn still_valid(shard: &Shard, principal: &mut Principal) -> Result<(), Response> {
    if let Principal::Key(held) = principal {
        match shard.state.keys.current(held) {
            Ok(now) => *held = now,
            Err(refused) => return Err(refused_frame(refused)),
        }
    }
    Ok(())
}

fn refused_frame(refused: crate::auth::table::Refused) -> Response {
    metrics::counter!("es_auth_unauthenticated_total", "listener" => "binary").increment(1);
    let e = unauthenticated(refused);
    Response::error(e.code.wire(), e.message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::HELLO_FRAME_BYTES_MAX;
    use es_protocol::frame;

    #[test]
    fn a_hello_fits_before_the_handshake() {
        let longest = Request::Hello(es_protocol::requests::hello::Hello {
            min_version: 1,
            max_version: 1,
            client_id: "c".repeat(u16::MAX as usize),
            api_key: "k".repeat(u16::MAX as usize),
        })
        .to_frame(0, false);
        assert_eq!(longest.len(), HELLO_FRAME_BYTES_MAX);
        assert!(frame::check(&longest, HELLO_FRAME_BYTES_MAX).is_ok());
    }
}
