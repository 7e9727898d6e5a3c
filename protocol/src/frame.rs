//! Frames: the unit on the wire. Every request and response is one frame.
//!
//! Layout (big-endian), `HEADER_BYTES` = 16:
//!
//! ```text
//! off size field
//!   0   4  frame_len   u32  bytes after this field (12 + payload length)
//!   4   1  kind        u8   what the payload is (see kind.rs)
//!   5   1  flags       u8   bit 0 (FLAG_GZIP): the payload is gzip-compressed;
//!                           other bits must be 0
//!   6   2  reserved    u16  must be 0
//!   8   8  request_id  u64  chosen by the client; the response carries it back
//!  16      payload     frame_len - 12 bytes
//! ```
//!
//! `check` a buffer for one whole frame before `parse`: partial input is
//! `Incomplete` (read more), a frame over the limit is `TooLarge`, anything
//! else wrong is `Malformed`.

use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;

use crate::{DecodeError, Kind};

pub const HEADER_BYTES: usize = 16;
/// Bytes of the header counted by `frame_len`.
const LEN_COVERED_HEADER_BYTES: usize = HEADER_BYTES - 4;
/// The payload is gzip-compressed.
pub const FLAG_GZIP: u8 = 0x01;

/// The fixed header of a frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub frame_len: u32,
    pub kind: u8,
    pub flags: u8,
    pub request_id: u64,
}

/// A decoded frame; `payload` is decompressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub request_id: u64,
    pub payload: Vec<u8>,
    /// The payload came gzip-compressed (a server answers in kind).
    pub gzip: bool,
}

/// Checks that `buf` starts with one whole frame of at most `max_bytes`
/// (header included) and returns its header and total length.
pub fn check(buf: &[u8], max_bytes: usize) -> Result<(FrameHeader, usize), DecodeError> {
    let Some(head) = buf.first_chunk::<HEADER_BYTES>() else {
        return Err(DecodeError::Incomplete {
            needed: HEADER_BYTES,
            have: buf.len(),
        });
    };
    let (h, total) = check_header(head, max_bytes)?;
    if buf.len() < total {
        return Err(DecodeError::Incomplete {
            needed: total,
            have: buf.len(),
        });
    }
    Ok((h, total))
}

/// Checks a frame header on its own; returns it and the frame's total length.
pub fn check_header(buf: &[u8; HEADER_BYTES], max_bytes: usize) -> Result<(FrameHeader, usize), DecodeError> {
    let h = FrameHeader {
        frame_len: u32::from_be_bytes(buf[0..4].try_into().expect("4")),
        kind: buf[4],
        flags: buf[5],
        request_id: u64::from_be_bytes(buf[8..16].try_into().expect("8")),
    };
    let total = 4 + h.frame_len as usize;
    if (h.frame_len as usize) < LEN_COVERED_HEADER_BYTES {
        return Err(DecodeError::malformed(format!(
            "frame_len {} is below the header size",
            h.frame_len
        )));
    }
    if total > max_bytes {
        return Err(DecodeError::TooLarge {
            len: total,
            max: max_bytes,
        });
    }
    if h.flags & !FLAG_GZIP != 0 {
        return Err(DecodeError::malformed(format!("unknown flags {:#04x}", h.flags)));
    }
    if buf[6] != 0 || buf[7] != 0 {
        return Err(DecodeError::malformed("reserved header bytes must be 0"));
    }
    Ok((h, total))
}

/// Parses the frame at the start of `buf` (after `check` said it is whole),
/// decompressing a gzip payload up to `max_bytes`.
pub fn parse(buf: &[u8], max_bytes: usize) -> Result<(Frame, usize), DecodeError> {
    let (h, total) = check(buf, max_bytes)?;
    // `check`: the whole frame is in `buf`, and it is at least a header.
    let payload = buf.get(HEADER_BYTES..total).ok_or(DecodeError::Incomplete {
        needed: total,
        have: buf.len(),
    })?;
    let frame = from_parts(h, payload.to_vec(), max_bytes)?;
    Ok((frame, total))
}

/// The payload of a checked frame, borrowed where it lies unless it is
/// compressed (then decompressed, up to `max_bytes`).
pub fn payload<'a>(
    h: &FrameHeader,
    raw: &'a [u8],
    max_bytes: usize,
) -> Result<std::borrow::Cow<'a, [u8]>, DecodeError> {
    if h.flags & FLAG_GZIP != 0 {
        Ok(std::borrow::Cow::Owned(gunzip(raw, max_bytes)?))
    } else {
        Ok(std::borrow::Cow::Borrowed(raw))
    }
}

