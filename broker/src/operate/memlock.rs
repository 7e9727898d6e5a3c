//! The locked-memory limit (`ulimit -l`) checked before the shards start:
//! glommio refuses to start an executor under 512 KiB (whatever the shard
//! count), and a shard that cannot start would otherwise surface as an
//! opaque `MemLockLimit(a/b)`.

use crate::limits::MEMLOCK_BYTES_MIN;

/// Raises the soft locked-memory limit to `MEMLOCK_BYTES_MIN` when the hard
/// limit allows, else returns an error saying what to change.
pub fn ensure() -> Result<(), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return Err(format!(
            "reading the locked-memory limit: {}",
            std::io::Error::last_os_error()
        ));
    }
    if limit.rlim_cur == libc::RLIM_INFINITY || limit.rlim_cur >= MEMLOCK_BYTES_MIN {
        return Ok(());
    }
    if limit.rlim_max == libc::RLIM_INFINITY || limit.rlim_max >= MEMLOCK_BYTES_MIN {
        let raised = libc::rlimit {
            rlim_cur: MEMLOCK_BYTES_MIN,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raised) } == 0 {
            tracing::info!(
                from_kib = limit.rlim_cur >> 10,
                to_kib = MEMLOCK_BYTES_MIN >> 10,
                "raised the soft locked-memory limit (ulimit -l) for io_uring"
            );
            return Ok(());
        }
    }
    Err(message(limit.rlim_cur))
}

/// What to do about a locked-memory limit of `current` bytes.
pub fn message(current: u64) -> String {
    format!(
        "the locked-memory limit (ulimit -l) is {} KiB; es-broker's io_uring shards need at least {} KiB. \
         Raise it: `ulimit -l 65536` in the shell that starts the broker, \
         `LimitMEMLOCK=64M` in a systemd unit, `--ulimit memlock=67108864` for docker, or \
         `* - memlock 65536` in /etc/security/limits.conf (docs/operations.md)",
        current >> 10,
        MEMLOCK_BYTES_MIN >> 10,
    )
}
