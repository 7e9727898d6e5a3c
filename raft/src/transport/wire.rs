//! The primitives the raft frames' payloads are written with and read
//! with (big-endian, like the frame header): integers, votes, optional log
//! ids and nodes, bounded texts, and `Cur`, a cursor whose every read is
//! bounded by the bytes that remain.
//!
//! ```text
//! vote         u64 term, u8 flags (bit 0 committed, bit 1 voted_for present),
//!              u64 voted_for (0 when absent)
//! opt logid    u8 0 | u8 1, u64 term, u64 index
//! opt node     u8 0 | u8 1, u64 node
//! text         u16 len, UTF-8 (at most ERROR_TEXT_BYTES_MAX)
//! ```

use bytes::Bytes;
use openraft::LeaderId;

use crate::limits::ERROR_TEXT_BYTES_MAX;
use crate::transport::error::TransportError;
use crate::types::{log_id, GroupId, LogId, NodeId, Vote};

// --- Writing ------------------------------------------------------------------

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_vote(out: &mut Vec<u8>, v: &Vote) {
    put_u64(out, v.leader_id.term);
    let flags = v.committed as u8 | (v.leader_id.voted_for.is_some() as u8) << 1;
    put_u8(out, flags);
    put_u64(out, v.leader_id.voted_for.unwrap_or(0));
}

pub(crate) fn put_log_id(out: &mut Vec<u8>, id: &Option<LogId>) {
    match id {
        None => put_u8(out, 0),
        Some(id) => {
            put_u8(out, 1);
            put_u64(out, id.leader_id.term);
            put_u64(out, id.index);
        }
    }
}

pub(crate) fn put_opt_node(out: &mut Vec<u8>, n: Option<NodeId>) {
    match n {
        None => put_u8(out, 0),
        Some(n) => {
            put_u8(out, 1);
            put_u64(out, n);
        }
    }
}

/// A length as a u32, or `TooLarge` (nothing this node sends is 4 GiB).
pub(crate) fn len32(n: usize, group: GroupId) -> Result<u32, TransportError> {
    u32::try_from(n).map_err(|_| TransportError::TooLarge { group, bytes: n })
}

pub(crate) fn put_text(out: &mut Vec<u8>, s: &str) {
    // Cut to the bound at a character boundary: the text stays UTF-8.
    let mut n = s.len().min(ERROR_TEXT_BYTES_MAX);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    put_u16(out, n as u16);
    out.extend_from_slice(&s.as_bytes()[..n]);
}

// --- Reading ------------------------------------------------------------------

pub(crate) fn malformed(what: impl Into<String>) -> TransportError {
    TransportError::Malformed(what.into())
}

/// A cursor over a received payload; every read is bounded by what remains.
pub(crate) struct Cur {
    buf: Bytes,
    at: usize,
}

impl Cur {
    pub(crate) fn new(buf: Bytes) -> Cur {
        Cur { buf, at: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&[u8], TransportError> {
        if n > self.remaining() {
            return Err(malformed(format!(
                "{what}: {n} bytes needed, {} left",
                self.remaining()
            )));
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    /// The next `n` bytes, not consumed.
    pub(crate) fn peek(&self, n: usize, what: &str) -> Result<&[u8], TransportError> {
        if n > self.remaining() {
            return Err(malformed(format!(
                "{what}: {n} bytes needed, {} left",
                self.remaining()
            )));
        }
        Ok(&self.buf[self.at..self.at + n])
    }

    pub(crate) fn take_bytes(&mut self, n: usize, what: &str) -> Result<Bytes, TransportError> {
        self.take(n, what)?;
        Ok(self.buf.slice(self.at - n..self.at))
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, TransportError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, TransportError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, TransportError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, TransportError> {
        let b = self.take(8, what)?;
        let mut x = [0u8; 8];
        x.copy_from_slice(b);
        Ok(u64::from_be_bytes(x))
    }

    pub(crate) fn vote(&mut self) -> Result<Vote, TransportError> {
        let term = self.u64("vote term")?;
        let flags = self.u8("vote flags")?;
        let node = self.u64("vote node")?;
        if flags & !3 != 0 {
            return Err(malformed(format!("unknown vote flags {flags:#04x}")));
        }
        let voted_for = if flags & 2 != 0 {
            Some(node)
        } else if node == 0 {
            None
        } else {
            return Err(malformed("a vote for nobody names a node"));
        };
        Ok(Vote {
            leader_id: LeaderId { term, voted_for },
            committed: flags & 1 != 0,
        })
    }

    pub(crate) fn log_id(&mut self, what: &str) -> Result<Option<LogId>, TransportError> {
        match self.u8(what)? {
            0 => Ok(None),
            1 => {
                let term = self.u64(what)?;
                let index = self.u64(what)?;
                Ok(Some(log_id(term, index)))
            }
            t => Err(malformed(format!("{what}: presence byte {t}"))),
        }
    }

    /// A count of items of at least `min_bytes` each, checked against what
    /// remains (so nothing is allocated for items that cannot be there).
    pub(crate) fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize, TransportError> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_bytes) > self.remaining() {
            return Err(malformed(format!(
                "{what}: {n} items cannot fit in {} bytes",
                self.remaining()
            )));
        }
        Ok(n)
    }

    pub(crate) fn text(&mut self, what: &str) -> Result<String, TransportError> {
        let n = self.u16(what)? as usize;
        if n > ERROR_TEXT_BYTES_MAX {
            return Err(malformed(format!("{what}: {n} bytes")));
        }
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| malformed(format!("{what}: not UTF-8")))
    }

    pub(crate) fn opt_node(&mut self) -> Result<Option<NodeId>, TransportError> {
        match self.u8("node presence")? {
            0 => Ok(None),
            1 => Ok(Some(self.u64("node")?)),
            t => Err(malformed(format!("node presence byte {t}"))),
        }
    }

    pub(crate) fn end(&self, what: &str) -> Result<(), TransportError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(malformed(format!("{what}: {n} bytes after the payload"))),
        }
    }
}
