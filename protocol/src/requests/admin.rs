//! Topic requests: create, list, describe, delete, patch config. Rare and
//! small, so their payloads are the same JSON documents as the HTTP API
//! (docs/api.md), UTF-8, with no length prefix (the frame bounds them).
//!
//! ```text
//! CreateTopic      (0x10): {"name","partitions","replication_factor"?,"config"?}
//! ListTopics       (0x11): empty payload
//! DescribeTopic    (0x12): {"name"}
//! DeleteTopic      (0x13): {"name"}
//! PatchTopicConfig (0x14): {"name","config":{...}}
//! AdminOk          (0x90): the JSON body HTTP would return
//! ```

use crate::DecodeError;

/// Parses a JSON object payload.
pub fn decode_json(payload: &[u8]) -> Result<serde_json::Value, DecodeError> {
    if payload.is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    let v: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| DecodeError::malformed(format!("JSON payload: {e}")))?;
    if !v.is_object() {
        return Err(DecodeError::malformed("JSON payload must be an object"));
    }
    Ok(v)
}

pub fn encode_json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON values serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_only() {
        assert!(decode_json(b"{\"name\":\"t\"}").is_ok());
        assert!(decode_json(b"").unwrap().is_object());
        assert!(decode_json(b"[1]").is_err());
        assert!(decode_json(b"{").is_err());
    }
}
