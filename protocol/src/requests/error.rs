//! Error: the one error shape, answering any request.
//!
//! ```text
//! Error (kind 0xff): str16 code, str32 message
//! ```
//! `code` is a snake_case code shared with the HTTP API (docs/api.md) or a
//! protocol code (`malformed_frame`, `frame_too_large`, `unknown_request`,
//! `handshake_required`, `unsupported_version`); after a protocol error the
//! broker closes the connection.

use crate::codec::{Reader, Writer};
use crate::DecodeError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    pub code: String,
    pub message: String,
}

impl ErrorResponse {
    pub fn encode(&self, w: &mut Writer) {
        w.str16(&self.code).str32(&self.message);
    }
    pub fn decode(r: &mut Reader) -> Result<ErrorResponse, DecodeError> {
        Ok(ErrorResponse {
            code: r.str16("code")?,
            message: r.str32("message")?,
        })
    }
}

impl std::fmt::Display for ErrorResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let e = ErrorResponse {
            code: "topic_not_found".into(),
            message: "topic \"x\" does not exist".into(),
        };
        let mut w = Writer::new();
        e.encode(&mut w);
        assert_eq!(ErrorResponse::decode(&mut Reader::new(&w.buf)).unwrap(), e);
    }
}
