//! Reading from a connection's socket into memory that is not zeroed
//! first: a large produced batch (up to `--frame-bytes-max`) gets a buffer
//! of its own per request, and zero-filling it before the socket overwrites
//! every byte cost the shard as much as checking the batch's checksum.

use std::io;
use std::os::fd::RawFd;

/// Receives what the socket `fd` holds now, up to `upto` bytes in all in
/// `buf`, into `buf`'s spare capacity, and grows `buf` by what arrived.
/// Never waits: `WouldBlock` when nothing is there (wait through the
/// stream, then call again); `Ok(0)` when the peer closed its side (or
/// when `buf` already holds `upto` bytes).
pub fn recv_spare(fd: RawFd, buf: &mut Vec<u8>, upto: usize) -> io::Result<usize> {
    buf.reserve(upto.saturating_sub(buf.len()));
    let room = upto.saturating_sub(buf.len());
    if room == 0 {
        return Ok(0);
    }
    let spare = buf.spare_capacity_mut();
    loop {
        // SAFETY: `spare` is `room` or more writable bytes the Vec owns;
        // recv writes at most `room` of them and says how many. The
        // socket is non-blocking (MSG_DONTWAIT): this never waits.
        let n = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), room, libc::MSG_DONTWAIT) };
        if n >= 0 {
            let n = n as usize;
            // SAFETY: the kernel initialised the first `n` spare bytes.
            unsafe { buf.set_len(buf.len() + n) };
            return Ok(n);
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
    fn fills_spare_capacity_up_to_the_limit_without_waiting() {
        let (mut tx, rx) = UnixStream::pair().unwrap();
        let fd = rx.as_raw_fd();
        let mut buf = b"head".to_vec();
        // Nothing sent yet: would block, buf untouched.
        let e = recv_spare(fd, &mut buf, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(buf, b"head");
        tx.write_all(b"0123456789").unwrap();
        // Only up to `upto` bytes in all: 6 of the 10 sent.
        assert_eq!(recv_spare(fd, &mut buf, 10).unwrap(), 6);
        assert_eq!(buf, b"head012345");
        // Full: asks for nothing more.
        assert_eq!(recv_spare(fd, &mut buf, 10).unwrap(), 0);
        assert_eq!(recv_spare(fd, &mut buf, 100).unwrap(), 4);
        assert_eq!(buf, b"head0123456789");
        drop(tx);
        // Closed by the peer: 0 with room left.
        assert_eq!(recv_spare(fd, &mut buf, 100).unwrap(), 0);
        assert_eq!(buf.len(), 14);
    }

    #[test]
    fn a_socket_error_is_an_error() {
        let mut buf = Vec::new();
        let e = recv_spare(-1, &mut buf, 8).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert!(buf.is_empty());
    }
}
