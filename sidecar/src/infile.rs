//! LOAD DATA LOCAL INFILE: when the upstream asks for a file, the sidecar asks its client
//! (0xFB + file name), reads the file's packets up to the empty one and uploads them to the
//! transport in pieces, each on the session's affinity key — never holding the file whole.

use bytes::BytesMut;

use crate::Error;
use crate::protocol::PacketIo;
use crate::tunnel::TunnelClient;

/// Bytes per upload request (under nginx's default `client_max_body_size` of 1 MiB).
pub const PIECE: usize = 512 * 1024;

/// Where a client's file goes.
#[derive(Debug, Clone, Copy)]
pub struct InfileTarget<'a> {
    /// The transport client.
    pub tunnel: &'a TunnelClient,
    /// The session's affinity key (the upload must reach the session's transport).
    pub affinity: &'a str,
    /// The session id.
    pub session: &'a str,
}

impl InfileTarget<'_> {
    /// Asks the client for `file_name` and uploads what it sends. A client that refuses sends
    /// an empty file, which the upstream answers as it would directly.
    pub async fn transfer(&self, io: &mut PacketIo, file_name: &[u8]) -> Result<(), Error> {
        let mut request = BytesMut::with_capacity(1 + file_name.len());
        request.extend_from_slice(&[0xfb]);
        request.extend_from_slice(file_name);
        io.queue_packet(&request);
        io.flush().await?;
        let mut upload = self.tunnel.connection(self.affinity);
        let mut piece = BytesMut::with_capacity(PIECE);
        loop {
            let packet =
                io.read_expected("client hung up while sending a LOCAL INFILE file").await?;
            let last = packet.is_empty();
            piece.extend_from_slice(&packet);
            if last || piece.len() >= PIECE {
                upload.infile_piece(self.session, &piece, last).await?;
                piece.clear();
            }
            if last {
                return Ok(());
            }
        }
    }
}
