//! The compaction swap: replacing a run of segments with the one segment
//! compaction wrote for them, atomically across a crash, and the cleanup of
//! leftovers at open.
//!
//! Protocol, in a partition directory:
//!
//! 1. Compaction writes `<out>.log.cleaned` and `<out>.index.cleaned`,
//!    fdatasyncs both and fsyncs the directory. A crash here leaves the old
//!    segments intact; open deletes the `.cleaned` files.
//! 2. **Commit**: `compaction.swap` (the inputs' bases and the output base,
//!    with a CRC) is written to `compaction.swap.tmp`, fdatasynced, renamed
//!    into place and the directory fsynced. From here on the new set wins.
//! 3. The first input's log is renamed to `<out>.log.deleting` (only while
//!    `<out>.log.cleaned` exists, so a rerun never moves the output), the
//!    output's index, then its log, are renamed to `<out>.index` and
//!    `<out>.log` (the output takes the first input's base, so this
//!    replaces that input); the other inputs' logs are renamed to
//!    `.deleting` names and their indexes removed; the directory is fsynced.
//! 4. `compaction.swap` is removed and the directory fsynced.
//! 5. (compaction, not recovery) The `.deleting` logs are freed a step at a
//!    time and unlinked (reclaim.rs); open removes any a crash left.
//!
//! At open, [`recover`] runs before segments are listed: with a manifest it
//! redoes steps 3 and 4 (every step is idempotent: a `.cleaned` file that is
//! gone was already renamed, since its creation was durable before the
//! commit); without one it deletes `.cleaned` files. Either way it then
//! removes `.index` files whose `.log` is gone (left by a crash in the middle
//! of a retention delete). So a crash at any point leaves the old set or the
//! new set, never a mix.

use std::path::{Path, PathBuf};

use glommio::io::Directory;

use crate::io::dirs;
use crate::io::files;
use crate::log::faults::{FaultPoint, Faults};
use crate::{Offset, Result, StorageError};

/// Name of the swap manifest in a partition directory.
pub const MANIFEST_NAME: &str = "compaction.swap";
const MANIFEST_TMP_NAME: &str = "compaction.swap.tmp";
const MANIFEST_HEADER: &str = "es-compaction-swap 1";

/// One committed swap: `inputs` (ascending, the first equal to `output`)
/// are replaced by the segment `output`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub output: Offset,
    pub inputs: Vec<Offset>,
}

/// What recovery at open did about earlier cleanups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// A committed compaction swap was completed; the output's base.
    pub swap_completed: Option<Offset>,
    /// Files removed: uncommitted compaction outputs, orphan indexes, logs
    /// of deleted segments not yet freed.
    pub removed: Vec<PathBuf>,
}

impl Manifest {
    fn encode(&self) -> Vec<u8> {
        let mut s = format!("{MANIFEST_HEADER}\noutput {}\n", self.output.0);
        for i in &self.inputs {
            s.push_str(&format!("input {}\n", i.0));
        }
        let crc = crc32fast::hash(s.as_bytes());
        s.push_str(&format!("crc {crc:08x}\n"));
        s.into_bytes()
    }

    fn decode(bytes: &[u8]) -> Option<Manifest> {
        let text = std::str::from_utf8(bytes).ok()?;
        let body_end = text.rfind("crc ")?;
        let (body, crc_line) = text.split_at(body_end);
        let crc = u32::from_str_radix(crc_line.strip_prefix("crc ")?.strip_suffix('\n')?, 16).ok()?;
        if crc32fast::hash(body.as_bytes()) != crc {
            return None;
        }
        let mut lines = body.lines();
        if lines.next()? != MANIFEST_HEADER {
            return None;
        }
        let output = Offset(lines.next()?.strip_prefix("output ")?.parse().ok()?);
        let mut inputs = Vec::new();
        for line in lines {
            inputs.push(Offset(line.strip_prefix("input ")?.parse().ok()?));
        }
        let ordered = inputs.windows(2).all(|w| w[0] < w[1]);
        (inputs.first() == Some(&output) && ordered).then_some(Manifest { output, inputs })
    }
}

/// Step 2, first half: the manifest under its temporary name, synced. A
/// failure here (no room for it, say) commits nothing: the old segments
/// stand, the temporary file is gone (`write_file_synced`), and a later
/// pass tries again.
pub(crate) async fn prepare(dir: &Path, manifest: &Manifest) -> Result<()> {
    files::write_file_synced(&dir.join(MANIFEST_TMP_NAME), manifest.encode()).await
}

/// Step 2, second half: makes the swap durable. After this returns,
/// recovery completes it; after it fails, only a restart knows which set
/// won. `held` is the partition directory, opened before [`prepare`]: from
/// the rename to the end of the swap no step needs a new descriptor, so a
/// shard out of them cannot be stopped half way.
pub(crate) async fn commit(dir: &Path, held: &Directory) -> Result<()> {
    let tmp = dir.join(MANIFEST_TMP_NAME);
    glommio::io::rename(&tmp, dir.join(MANIFEST_NAME))
        .await
        .map_err(|e| StorageError::io(&tmp, e))?;
    sync(dir, Some(held)).await
}

