//! Bytes shown to people and in JSON: UTF-8 when they are, hex otherwise.

use serde_json::{json, Value};

/// `"text"` (escaped) for UTF-8 without control characters, else `hex:…`.
pub fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.chars().any(char::is_control) => format!("{s:?}"),
        _ => format!("hex:{}", hex(bytes)),
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `{"utf8": "..."}` or `{"hex": "..."}`; `null` for no bytes (`None`).
pub fn json_bytes(bytes: Option<&[u8]>) -> Value {
    match bytes.map(std::str::from_utf8) {
        None => Value::Null,
        Some(Ok(s)) => json!({ "utf8": s }),
        Some(Err(_)) => json!({ "hex": hex(bytes.unwrap_or_default()) }),
    }
}
