//! Reading a registry request's path and query: percent-decoding (a
//! subject may hold any character, and clients escape all but the
//! unreserved ones), versions and ids as Confluent parses them.

use crate::error::{ApiError, ErrorCode};
use crate::registry::request::VersionRef;

/// `s` percent-decoded (and `+` as a space, in a query); `None` when an
/// escape is malformed or the result is not UTF-8.
pub fn decode(s: &str, plus_is_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A path segment naming a subject, decoded; 42208 when it cannot be.
pub fn subject(segment: &str) -> Result<String, ApiError> {
    decode(segment, false).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidSubject,
            format!("subject {segment:?} is not valid percent-encoded UTF-8"),
        )
    })
}

/// A version as a path names it: `latest`, `-1` (the latest), or 1 to
/// 2^31-1; anything else is 42202.
pub fn version(segment: &str) -> Result<VersionRef, ApiError> {
    match segment {
        "latest" | "-1" => Ok(VersionRef::Latest),
        s => match s.parse::<u32>() {
            Ok(n) if n >= 1 && n <= i32::MAX as u32 => Ok(VersionRef::Number(n)),
            _ => Err(ApiError::new(
                ErrorCode::InvalidVersion,
                format!(
                    "The specified version '{}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"",
                    decode(s, false).unwrap_or_else(|| s.to_string())
                ),
            )),
        },
    }
}

/// A schema id as a path names it; one that is not an id is not found.
pub fn id(segment: &str) -> Result<u32, ApiError> {
    segment
        .parse::<u32>()
        .ok()
        .filter(|id| *id >= 1)
        .ok_or_else(|| ApiError::new(ErrorCode::SchemaNotFound, format!("schema {segment:?} not found")))
}

/// The query's parameters, decoded (a malformed one is dropped).
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(query: Option<&str>) -> Query {
        let pairs = query
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .filter_map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                Some((decode(k, true)?, decode(v, true)?))
            })
            .collect();
        Query(pairs)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// A flag: `true` (any case) is true, anything else false.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn versions_as_confluent_reads_them() {
        assert_eq!(version("latest").unwrap(), VersionRef::Latest);
        assert_eq!(version("-1").unwrap(), VersionRef::Latest);
        assert_eq!(version("7").unwrap(), VersionRef::Number(7));
        for bad in ["0", "abc", "-2", "2147483648", "", "1.5"] {
            assert_eq!(version(bad).unwrap_err().code.confluent(), 42202, "{bad}");
        }
    }

    #[test]
    fn subjects_and_queries_decode() {
        assert_eq!(subject("orders%2Dvalue").unwrap(), "orders-value");
        assert_eq!(subject("a%0Ab").unwrap(), "a\nb");
        assert_eq!(subject("%FF").unwrap_err().code.confluent(), 42208);
        assert!(decode("%G0", false).is_none() && decode("%4", false).is_none());
        let q = Query::parse(Some("deleted=true&subjectPrefix=a+b&x&permanent=TRUE"));
        assert!(q.flag("deleted") && q.flag("permanent") && !q.flag("x"));
        assert_eq!(q.get("subjectPrefix"), Some("a b"));
        assert_eq!(id("0").unwrap_err().code.confluent(), 40403);
        assert_eq!(id("12").unwrap(), 12);
    }

    proptest! {
        #[test]
        fn decoding_any_text_never_panics(s in ".{0,40}", plus in any::<bool>()) {
            let _ = decode(&s, plus);
            let _ = version(&s);
            let _ = id(&s);
            let _ = Query::parse(Some(&s));
        }
    }
}
