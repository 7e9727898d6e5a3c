//! Hello: the handshake. The first frame on a connection must be a Hello;
//! the broker answers with the version both speak and its limits.
//!
//! ```text
//! Hello    (kind 0x01): u16 min_version, u16 max_version,
//!                       str16 client_id, str16 api_key ("" = none)
//! HelloOk  (kind 0x81): u16 version, u32 frame_bytes_max,
//!                       u32 inflight_requests_max, str16 broker_version
//! ```

use crate::codec::{Reader, Writer};
use crate::DecodeError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub min_version: u16,
    pub max_version: u16,
    pub client_id: String,
    pub api_key: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloOk {
    pub version: u16,
    pub frame_bytes_max: u32,
    pub inflight_requests_max: u32,
    pub broker_version: String,
}

impl Hello {
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.min_version)
            .u16(self.max_version)
            .str16(&self.client_id)
            .str16(&self.api_key);
    }
    pub fn decode(r: &mut Reader) -> Result<Hello, DecodeError> {
        let h = Hello {
            min_version: r.u16("min_version")?,
            max_version: r.u16("max_version")?,
            client_id: r.str16("client_id")?,
            api_key: r.str16("api_key")?,
        };
        if h.min_version > h.max_version {
            return Err(DecodeError::malformed("min_version is above max_version"));
        }
        Ok(h)
    }
}

impl HelloOk {
    pub fn encode(&self, w: &mut Writer) {
        w.u16(self.version)
            .u32(self.frame_bytes_max)
            .u32(self.inflight_requests_max)
            .str16(&self.broker_version);
    }
    pub fn decode(r: &mut Reader) -> Result<HelloOk, DecodeError> {
        Ok(HelloOk {
            version: r.u16("version")?,
            frame_bytes_max: r.u32("frame_bytes_max")?,
            inflight_requests_max: r.u32("inflight_requests_max")?,
            broker_version: r.str16("broker_version")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let h = Hello {
            min_version: 1,
            max_version: 1,
            client_id: "es-cli".into(),
            api_key: String::new(),
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        assert_eq!(Hello::decode(&mut Reader::new(&w.buf)).unwrap(), h);
        for cut in 0..w.buf.len() {
            assert!(Hello::decode(&mut Reader::new(&w.buf[..cut])).is_err());
        }
        let mut bad = Writer::new();
        bad.u16(2).u16(1).str16("").str16("");
        assert!(Hello::decode(&mut Reader::new(&bad.buf)).is_err());
    }
}