/// fsyncs `dir` through `held` when given, else by opening it.
async fn sync(dir: &Path, held: Option<&Directory>) -> Result<()> {
    match held {
        Some(d) => d.sync().await.map_err(|e| StorageError::io(dir, e)),
        None => dirs::sync_dir(dir).await,
    }
}

/// Steps 3 and 4. Idempotent, so recovery reruns it from the top. `held`:
/// the directory, open already (compaction); `None` opens it (recovery).
pub(crate) async fn finish(
    dir: &Path,
    manifest: &Manifest,
    faults: Option<&Faults>,
    held: Option<&Directory>,
) -> Result<()> {
    let fault = |p| faults.map_or(Ok(()), |f| f.check(p));
    let out = manifest.output;
    // Input logs leave under `.deleting` names, freed a step at a time
    // afterwards (reclaim.rs). The first input's log has the output's name:
    // it is the input only while the output's log is not in place yet.
    if dirs::exists(&dirs::cleaned_log_path(dir, out)).await? {
        dirs::rename_if_exists(&dirs::log_path(dir, out), &dirs::deleting_log_path(dir, out)).await?;
    }
    dirs::rename_if_exists(&dirs::cleaned_index_path(dir, out), &dirs::index_path(dir, out)).await?;
    fault(FaultPoint::CompactionIndexRenamed)?;
    dirs::rename_if_exists(&dirs::cleaned_log_path(dir, out), &dirs::log_path(dir, out)).await?;
    fault(FaultPoint::CompactionOutputRenamed)?;
    for &input in manifest.inputs.iter().filter(|&&b| b != out) {
        dirs::rename_if_exists(&dirs::log_path(dir, input), &dirs::deleting_log_path(dir, input)).await?;
        dirs::remove_if_exists(&dirs::index_path(dir, input)).await?;
    }
    sync(dir, held).await?;
    fault(FaultPoint::CompactionInputsRemoved)?;
    dirs::remove_if_exists(&dir.join(MANIFEST_NAME)).await?;
    sync(dir, held).await
}

/// Removes an uncommitted compaction's outputs (after an abort).
pub(crate) async fn discard_outputs(dir: &Path, output: Offset) -> Result<()> {
    dirs::remove_if_exists(&dirs::cleaned_log_path(dir, output)).await?;
    dirs::remove_if_exists(&dirs::cleaned_index_path(dir, output)).await?;
    dirs::sync_dir(dir).await
}

/// Run at open, before segments are listed: completes a committed swap,
/// deletes uncommitted outputs, orphan indexes and the logs of deleted
/// segments a crash left half freed (`.deleting`).
pub(crate) async fn recover(dir: &Path) -> Result<Leftovers> {
    let mut done = Leftovers::default();
    let names = dirs::list_names(dir).await?;
    if names.iter().any(|n| n == MANIFEST_NAME) {
        let path = dir.join(MANIFEST_NAME);
        let file = glommio::io::BufferedFile::open(&path)
            .await
            .map_err(|e| StorageError::io(&path, e))?;
        let len = file.file_size().await.map_err(|e| StorageError::io(&path, e))?;
        let bytes = files::read_exact(&file, &path, 0, len as usize).await;
        let _ = file.close().await;
        let manifest = Manifest::decode(&bytes?).ok_or_else(|| StorageError::Corrupt {
            path: path.clone(),
            position: 0,
            reason: "compaction swap manifest does not parse or fails its checksum".into(),
        })?;
        finish(dir, &manifest, None, None).await?;
        tracing::info!(
            partition = %dir.display(),
            output = manifest.output.0,
            inputs = manifest.inputs.len(),
            "completed a compaction swap interrupted by a crash"
        );
        done.swap_completed = Some(manifest.output);
    }
    let names = dirs::list_names(dir).await?;
    for name in &names {
        let orphan_index = dirs::parse_index_name(name)
            .is_some_and(|base| !names.iter().any(|n| dirs::parse_log_name(n) == Some(base)));
        if name.ends_with(dirs::CLEANED_SUFFIX)
            || name.ends_with(dirs::DELETING_SUFFIX)
            || name == MANIFEST_TMP_NAME
            || orphan_index
        {
            let path = dir.join(name);
            dirs::remove_if_exists(&path).await?;
            done.removed.push(path);
        }
    }
    if !done.removed.is_empty() {
        dirs::sync_dir(dir).await?;
        tracing::info!(
            partition = %dir.display(),
            files = ?done.removed,
            "removed leftovers of an interrupted cleanup"
        );
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip_and_damage() {
        let m = Manifest {
            output: Offset(100),
            inputs: vec![Offset(100), Offset(150), Offset(300)],
        };
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes), Some(m.clone()));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert_ne!(Manifest::decode(&bad), Some(m.clone()), "flip at {i}");
        }
        for cut in 0..bytes.len() {
            assert_eq!(Manifest::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let wrong_first = Manifest {
            output: Offset(5),
            inputs: vec![Offset(6)],
        };
        assert_eq!(Manifest::decode(&wrong_first.encode()), None);
    }
}
