//! SASL/PLAIN with an es API key (docs/kafka.md, "Security"):
//! SaslHandshake offers `PLAIN`; SaslAuthenticate (after a v1 handshake)
//! or the one raw token that follows a v0 handshake carries
//! `authzid \0 username \0 password`, where the username is the key's id
//! and the password the whole key. A wrong key is answered
//! SASL_AUTHENTICATION_FAILED and the connection closes. With `--auth
//! required`, a connection runs nothing but ApiVersions and SASL until it
//! has authenticated (anything else closes it), and its frames are
//! capped at 64 KiB meanwhile.

use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};

use super::codec::{self, s, Body, Req};
use super::connection::{Answer, Conn};
use crate::auth::Principal;
use crate::shard::Shard;

/// UNSUPPORTED_SASL_MECHANISM.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// ILLEGAL_SASL_STATE.
const ILLEGAL_SASL_STATE: i16 = 34;
/// SASL_AUTHENTICATION_FAILED.
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Where a connection is in SASL.
#[derive(Default)]
pub struct Sasl {
    handshaken: bool,
    authenticated: bool,
    /// After a v0 handshake: the next frame is a raw PLAIN token.
    pub raw_next: bool,
}

/// Whether the connection may run `req` now.
pub fn may_run(shard: &Shard, conn: &Conn, req: &Req) -> bool {
    req.key == ApiKey::ApiVersions || authenticated_or_open(shard, conn)
}

/// Whether the connection authenticated, or needs not.
pub fn authenticated_or_open(shard: &Shard, conn: &Conn) -> bool {
    !shard.state.keys.required() || conn.sasl.borrow().authenticated
}

/// Answers a SaslHandshake or SaslAuthenticate, changing the connection's
/// identity on success; a failure closes the connection after its answer.
pub fn handle(shard: &Shard, conn: &Conn, req: Req) -> Answer {
    let (version, cid) = (req.version, req.correlation_id);
    match req.body {
        Body::SaslHandshake(h) => {
            let plain = h.mechanism.as_str() == "PLAIN";
            let body = SaslHandshakeResponse::default()
                .with_error_code(if plain { 0 } else { UNSUPPORTED_SASL_MECHANISM })
                .with_mechanisms(vec![s("PLAIN")]);
            let mut sasl = conn.sasl.borrow_mut();
            sasl.handshaken = plain;
            sasl.raw_next = plain && version == 0;
            drop(sasl);
            frame_or_close(ApiKey::SaslHandshake, version, cid, &body, !plain)
        }
        Body::SaslAuthenticate(a) => {
            let (code, message) = if !conn.sasl.borrow().handshaken {
                (
                    ILLEGAL_SASL_STATE,
                    "SaslAuthenticate before a PLAIN SaslHandshake".to_string(),
                )
            } else {
                match authenticate(shard, &a.auth_bytes) {
                    Ok(p) => {
                        *conn.principal.borrow_mut() = p;
                        conn.sasl.borrow_mut().authenticated = true;
                        (0, String::new())
                    }
                    Err(why) => {
                        metrics::counter!("es_auth_unauthenticated_total", "listener" => "kafka")
                            .increment(1);
                        (SASL_AUTHENTICATION_FAILED, why)
                    }
                }
            };
            let body = SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message((code != 0).then(|| s(message)))
                .with_session_lifetime_ms(0);
            frame_or_close(ApiKey::SaslAuthenticate, version, cid, &body, code != 0)
        }
        _ => Answer::closing(None),
    }
}

/// The raw PLAIN token after a v0 handshake: an empty frame on success;
/// on failure the connection closes without an answer (SASL's v0 has no
/// error frame).
pub fn raw_token(shard: &Shard, conn: &Conn, token: &[u8]) -> Answer {
    conn.sasl.borrow_mut().raw_next = false;
    match authenticate(shard, token) {
        Ok(p) => {
            *conn.principal.borrow_mut() = p;
            conn.sasl.borrow_mut().authenticated = true;
            Answer::bytes(vec![0, 0, 0, 0])
        }
        Err(why) => {
            metrics::counter!("es_auth_unauthenticated_total", "listener" => "kafka").increment(1);
            tracing::info!(reason = %why, "closing a Kafka connection: SASL authentication failed");
            Answer::closing(None)
        }
    }
}

fn frame_or_close<R: kafka_protocol::protocol::Encodable>(
    key: ApiKey,
    version: i16,
    cid: i32,
    body: &R,
    close: bool,
) -> Answer {
    match codec::frame(key, version, cid, body) {
        Ok(bytes) if !close => Answer::bytes(bytes),
        Ok(bytes) => Answer::closing(Some(bytes)),
        Err(_) => Answer::closing(None),
    }
}

/// Checks a PLAIN token: `authzid \0 id \0 key`, the authzid empty or the
/// id. With auth disabled any token passes and nothing changes.
fn authenticate(shard: &Shard, token: &[u8]) -> Result<Principal, String> {
    if !shard.state.keys.required() {
        return Ok(Principal::Anonymous);
    }
    let bad = || {
        "a PLAIN token is authzid \\0 username \\0 password: username the key id, password the key"
            .to_string()
    };
    let text = std::str::from_utf8(token).map_err(|_| bad())?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(id), Some(key), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if !authzid.is_empty() && authzid != id {
        return Err("the authzid must be empty or the username".into());
    }
    let entry = shard
        .state
        .keys
        .authenticate(key)
        .map_err(|r| r.message().to_string())?;
    if entry.id != id {
        return Err("the username is not the id of the key given as password".into());
    }
    Ok(Principal::Key(entry))
}
