//! The disk-full fault's filesystem: a small ext4 image, loop-mounted as a
//! node's data directory (needs root), filled by a ballast file during the
//! fault and freed after. Unmounted when dropped.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Ballast is written in pieces of this size, then of one block, so it
/// takes every block the filesystem has left.
const BALLAST_CHUNK_BYTES: usize = 1 << 20;
const BLOCK_BYTES: usize = 4096;

pub struct LoopFs {
    image: PathBuf,
    pub mount: PathBuf,
}

impl LoopFs {
    /// An ext4 filesystem of `bytes` in `dir/<name>.img`, mounted on
    /// `dir/<name>`. `Err(why)` where this machine cannot make one.
    pub fn make(dir: &Path, name: &str, bytes: u64) -> Result<LoopFs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root (a loop mount needs it)".into());
        }
        let image = dir.join(format!("{name}.img"));
        let file = File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        file.set_len(bytes)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        drop(file);
        // -m 0: no blocks kept for root, who runs the broker here.
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0", "-b", "4096", "-E", "nodiscard"])
            .arg(&image))?;
        let mount = dir.join(name);
        std::fs::create_dir_all(&mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        if let Err(e) = run(Command::new("mount").args(["-o", "loop"]).arg(&image).arg(&mount)) {
            let _ = std::fs::remove_file(&image);
            return Err(e);
        }
        Ok(LoopFs { image, mount })
    }

    fn ballast(&self) -> PathBuf {
        self.mount.join("ballast")
    }

    /// Fills the filesystem with the ballast file: bytes written.
    pub fn fill(&self) -> Result<u64, String> {
        let path = self.ballast();
        let mut file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut written = 0u64;
        for size in [BALLAST_CHUNK_BYTES, BLOCK_BYTES] {
            let chunk = vec![0xEEu8; size];
            while file.write_all(&chunk).is_ok() {
                written += size as u64;
            }
        }
        let _ = file.sync_all();
        self.settle();
        Ok(written)
    }

    /// Flushes the image file on the host disk. Without it the host's
    /// writeback of the ballast would be paid by the broker's next fsync
    /// through the loop device (its recovery after a crash, say).
    fn settle(&self) {
        if let Ok(image) = File::open(&self.image) {
            let _ = image.sync_all();
        }
    }

    /// Deletes the ballast: the space comes back.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.ballast());
        if let Ok(dir) = File::open(&self.mount) {
            let _ = dir.sync_all();
        }
        self.settle();
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.mount).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
        let _ = std::fs::remove_file(&self.image);
        let _ = std::fs::remove_dir(&self.mount);
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
