//! Who an HTTP request runs as: `Authorization: Bearer <key>`, or
//! `Basic base64(<id>:<key>)` (Confluent clients' way; the user name must
//! be the key's id). Checked on every request, the connection keeps no
//! identity: a revoked or changed key takes effect on the next request.

use base64::Engine;
use hyper::header::{HeaderMap, AUTHORIZATION};

use crate::auth::principal::unauthenticated;
use crate::auth::table::Refused;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::shard::Shard;

/// The `WWW-Authenticate` value of a 401.
pub const CHALLENGE: &str = "Bearer realm=\"es\"";

/// The request's principal, or the 401 that answers it.
pub fn principal(shard: &Shard, headers: &HeaderMap) -> Result<Principal, ApiError> {
    let keys = &shard.state.keys;
    if !keys.required() {
        return Ok(Principal::Anonymous);
    }
    let refuse = |r: Refused| unauthenticated(r);
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Err(refuse(Refused::Missing));
    };
    let value = value.to_str().map_err(|_| refuse(Refused::Invalid))?.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    let key = if scheme.eq_ignore_ascii_case("bearer") {
        rest.to_string()
    } else if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| refuse(Refused::Invalid))?;
        let (user, key) = decoded.split_once(':').ok_or_else(|| refuse(Refused::Invalid))?;
        let entry = keys.authenticate(key).map_err(refuse)?;
        if entry.id != user {
            return Err(ApiError::new(
                crate::error::ErrorCode::Unauthenticated,
                "Basic authentication: the user name must be the key's id",
            ));
        }
        return Ok(Principal::Key(entry));
    } else {
        return Err(ApiError::new(
            crate::error::ErrorCode::Unauthenticated,
            "Authorization must be `Bearer <key>` or `Basic base64(<id>:<key>)`",
        ));
    };
    keys.authenticate(&key).map(Principal::Key).map_err(refuse)
}
