//! Requests and responses as values, and their mapping to frames.

use crate::codec::{Reader, Writer};
use crate::frame::{self, Frame};
use crate::requests::admin;
use crate::requests::error::ErrorResponse;
use crate::requests::fetch::{Fetch, FetchOk};
use crate::requests::hello::{Hello, HelloOk};
use crate::requests::produce::{IdempotentProduce, Produce, ProduceOk};
use crate::requests::produce_batch::{ProduceBatch, ProduceBatchOk};
use crate::{DecodeError, Kind};

#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    Hello(Hello),
    Produce(Produce),
    Fetch(Fetch),
    IdempotentProduce(IdempotentProduce),
    ProduceBatch(ProduceBatch),
    /// A JSON request (topics, groups, producer ids; see requests/admin.rs).
    Admin(Kind, serde_json::Value),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    HelloOk(HelloOk),
    ProduceOk(ProduceOk),
    FetchOk(FetchOk),
    ProduceBatchOk(ProduceBatchOk),
    AdminOk(serde_json::Value),
    Error(ErrorResponse),
}

impl Request {
    pub fn kind(&self) -> Kind {
        match self {
            Request::Hello(_) => Kind::Hello,
            Request::Produce(_) => Kind::Produce,
            Request::Fetch(_) => Kind::Fetch,
            Request::IdempotentProduce(_) => Kind::IdempotentProduce,
            Request::ProduceBatch(_) => Kind::ProduceBatch,
            Request::Admin(k, _) => *k,
        }
    }

    /// The frame for this request in two parts to send one after the
    /// other (`write_vectored`): a ProduceBatch not gzipped is its header,
    /// topic and partition, then its batch as it lies (a megabyte batch is
    /// not copied into a frame); any other request is its whole frame and
    /// nothing. The same bytes as [`to_frame`](Request::to_frame).
    pub fn frame_parts(&self, request_id: u64, gzip: bool) -> (Vec<u8>, &[u8]) {
        match self {
            Request::ProduceBatch(p) if !gzip => {
                let mut w = Writer::new();
                w.str16(&p.topic).u32(p.partition);
                let mut head = Vec::with_capacity(frame::HEADER_BYTES + w.buf.len());
                head.extend_from_slice(&frame::header(
                    Kind::ProduceBatch,
                    request_id,
                    w.buf.len() + p.batch.len(),
                    false,
                ));
                head.extend_from_slice(&w.buf);
                (head, &p.batch)
            }
            other => (other.to_frame(request_id, gzip), &[]),
        }
    }

    /// The frame for this request.
    pub fn to_frame(&self, request_id: u64, gzip: bool) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            Request::Hello(h) => h.encode(&mut w),
            Request::Produce(p) => p.encode(&mut w),
            Request::Fetch(f) => f.encode(&mut w),
            Request::IdempotentProduce(p) => p.encode(&mut w),
            Request::ProduceBatch(p) => p.encode(&mut w),
            Request::Admin(_, v) => w.buf = admin::encode_json(v),
        }
        frame::encode(self.kind(), request_id, &w.buf, gzip)
    }

    /// Decodes a request frame. A response kind is malformed here.
    pub fn from_frame(f: &Frame) -> Result<Request, DecodeError> {
        Request::decode(f.kind, &f.payload)
    }

    /// Decodes a request of `kind` from its (decompressed) payload.
    pub fn decode(kind: Kind, payload: &[u8]) -> Result<Request, DecodeError> {
        let mut r = Reader::new(payload);
        Ok(match kind {
            Kind::Hello => Request::Hello(Hello::decode(&mut r).and_then(|h| r.finish("hello").map(|_| h))?),
            Kind::Produce => Request::Produce(Produce::decode(&mut r)?),
            Kind::Fetch => Request::Fetch(Fetch::decode(&mut r)?),
            Kind::IdempotentProduce => Request::IdempotentProduce(IdempotentProduce::decode(&mut r)?),
            Kind::ProduceBatch => Request::ProduceBatch(ProduceBatch::decode(&mut r)?),
            k if k.is_json_request() => Request::Admin(k, admin::decode_json(payload)?),
            other => return Err(DecodeError::malformed(format!("{other:?} is not a request"))),
        })
    }
}

impl Response {
    pub fn kind(&self) -> Kind {
        match self {
            Response::HelloOk(_) => Kind::HelloOk,
            Response::ProduceOk(_) => Kind::ProduceOk,
            Response::FetchOk(_) => Kind::FetchOk,
            Response::ProduceBatchOk(_) => Kind::ProduceBatchOk,
            Response::AdminOk(_) => Kind::AdminOk,
            Response::Error(_) => Kind::Error,
        }
    }

    pub fn error(code: &str, message: impl Into<String>) -> Response {
        Response::Error(ErrorResponse {
            code: code.to_string(),
            message: message.into(),
            details: None,
        })
    }

    /// An error with details (a JSON object: `{"leader": {...}}`), as a
    /// connection of protocol `version` gets it: version 1 carries none
    /// (requests/error.rs).
    pub fn error_with_details(
        code: &str,
        message: impl Into<String>,
        details: Option<serde_json::Map<String, serde_json::Value>>,
        version: u16,
    ) -> Response {
        let e = ErrorResponse {
            code: code.to_string(),
            message: message.into(),
            details,
        };
        Response::Error(e.for_version(version))
    }

