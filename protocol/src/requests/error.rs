//! Error: the one error shape, answering any request.
//!
//! ```text
//! Error (kind 0xff): str16 code, str32 message
//!                    [version 2: str32 details]
//! ```
//! `code` is a snake_case code shared with the HTTP API (docs/api.md) or a
//! protocol code (`malformed_frame`, `frame_too_large`, `unknown_request`,
//! `handshake_required`, `unsupported_version`); after a protocol error the
//! broker closes the connection.
//!
//! `details` (protocol version 2) is a JSON object with the fields the HTTP
//! API renders inside `error` beside code and message (`leader`, `leaders`
//! of a `not_leader`), or absent or "" for none. A broker never sends it on
//! a version 1 connection, whose clients read the leader in the message.
//! The decoder takes it when bytes follow the message, so it reads the
//! frames of both versions.

use crate::codec::{Reader, Writer};
use crate::DecodeError;

/// The first protocol version whose Error frames may carry `details`.
pub const DETAILS_VERSION: u16 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    pub code: String,
    pub message: String,
    /// The error's details: a JSON object (`{"leader": {...}}`), or none.
    pub details: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ErrorResponse {
    /// Writes the frame's payload; `details` only if there are some (a
    /// broker clears them for a version 1 connection: [`for_version`]).
    ///
    /// [`for_version`]: ErrorResponse::for_version
    pub fn encode(&self, w: &mut Writer) {
        w.str16(&self.code).str32(&self.message);
        if let Some(details) = &self.details {
            w.str32(&serde_json::Value::Object(details.clone()).to_string());
        }
    }

    pub fn decode(r: &mut Reader) -> Result<ErrorResponse, DecodeError> {
        let code = r.str16("code")?;
        let message = r.str32("message")?;
        let details = if r.remaining() == 0 {
            None
        } else {
            let text = r.str32("details")?;
            r.finish("details")?;
            if text.is_empty() {
                None
            } else {
                match serde_json::from_str(&text) {
                    Ok(serde_json::Value::Object(map)) => Some(map),
                    Ok(_) => return Err(DecodeError::malformed("details is not a JSON object")),
                    Err(e) => return Err(DecodeError::malformed(format!("details is not JSON: {e}"))),
                }
            }
        };
        Ok(ErrorResponse {
            code,
            message,
            details,
        })
    }

    /// This error as a connection of `version` gets it: below version 2,
    /// without details (its message names the leader already).
    pub fn for_version(mut self, version: u16) -> ErrorResponse {
        if version < DETAILS_VERSION {
            self.details = None;
        }
        self
    }

    /// The `leader` of a `not_leader` error: the node's id and addresses,
    /// or `None` when there are no details or the leader is null (unknown).
    pub fn leader(&self) -> Option<Leader> {
        Leader::from_json(self.details.as_ref()?.get("leader")?)
    }

    /// The `leaders` of a `not_leader` error for a produce spanning
    /// partitions: each partition's leader, `None` where it is unknown.
    pub fn leaders(&self) -> Vec<(u32, Option<Leader>)> {
        let Some(map) = self
            .details
            .as_ref()
            .and_then(|d| d.get("leaders"))
            .and_then(|l| l.as_object())
        else {
            return Vec::new();
        };
        map.iter()
            .filter_map(|(p, l)| Some((p.parse().ok()?, Leader::from_json(l))))
            .collect()
    }
}

/// Where a partition's leader answers clients (`error.leader`, and the
/// nodes of `GET /v1/cluster`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Leader {
    pub node_id: u64,
    pub http_addr: String,
    pub binary_addr: String,
}

