//! The sizes of a binary connection's read buffer: small while it waits
//! for a request, grown with the bytes that arrive (never with what a
//! frame header announces), shrunk back once a large frame is handled.

use crate::limits::{READ_CHUNK_BYTES, READ_IDLE_BYTES, READ_ROOM_MIN_BYTES};

/// The read buffer's length for the next read, given `len` now, the
/// unhandled bytes at `start..filled` and `wanted` bytes from `start` for
/// the next frame: room for that frame, but grown with what has arrived
/// (at most twice the bytes held, or `READ_IDLE_BYTES`), never with
/// what a frame header announces: memory follows the bytes a client
/// actually sent, and a header alone announcing `--frame-bytes-max` costs
/// nothing. A `charged` frame (of 64 KiB or more, its bytes held in the
/// shard's request budget, connection.rs) grows to `READ_CHUNK_BYTES` at
/// once: a connection that sends such frames one at a time, waiting in
/// between, does not regrow its buffer from `READ_IDLE_BYTES` by doubling
/// (and copying) for each. Every read gets `READ_ROOM_MIN_BYTES` of room
/// at least.
pub fn grown_len(len: usize, start: usize, filled: usize, wanted: usize, charged: bool) -> usize {
    let need = (start + wanted).max(filled + READ_ROOM_MIN_BYTES);
    if need <= len {
        return len;
    }
    let floor = if charged {
        READ_CHUNK_BYTES
    } else {
        READ_IDLE_BYTES
    };
    let arrived = (2 * filled).max(floor).max(filled + READ_ROOM_MIN_BYTES);
    need.min(arrived).max(len)
}

/// Makes room for the next read into `buf`, whose unhandled bytes are
/// `buf[start..filled]` and whose next frame needs `wanted` bytes from
/// `start`: keeps the unhandled tail at the front, grows for a frame larger
/// than the buffer (up to --frame-bytes-max, checked before), shrinks back
/// once a large frame is done.
pub fn make_room(buf: &mut Vec<u8>, start: &mut usize, filled: &mut usize, wanted: usize, charged: bool) {
    if *start == *filled {
        (*start, *filled) = (0, 0);
        if buf.len() > READ_CHUNK_BYTES {
            *buf = vec![0u8; READ_CHUNK_BYTES];
        }
    } else if *start > 0 && (buf.len() - *filled < READ_ROOM_MIN_BYTES || *start + wanted > buf.len()) {
        buf.copy_within(*start..*filled, 0);
        (*start, *filled) = (0, *filled - *start);
    }
    let len = grown_len(buf.len(), *start, *filled, wanted, charged);
    if len > buf.len() {
        buf.resize(len, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_header_alone_does_not_grow_the_buffer() {
        // 116 bytes of a 16 MiB frame in the first read buffer.
        assert_eq!(
            grown_len(READ_IDLE_BYTES, 0, 116, 16 * MIB, false),
            READ_IDLE_BYTES
        );
    }

    #[test]
    fn the_buffer_grows_with_what_arrives_until_the_frame_fits() {
        let (frame, mut len) = (16 * MIB, READ_IDLE_BYTES);
        let mut grows = 0;
        while len < frame {
            // The client sends everything it may: the buffer fills up.
            let filled = len;
            let next = grown_len(len, 0, filled, frame, false);
            assert!(next > len, "grows once full");
            assert!(next <= 2 * filled.max(READ_IDLE_BYTES), "at most doubles");
            assert!(next - filled >= READ_ROOM_MIN_BYTES, "room to read");
            len = next;
            grows += 1;
        }
        assert_eq!(len, frame, "never past the frame");
        assert_eq!(grows, 10, "16 KiB doubled ten times is 16 MiB");
    }

    #[test]
    fn a_charged_frame_grows_the_buffer_to_a_chunk_at_once() {
        // 200 KiB: all of it at once; 16 MiB: a chunk, then with arrivals.
        assert_eq!(grown_len(READ_IDLE_BYTES, 0, 116, 200 << 10, true), 200 << 10);
        assert_eq!(
            grown_len(READ_IDLE_BYTES, 0, 116, 16 * MIB, true),
            READ_CHUNK_BYTES
        );
        assert_eq!(
            grown_len(READ_IDLE_BYTES, 0, 116, 200 << 10, false),
            READ_IDLE_BYTES
        );
    }

    #[test]
    fn reads_always_get_room() {
        for (len, start, filled, wanted) in [
            (READ_CHUNK_BYTES, 0, READ_CHUNK_BYTES, 20),
            (READ_CHUNK_BYTES, 100, READ_CHUNK_BYTES - 10, 16),
            (4 * MIB, 0, 4 * MIB - 1, 4 * MIB),
        ] {
            let next = grown_len(len, start, filled, wanted, false);
            assert!(next >= len);
            assert!(
                next - filled >= READ_ROOM_MIN_BYTES,
                "{len} {start} {filled} {wanted}: {next}"
            );
        }
    }
}
