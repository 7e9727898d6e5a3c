//! Building responses and reading bodies.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Response, StatusCode};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

pub type Body = Full<Bytes>;

pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).expect("JSON values serialize");
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .expect("valid response")
}

pub fn error(e: &ApiError) -> Response<Body> {
    json(e.status, &e.body())
}

pub fn text(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}

/// Reads a whole body up to `limit` bytes; more is `payload_too_large`.
pub async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large(limit)),
        Err(e) => Err(ApiError::invalid(format!("could not read the request body: {e}"))),
    }
}

pub fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("request body is larger than {limit} bytes (--http-body-bytes-max); send smaller batches"),
    )
}

/// Parses JSON: a body that is not well-formed JSON (a syntax error,
/// invalid UTF-8, nesting deeper than 128) is `bad_json`; well-formed JSON
/// of the wrong shape is `invalid_request`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        if e.classify() != serde_json::error::Category::Data {
            return ApiError::bad_json(format!("request body is not valid JSON: {e}"));
        }
        // A shape error may be found before a syntax error later on: only
        // well-formed JSON is reported as the wrong shape. Parsed as a
        // `Value`, which checks what skipping a value does not: strings are
        // UTF-8, nesting stays within serde_json's recursion limit.
        match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(_) => ApiError::invalid(format!("request body: {e}")),
            Err(syntax) => ApiError::bad_json(format!("request body is not valid JSON: {syntax}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Named {
        name: String,
    }

    fn code<T: DeserializeOwned + std::fmt::Debug>(bytes: &[u8]) -> &'static str {
        parse::<T>(bytes).expect_err("refused").code
    }

    #[test]
    fn json_that_is_not_well_formed_is_bad_json() {
        // Invalid UTF-8 in a string, where a field is read and where one is
        // only skipped past a shape error.
        assert_eq!(code::<Named>(b"{\"name\":\"a\xff\"}"), "bad_json");
        assert_eq!(code::<Named>(b"{\"other\":1,\"x\":\"\xc3\x28\"}"), "bad_json");
        assert_eq!(code::<serde_json::Value>(b"{\"v\":\"\xff\"}"), "bad_json");
        // Nesting past serde_json's limit of 128, into a typed body and a
        // free-form one.
        let deep = format!("{{\"name\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(code::<Named>(deep.as_bytes()), "bad_json");
        let deep_value = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(code::<serde_json::Value>(deep_value.as_bytes()), "bad_json");
        // Truncated, trailing garbage, a wrong shape followed by a syntax
        // error.
        assert_eq!(code::<Named>(b"{\"name\":"), "bad_json");
        assert_eq!(code::<Named>(b"{\"name\":\"a\"} x"), "bad_json");
        assert_eq!(code::<Named>(b"{\"name\":1, }"), "bad_json");
    }

    #[test]
    fn well_formed_json_of_the_wrong_shape_is_invalid_request() {
        assert_eq!(code::<Named>(b"{\"name\":1}"), "invalid_request");
        assert_eq!(code::<Named>(b"{\"nom\":\"a\"}"), "invalid_request");
        assert_eq!(code::<Named>(b"[1,2]"), "invalid_request");
        // Deep, but within the limit.
        let nested = format!("{{\"name\":{}{}}}", "[".repeat(100), "]".repeat(100));
        assert_eq!(code::<Named>(nested.as_bytes()), "invalid_request");
        assert_eq!(parse::<Named>(b"{\"name\":\"a\"}").unwrap().name, "a");
    }
}