impl Leader {
    /// A leader object; null or anything else is no leader.
    pub fn from_json(v: &serde_json::Value) -> Option<Leader> {
        serde_json::from_value(v.clone()).ok()
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
    use proptest::prelude::*;

    fn not_leader() -> ErrorResponse {
        let details = serde_json::json!({
            "leader": {"node_id": 2, "http_addr": "127.0.0.1:8102", "binary_addr": "127.0.0.1:9102"}
        });
        ErrorResponse {
            code: "not_leader".into(),
            message: "node 2 leads it".into(),
            details: details.as_object().cloned(),
        }
    }

    #[test]
    fn round_trip() {
        let e = ErrorResponse {
            code: "topic_not_found".into(),
            message: "topic \"x\" does not exist".into(),
            details: None,
        };
        let mut w = Writer::new();
        e.encode(&mut w);
        assert_eq!(ErrorResponse::decode(&mut Reader::new(&w.buf)).unwrap(), e);
    }

    #[test]
    fn version_2_carries_the_leader_and_version_1_does_not() {
        let e = not_leader();
        let mut w = Writer::new();
        e.clone().for_version(2).encode(&mut w);
        let back = ErrorResponse::decode(&mut Reader::new(&w.buf)).unwrap();
        assert_eq!(back, e);
        let leader = back.leader().unwrap();
        assert_eq!(
            (leader.node_id, leader.binary_addr.as_str()),
            (2, "127.0.0.1:9102")
        );

        let mut v1 = Writer::new();
        e.clone().for_version(1).encode(&mut v1);
        let mut plain = Writer::new();
        plain.str16("not_leader").str32("node 2 leads it");
        assert_eq!(v1.buf, plain.buf, "a version 1 frame is code and message only");
        assert_eq!(
            ErrorResponse::decode(&mut Reader::new(&v1.buf)).unwrap().leader(),
            None
        );
    }

    #[test]
    fn leaders_of_a_spanning_produce() {
        let details = serde_json::json!({"leaders": {
            "0": {"node_id": 1, "http_addr": "h1", "binary_addr": "b1"}, "4": null}});
        let e = ErrorResponse {
            code: "not_leader".into(),
            message: String::new(),
            details: details.as_object().cloned(),
        };
        let mut w = Writer::new();
        e.encode(&mut w);
        let back = ErrorResponse::decode(&mut Reader::new(&w.buf)).unwrap();
        let leaders = back.leaders();
        assert_eq!(leaders.len(), 2);
        assert_eq!(leaders[0].0, 0);
        assert_eq!(leaders[0].1.as_ref().unwrap().binary_addr, "b1");
        assert_eq!(leaders[1], (4, None));
    }

    #[test]
    fn bad_details_are_malformed() {
        for details in ["[1]", "{", "\"x\"", "null"] {
            let mut w = Writer::new();
            w.str16("not_leader").str32("m").str32(details);
            assert!(
                ErrorResponse::decode(&mut Reader::new(&w.buf)).is_err(),
                "{details}"
            );
        }
        let mut w = Writer::new();
        w.str16("not_leader").str32("m").str32("").u8(0);
        assert!(
            ErrorResponse::decode(&mut Reader::new(&w.buf)).is_err(),
            "trailing bytes"
        );
        let mut w = Writer::new();
        w.str16("not_leader").str32("m").str32("");
        assert_eq!(
            ErrorResponse::decode(&mut Reader::new(&w.buf)).unwrap().details,
            None
        );
        // Cut anywhere inside the details, a frame is refused, not misread.
        let mut full = Writer::new();
        not_leader().encode(&mut full);
        let head = 2 + "not_leader".len() + 4 + "node 2 leads it".len();
        for cut in (head + 1)..full.buf.len() {
            assert!(
                ErrorResponse::decode(&mut Reader::new(&full.buf[..cut])).is_err(),
                "cut at {cut}"
            );
        }
    }

    proptest! {
        /// Any code, message and details object round-trips.
        #[test]
        fn any_error_round_trips(
            code in "[a-z_]{1,30}",
            message in ".{0,200}",
            fields in proptest::collection::btree_map("[a-z]{1,8}", any::<i64>(), 0..4),
            node in any::<u64>(),
            addr in "[0-9.:]{0,21}",
        ) {
            let mut details: serde_json::Map<String, serde_json::Value> =
                fields.into_iter().map(|(k, v)| (k, v.into())).collect();
            details.insert("leader".into(), serde_json::json!({"node_id": node, "http_addr": addr, "binary_addr": addr}));
            let e = ErrorResponse { code, message, details: Some(details) };
            let mut w = Writer::new();
            e.encode(&mut w);
            let back = ErrorResponse::decode(&mut Reader::new(&w.buf)).unwrap();
            prop_assert_eq!(back.leader().map(|l| l.node_id), Some(node));
            prop_assert_eq!(back, e);
        }

        /// Any bytes after a valid code and message: an error or a value,
        /// never a panic.
        #[test]
        fn any_details_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..128)) {
            let mut w = Writer::new();
            w.str16("not_leader").str32("m");
            w.buf.extend_from_slice(&tail);
            let _ = ErrorResponse::decode(&mut Reader::new(&w.buf));
        }
    }
}
