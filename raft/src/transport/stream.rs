//! `PeerStream`: a connection to or from a peer after its preamble,
//! plaintext or TLS, and the reading of one frame from it.

use bytes::Bytes;
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use glommio::sync::StaticPermit;

use crate::transport::budget::InflightBudget;
use crate::transport::error::TransportError;
use crate::transport::frame::{self, RaftHeader};

/// A byte stream both ways.
pub trait Duplex: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> Duplex for T {}

/// A peer connection: a glommio `TcpStream`, or a TLS stream over one.
pub type PeerStream = Box<dyn Duplex>;

/// Why reading a frame stopped.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The connection ended or failed.
    Io(std::io::Error),
    /// The peer sent what no frame is: the connection cannot be trusted
    /// to be at a frame boundary any more.
    Frame(TransportError),
}

/// One frame: its header, its payload, and (for a request, when a budget
/// is given) the budget's bytes it holds until dropped. The header is
/// checked before anything is allocated for the payload, and the budget
/// is taken before the payload is read.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    budget: Option<&InflightBudget>,
) -> Result<(RaftHeader, Bytes, Option<StaticPermit>), ReadError> {
    let mut head = [0u8; es_protocol::frame::HEADER_BYTES];
    r.read_exact(&mut head).await.map_err(ReadError::Io)?;
    let h = frame::check(&head).map_err(ReadError::Frame)?;
    let permit = match budget {
        Some(b) => Some(
            b.acquire(head.len() + h.payload_len)
                .await
                .map_err(ReadError::Frame)?,
        ),
        None => None,
    };
    let mut payload = vec![0u8; h.payload_len];
    r.read_exact(&mut payload).await.map_err(ReadError::Io)?;
    Ok((h, Bytes::from(payload), permit))
}
