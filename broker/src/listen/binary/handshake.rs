//! The handshake of a binary connection: the first frame must be a Hello
//! with a version the broker speaks, and may be no larger than a Hello can
//! be.

use es_protocol::requests::hello::HelloOk;
use es_protocol::{ErrorCode, Request, Response, PROTOCOL_VERSION};

use crate::shard::Shard;

/// The handshake: the first frame must be a Hello with a version we speak.
pub fn hello(shard: &Shard, req: Option<&Request>) -> Result<Response, Response> {
    let Some(Request::Hello(h)) = req else {
        return Err(Response::error(
            ErrorCode::HANDSHAKE_REQUIRED,
            "the first frame must be a Hello",
        ));
    };
    if !(h.min_version..=h.max_version).contains(&PROTOCOL_VERSION) {
        return Err(Response::error(
            ErrorCode::UNSUPPORTED_VERSION,
            format!(
                "client speaks versions {}..={}, the broker speaks {PROTOCOL_VERSION}",
                h.min_version, h.max_version
            ),
        ));
    }
    Ok(Response::HelloOk(HelloOk {
        version: PROTOCOL_VERSION,
        frame_bytes_max: shard.config.frame_bytes_max as u32,
        inflight_requests_max: shard.config.inflight_requests_max as u32,
        broker_version: env!("CARGO_PKG_VERSION").to_string(),
    }))
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