    /// The frame for this response.
    pub fn to_frame(&self, request_id: u64, gzip: bool) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            Response::HelloOk(h) => h.encode(&mut w),
            Response::ProduceOk(p) => p.encode(&mut w),
            Response::FetchOk(f) => f.encode(&mut w),
            Response::ProduceBatchOk(p) => p.encode(&mut w),
            Response::AdminOk(v) => w.buf = admin::encode_json(v),
            Response::Error(e) => e.encode(&mut w),
        }
        frame::encode(self.kind(), request_id, &w.buf, gzip)
    }

    /// The frame for this response, consuming it: a FetchOk whose batches
    /// were read with room in front becomes its frame without a copy.
    pub fn into_frame(self, request_id: u64, gzip: bool) -> Vec<u8> {
        match self {
            Response::FetchOk(ok) if !gzip => ok.into_frame(request_id),
            other => other.to_frame(request_id, gzip),
        }
    }

    /// Decodes a response frame, keeping a FetchOk's payload where it is.
    pub fn from_frame_owned(f: Frame) -> Result<Response, DecodeError> {
        match f.kind {
            Kind::FetchOk => Ok(Response::FetchOk(FetchOk::decode_owned(f.payload, 0)?)),
            _ => Response::from_frame(&f),
        }
    }

    pub fn from_frame(f: &Frame) -> Result<Response, DecodeError> {
        let mut r = Reader::new(&f.payload);
        Ok(match f.kind {
            Kind::HelloOk => Response::HelloOk(HelloOk::decode(&mut r)?),
            Kind::ProduceOk => Response::ProduceOk(ProduceOk::decode(&mut r)?),
            Kind::FetchOk => Response::FetchOk(FetchOk::decode(&mut r)?),
            Kind::ProduceBatchOk => Response::ProduceBatchOk(ProduceBatchOk::decode(&mut r)?),
            Kind::AdminOk => Response::AdminOk(admin::decode_json(&f.payload)?),
            Kind::Error => Response::Error(ErrorResponse::decode(&mut r)?),
            other => return Err(DecodeError::malformed(format!("{other:?} is not a response"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::produce::ProduceRecord;
    use proptest::prelude::*;

    #[test]
    fn frames_round_trip() {
        let req = Request::Produce(Produce {
            topic: "t".into(),
            records: vec![ProduceRecord {
                partition: Some(1),
                timestamp_ms: None,
                key: None,
                value: b"v".to_vec(),
            }],
        });
        for gzip in [false, true] {
            let bytes = req.to_frame(9, gzip);
            let (f, _) = frame::parse(&bytes, 1 << 20).unwrap();
            assert_eq!(f.request_id, 9);
            assert_eq!(Request::from_frame(&f).unwrap(), req);
        }
        let admin = Request::Admin(Kind::DescribeTopic, serde_json::json!({"name": "t"}));
        let (f, _) = frame::parse(&admin.to_frame(1, false), 1 << 20).unwrap();
        assert_eq!(Request::from_frame(&f).unwrap(), admin);
        let resp = Response::error("topic_not_found", "no");
        let (f, _) = frame::parse(&resp.to_frame(3, false), 1 << 20).unwrap();
        assert_eq!(Response::from_frame(&f).unwrap(), resp);
    }

    #[test]
    fn frame_parts_are_the_frame() {
        let mut bb = crate::batch::BatchBuilder::default();
        bb.push(Some(b"k"), &[7; 3000], 1_700_000_000_000);
        let batch = bb.finish(0, None).unwrap();
        let requests = [
            Request::ProduceBatch(ProduceBatch {
                topic: "orders".into(),
                partition: 3,
                batch: batch.clone(),
            }),
            Request::Admin(Kind::ListTopics, serde_json::json!({})),
        ];
        for req in &requests {
            for gzip in [false, true] {
                let (head, body) = req.frame_parts(5, gzip);
                assert_eq!(
                    [head, body.to_vec()].concat(),
                    req.to_frame(5, gzip),
                    "{req:?} gzip {gzip}"
                );
            }
        }
        // A ProduceBatch's batch is sent as it lies.
        let (head, body) = requests[0].frame_parts(5, false);
        assert_eq!(body.as_ptr(), batch_of(&requests[0]).as_ptr());
        assert_eq!(head.len(), frame::HEADER_BYTES + 2 + 6 + 4);
    }

    fn batch_of(req: &Request) -> &[u8] {
        match req {
            Request::ProduceBatch(p) => &p.batch,
            _ => unreachable!(),
        }
    }

    proptest! {
        /// The decoder fuzz target: any bytes, any kind, never a panic.
        #[test]
        fn any_frame_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok((f, _)) = frame::parse(&bytes, 1 << 16) {
                let _ = Request::from_frame(&f);
                let _ = Response::from_frame(&f);
            }
        }

        #[test]
        fn any_payload_under_every_kind_never_panics(kind in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Some(kind) = Kind::from_u8(kind) {
                let f = Frame { kind, request_id: 1, payload, gzip: false };
                let _ = Request::from_frame(&f);
                let _ = Response::from_frame(&f);
            }
        }
    }
}
