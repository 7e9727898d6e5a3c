//! Kafka frames to requests and responses to frames, through the
//! `kafka-protocol` crate: the versions es advertises (the one table,
//! [`ADVERTISED`]), the request header read at the version its own
//! api_key and api_version call for, the body decoded at that version,
//! and every response framed with its header. A frame that does not
//! decode, names an API es does not serve or a version outside what it
//! advertises is refused ([`Refusal`]): the connection closes, except an
//! ApiVersions above what es speaks, which is answered with
//! UNSUPPORTED_VERSION and the table (KIP-511).

use bytes::{Buf, Bytes};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// UNSUPPORTED_VERSION.
pub const UNSUPPORTED_VERSION: i16 = 35;

/// Every API es serves: (api key, lowest, highest version advertised).
/// Produce is advertised from 0 though only 3 and later are accepted:
/// librdkafka checks Produce's minimum to decide whether compression is
/// possible (KAFKA-18659).
pub const ADVERTISED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 5),
    (ApiKey::DeleteTopics, 1, 4),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 3),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The lowest Produce version accepted (what is advertised below it only
/// tells librdkafka that compression works).
pub const PRODUCE_ACCEPTED_MIN: i16 = 3;

/// The versions of `key` es accepts, if it serves it.
pub fn accepted(key: ApiKey) -> Option<(i16, i16)> {
    ADVERTISED.iter().find(|(k, ..)| *k == key).map(|&(k, lo, hi)| {
        if k == ApiKey::Produce {
            (PRODUCE_ACCEPTED_MIN, hi)
        } else {
            (lo, hi)
        }
    })
}

macro_rules! bodies {
    ($($name:ident($ty:ty)),* $(,)?) => {
        /// A decoded request body.
        #[derive(Debug)]
        pub enum Body { $($name($ty)),* }

        fn decode_body(key: ApiKey, buf: &mut Bytes, version: i16) -> Result<Body, String> {
            match key {
                $(ApiKey::$name => <$ty>::decode(buf, version).map(Body::$name).map_err(|e| e.to_string()),)*
                other => Err(format!("api {other:?} is not served")),
            }
        }
    };
}

bodies! {
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    SaslHandshake(SaslHandshakeRequest),
    ApiVersions(ApiVersionsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    InitProducerId(InitProducerIdRequest),
    DescribeConfigs(DescribeConfigsRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
}

/// A request, decoded.
#[derive(Debug)]
pub struct Req {
    pub key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    pub body: Body,
}

/// Why a frame is not a request es runs.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An ApiVersions at a version es does not speak: answered with
    /// UNSUPPORTED_VERSION and the table, v0-encoded.
    ApiVersionsTooNew { correlation_id: i32 },
    /// Anything else: the connection closes. Says why, for the log.
    Close(String),
}

/// Decodes one frame's bytes (the length prefix taken off). Never panics
/// on any input (fuzzed: records/tests.rs and tests/kafka_hostile.rs).
pub fn decode(mut frame: Bytes) -> Result<Req, Refusal> {
    if frame.len() < 8 {
        return Err(Refusal::Close(format!(
            "a {}-byte frame has no request header",
            frame.len()
        )));
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let key = ApiKey::try_from(raw_key).map_err(|_| {
        Refusal::Close(format!(
            "unknown api key {raw_key} (correlation id {correlation_id})"
        ))
    })?;
    let Some((lo, hi)) = accepted(key) else {
        return Err(Refusal::Close(format!("api {key:?} is not served")));
    };
    if !(lo..=hi).contains(&version) {
        if key == ApiKey::ApiVersions && version > hi {
            return Err(Refusal::ApiVersionsTooNew { correlation_id });
        }
        return Err(Refusal::Close(format!(
            "{key:?} v{version} is outside the versions served, {lo}..={hi}"
        )));
    }
    let header_version = key.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| Refusal::Close(format!("{key:?} v{version}: bad request header: {e}")))?;
    let body = decode_body(key, &mut frame, version)
        .map_err(|e| Refusal::Close(format!("{key:?} v{version}: bad request body: {e}")))?;
    // Bytes past the body are ignored, as Kafka's brokers do (librdkafka
    // sends some Metadata v12 requests with a few).
    if frame.has_remaining() {
        tracing::debug!(api = ?key, version, extra = frame.remaining(), "bytes past a Kafka request's end");
    }
    Ok(Req {
        key,
        version,
        correlation_id,
        client_id: header.client_id.map(|c| c.to_string()),
        body,
    })
}

/// Frames `body`, the response to a `key` request at `version`: length,
/// header (v0, or v1 for flexible versions; ApiVersions always v0), body.
pub fn frame<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<Vec<u8>, String> {
    let header_version = key.response_header_version(version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&[0; 4]);
    header
        .encode(&mut out, header_version)
        .map_err(|e| format!("{key:?} v{version} response header: {e}"))?;
    body.encode(&mut out, version)
        .map_err(|e| format!("{key:?} v{version} response: {e}"))?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// The table as ApiVersions answers it.
pub fn api_keys() -> Vec<api_versions_response::ApiVersion> {
    ADVERTISED
        .iter()
        .map(|&(k, lo, hi)| {
            api_versions_response::ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(lo)
                .with_max_version(hi)
        })
        .collect()
}

/// The answer to an ApiVersions es cannot speak: v0, UNSUPPORTED_VERSION,
/// with the table so that the client can pick a version.
pub fn api_versions_too_new(correlation_id: i32) -> Vec<u8> {
    let body = ApiVersionsResponse::default()
        .with_error_code(UNSUPPORTED_VERSION)
        .with_api_keys(api_keys());
    frame(ApiKey::ApiVersions, 0, correlation_id, &body).expect("a v0 ApiVersions response encodes")
}

/// A string for a response.
pub fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_version_decodes_with_the_crate() {
        for &(k, lo, hi) in ADVERTISED {
            let (vlo, vhi) = (k.valid_versions().min, k.valid_versions().max);
            let lo = if k == ApiKey::Produce {
                PRODUCE_ACCEPTED_MIN
            } else {
                lo
            };
            assert!(vlo <= lo && hi <= vhi, "{k:?} {lo}..={hi} within {vlo}..={vhi}");
        }
    }

    #[test]
    fn short_unknown_and_unsupported_frames_are_refused() {
        assert!(matches!(
            decode(Bytes::from_static(&[0, 18])),
            Err(Refusal::Close(_))
        ));
        let unknown = Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(matches!(decode(unknown), Err(Refusal::Close(_))));
        let too_new = Bytes::from_static(&[0, 18, 0x27, 0x0f, 0, 0, 0, 7, 0xff, 0xff]);
        assert_eq!(
            decode(too_new).unwrap_err(),
            Refusal::ApiVersionsTooNew { correlation_id: 7 }
        );
        let produce_v2 = Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 7, 0xff, 0xff]);
        assert!(matches!(decode(produce_v2), Err(Refusal::Close(_))));
    }

    #[test]
    fn an_api_versions_v0_request_decodes_and_its_answer_frames() {
        let req = Bytes::from_static(&[0, 18, 0, 0, 0, 0, 0, 9, 0, 1, b'c']);
        let r = decode(req).unwrap();
        assert_eq!((r.key, r.version, r.correlation_id), (ApiKey::ApiVersions, 0, 9));
        assert_eq!(r.client_id.as_deref(), Some("c"));
        let out = api_versions_too_new(9);
        assert_eq!(
            i32::from_be_bytes(out[..4].try_into().unwrap()) as usize,
            out.len() - 4
        );
        assert_eq!(&out[4..8], &9i32.to_be_bytes());
        assert_eq!(&out[8..10], &UNSUPPORTED_VERSION.to_be_bytes());
    }
}
