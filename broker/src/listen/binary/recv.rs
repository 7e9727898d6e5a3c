//! Reading from a connection's socket into memory that is not zeroed
//! first: a large produced batch (up to `--frame-bytes-max`) gets a buffer
//! of its own per request (es-storage's `ReceivingBatch`: page-aligned, so
//! that it can be written as it lies), and zero-filling it before the
//! socket overwrites every byte cost the shard as much as checking the
//! batch's checksum.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

use es_storage::ReceivingBatch;

/// Receives what the socket `fd` holds now into the bytes `batch` still
/// lacks. Never waits: `WouldBlock` when nothing is there (wait through
/// the stream, then call again); `Ok(0)` when the peer closed its side (or
/// when `batch` is whole).
pub fn recv_batch(fd: RawFd, batch: &mut ReceivingBatch) -> io::Result<usize> {
    let n = recv_into(fd, batch.spare_mut())?;
    // SAFETY: `recv_into` initialised the first `n` spare bytes.
    unsafe { batch.assume_received(n) };
    Ok(n)
}

/// Receives what the socket `fd` holds now into `into`: how many bytes.
/// Never waits (see [`recv_batch`]).
pub fn recv_now(fd: RawFd, into: &mut [u8]) -> io::Result<usize> {
    // SAFETY: initialised bytes are valid `MaybeUninit` bytes, and
    // `recv_into` only writes bytes into them.
    let into = unsafe { &mut *(into as *mut [u8] as *mut [MaybeUninit<u8>]) };
    recv_into(fd, into)
}

/// Receives what the socket `fd` holds now into `into`, at most all of it:
/// how many bytes, all initialised. Never waits (see [`recv_batch`]).
fn recv_into(fd: RawFd, into: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    if into.is_empty() {
        return Ok(0);
    }
    loop {
        // SAFETY: `into` is `into.len()` writable bytes; recv writes at
        // most that many and says how many. The socket is non-blocking
        // (MSG_DONTWAIT): this never waits.
        let n = unsafe { libc::recv(fd, into.as_mut_ptr().cast(), into.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn fills_the_batch_up_to_its_length_without_waiting() {
        let (mut tx, rx) = UnixStream::pair().unwrap();
        let fd = rx.as_raw_fd();
        let mut batch = ReceivingBatch::new(100, 10);
        batch.extend_from_slice(b"head");
        // Nothing sent yet: would block, the batch untouched.
        let e = recv_batch(fd, &mut batch).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(batch.filled(), b"head");
        tx.write_all(b"0123456789").unwrap();
        // Only up to the batch's length: 6 of the 10 sent.
        assert_eq!(recv_batch(fd, &mut batch).unwrap(), 6);
        assert_eq!(batch.filled(), b"head012345");
        // Whole: asks for nothing more, the rest stays in the socket.
        assert_eq!(recv_batch(fd, &mut batch).unwrap(), 0);
        let mut next = ReceivingBatch::new(0, 100);
        assert_eq!(recv_batch(fd, &mut next).unwrap(), 4);
        assert_eq!(next.filled(), b"6789");
        drop(tx);
        // Closed by the peer: 0 with room left.
        assert_eq!(recv_batch(fd, &mut next).unwrap(), 0);
        assert_eq!(next.filled_len(), 4);
    }

    #[test]
    fn a_socket_error_is_an_error() {
        let mut batch = ReceivingBatch::new(0, 8);
        let e = recv_batch(-1, &mut batch).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert_eq!(batch.filled_len(), 0);
    }
}