/// A frame from a checked header and its payload as received (read
/// straight into its own buffer: not copied again unless compressed).
pub fn from_parts(h: FrameHeader, raw: Vec<u8>, max_bytes: usize) -> Result<Frame, DecodeError> {
    let kind = Kind::from_u8(h.kind)
        .ok_or_else(|| DecodeError::malformed(format!("unknown kind {:#04x}", h.kind)))?;
    let gzip = h.flags & FLAG_GZIP != 0;
    let payload = if gzip { gunzip(&raw, max_bytes)? } else { raw };
    Ok(Frame {
        kind,
        request_id: h.request_id,
        payload,
        gzip,
    })
}

/// Encodes a frame, gzip-compressing the payload when `gzip` is set.
pub fn encode(kind: Kind, request_id: u64, payload: &[u8], gzip: bool) -> Vec<u8> {
    let body: std::borrow::Cow<[u8]> = if gzip {
        let mut enc = GzEncoder::new(Vec::with_capacity(payload.len() / 2 + 64), Compression::fast());
        enc.write_all(payload).expect("writing to a Vec cannot fail");
        enc.finish().expect("writing to a Vec cannot fail").into()
    } else {
        payload.into()
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(&header(kind, request_id, body.len(), gzip));
    out.extend_from_slice(&body);
    out
}

/// The 16 header bytes of a frame whose (possibly compressed) payload is
/// `payload_len` bytes.
pub fn header(kind: Kind, request_id: u64, payload_len: usize, gzip: bool) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[0..4].copy_from_slice(&((LEN_COVERED_HEADER_BYTES + payload_len) as u32).to_be_bytes());
    h[4] = kind as u8;
    h[5] = if gzip { FLAG_GZIP } else { 0 };
    h[8..16].copy_from_slice(&request_id.to_be_bytes());
    h
}

/// Decompresses at most `max_bytes`: a small frame cannot expand into an
/// unbounded payload (zip bomb).
fn gunzip(raw: &[u8], max_bytes: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    let mut dec = GzDecoder::new(raw).take(max_bytes as u64 + 1);
    dec.read_to_end(&mut out)
        .map_err(|e| DecodeError::malformed(format!("gzip payload: {e}")))?;
    if out.len() > max_bytes {
        return Err(DecodeError::TooLarge {
            len: out.len(),
            max: max_bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_plain_and_gzip() {
        for gzip in [false, true] {
            let payload = b"hello hello hello hello".repeat(20);
            let bytes = encode(Kind::Produce, 42, &payload, gzip);
            let (f, used) = parse(&bytes, 1 << 20).unwrap();
            assert_eq!(used, bytes.len());
            assert_eq!(f.kind, Kind::Produce);
            assert_eq!(f.request_id, 42);
            assert_eq!(f.payload, payload);
            if gzip {
                assert!(bytes.len() < payload.len());
            }
        }
    }

    #[test]
    fn partial_frames_are_incomplete() {
        let bytes = encode(Kind::Fetch, 7, b"abc", false);
        for cut in 0..bytes.len() {
            assert!(
                matches!(check(&bytes[..cut], 1 << 20), Err(DecodeError::Incomplete { .. })),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn limits_and_bad_headers() {
        let bytes = encode(Kind::Produce, 1, &[0u8; 100], false);
        assert!(matches!(check(&bytes, 50), Err(DecodeError::TooLarge { .. })));
        let mut bad = bytes.clone();
        bad[5] = 0x80;
        assert!(matches!(check(&bad, 1 << 20), Err(DecodeError::Malformed(_))));
        let mut bad = bytes.clone();
        bad[6] = 1;
        assert!(matches!(check(&bad, 1 << 20), Err(DecodeError::Malformed(_))));
        let mut bad = bytes.clone();
        bad[4] = 0x7e;
        assert!(matches!(parse(&bad, 1 << 20), Err(DecodeError::Malformed(_))));
        let mut short = bytes;
        short[0..4].copy_from_slice(&3u32.to_be_bytes());
        assert!(matches!(check(&short, 1 << 20), Err(DecodeError::Malformed(_))));
    }

    #[test]
    fn zip_bomb_is_refused() {
        let bytes = encode(Kind::Produce, 1, &vec![0u8; 1 << 20], true);
        assert!(bytes.len() < 10_000);
        assert!(matches!(
            parse(&bytes, 64 << 10),
            Err(DecodeError::TooLarge { .. })
        ));
        let mut corrupt = encode(Kind::Produce, 1, b"payload", true);
        let n = corrupt.len();
        corrupt[n - 3] ^= 0xff;
        assert!(parse(&corrupt, 1 << 20).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse(&bytes, 1 << 16);
        }

        #[test]
        fn arbitrary_gzip_flagged_payloads_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut bytes = encode(Kind::Produce, 1, &body, false);
            bytes[5] = FLAG_GZIP;
            let _ = parse(&bytes, 1 << 16);
        }
    }
}
