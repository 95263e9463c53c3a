//! The take-over's local channel: a Unix stream socket carrying JSON messages, each with the
//! file descriptors it hands over (SCM_RIGHTS) and bytes (a kept answer). A message is a
//! 9-byte head (the lengths of its JSON and of its bytes, and how many descriptors came with
//! its first byte), its JSON, then its bytes.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use bytes::Bytes;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::UnixStream;

/// Most descriptors one message carries (the listeners: the API's and the metrics').
pub const MAX_FDS: usize = 4;
/// Largest JSON (a session's state with the bytes its upstream sent unasked).
const MAX_MESSAGE: usize = 64 << 20;
/// Most bytes beside a message (a kept answer: `resume_window`, 8 MiB by default).
const MAX_TAIL: usize = 1 << 30;
/// The head: the JSON's and the bytes' lengths (u32, little-endian), the descriptors' count.
const HEAD: usize = 9;

/// A message received: its value, its bytes and its descriptors.
pub type Received<T> = (T, Vec<u8>, Vec<OwnedFd>);

/// One end of the channel.
#[derive(Debug)]
pub struct Channel {
    socket: UnixStream,
    peer: rustix::process::Pid,
}

impl Channel {
    /// The channel over `socket`, if its peer is a process of this user: another user's is
    /// refused (`PermissionDenied`).
    pub fn new(socket: UnixStream) -> std::io::Result<Self> {
        let peer = rustix::net::sockopt::socket_peercred(&socket)?;
        if peer.uid != rustix::process::getuid() {
            let e = format!(
                "a process of another user (uid {}) at the take-over socket",
                peer.uid.as_raw()
            );
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, e));
        }
        Ok(Self { socket, peer: peer.pid })
    }

    /// The process at the other end.
    pub fn peer(&self) -> rustix::process::Pid {
        self.peer
    }

    /// Sends `message` with `fds` (duplicated into the peer).
    pub async fn send<T: Serialize>(
        &mut self,
        message: &T,
        fds: &[BorrowedFd<'_>],
    ) -> std::io::Result<()> {
        self.send_with(message, &[], fds).await
    }

    /// Sends `message` with `bytes` (in pieces, sent as one) and `fds`.
    pub async fn send_with<T: Serialize>(
        &mut self,
        message: &T,
        bytes: &[Bytes],
        fds: &[BorrowedFd<'_>],
    ) -> std::io::Result<()> {
        let json = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        let tail = u32::try_from(bytes.iter().map(Bytes::len).sum::<usize>()).ok();
        let fits = |tail: &u32| *tail as usize <= MAX_TAIL && json.len() <= MAX_MESSAGE;
        let Some(tail) = tail.filter(|tail| fits(tail) && fds.len() <= MAX_FDS) else {
            // (Nothing was written: the channel goes on.)
            let e = "a take-over message too large to send";
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, e));
        };
        let mut head = [0u8; HEAD];
        head[..4].copy_from_slice(&(json.len() as u32).to_le_bytes());
        head[4..8].copy_from_slice(&tail.to_le_bytes());
        head[8] = fds.len() as u8;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(std::io::Error::other("no room for the descriptors"));
        }
        let socket = &self.socket;
        let sent = socket
            .async_io(Interest::WRITABLE, || {
                let iov = [IoSlice::new(&head)];
                rustix::net::sendmsg(socket, &iov, &mut control, SendFlags::NOSIGNAL)
                    .map_err(std::io::Error::from)
            })
            .await?;
        // The descriptors went with the first byte; the rest is plain bytes.
        self.socket.write_all(&head[sent..]).await?;
        self.socket.write_all(&json).await?;
        for piece in bytes {
            self.socket.write_all(piece).await?;
        }
        self.socket.flush().await
    }

    /// Receives the next message and the descriptors that came with it; `None` when the peer
    /// closed the channel between messages.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> std::io::Result<Option<Received<T>>> {
        let mut head = [0u8; HEAD];
        let mut fds = Vec::new();
        let mut got = 0;
        while got < HEAD {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let socket = &self.socket;
            let read = socket
                .async_io(Interest::READABLE, || {
                    let mut iov = [IoSliceMut::new(&mut head[got..])];
                    let flags = RecvFlags::CMSG_CLOEXEC;
                    rustix::net::recvmsg(socket, &mut iov, &mut control, flags)
                        .map_err(std::io::Error::from)
                })
                .await?;
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            if read.bytes == 0 {
                if got == 0 {
                    return Ok(None);
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            got += read.bytes;
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let tail = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        if len > MAX_MESSAGE || tail > MAX_TAIL || fds.len() != usize::from(head[8]) {
            return Err(std::io::Error::other("a malformed take-over message"));
        }
        let mut json = Vec::new();
        (&mut self.socket).take(len as u64).read_to_end(&mut json).await?;
        // (Its text is not quoted: a session's state holds a password.)
        let message = serde_json::from_slice(&json).map_err(|e| {
            let at = format!("{:?} at line {} column {}", e.classify(), e.line(), e.column());
            std::io::Error::other(format!("a take-over message that does not parse ({at})"))
        })?;
        // Read as it comes, not allocated up front on the peer's word.
        let mut bytes = Vec::new();
        (&mut self.socket).take(tail as u64).read_to_end(&mut bytes).await?;
        if json.len() != len || bytes.len() != tail {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(Some((message, bytes, fds)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[tokio::test]
    async fn messages_carry_their_descriptors() {
        let (a, b) = UnixStream::pair().unwrap_or_else(|e| panic!("pair: {e}"));
        let new = |s| Channel::new(s).unwrap_or_else(|e| panic!("peer: {e}"));
        let (mut a, mut b) = (new(a), new(b));
        let (mut here, there) =
            std::os::unix::net::UnixStream::pair().unwrap_or_else(|e| panic!("pair: {e}"));
        a.send(&"with one", &[there.as_fd()]).await.unwrap_or_else(|e| panic!("send: {e}"));
        a.send_with(
            &vec![1u32, 2, 3],
            &[Bytes::from_static(b"ke"), Bytes::from_static(b"pt")],
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("send: {e}"));
        drop(there);
        let (text, _, fds): (String, _, _) =
            b.recv().await.ok().flatten().unwrap_or_else(|| panic!("no first message"));
        assert_eq!((text.as_str(), fds.len()), ("with one", 1));
        // The descriptor is the same socket: what goes in one end comes out of it.
        let mut passed = std::os::unix::net::UnixStream::from(
            fds.into_iter().next().unwrap_or_else(|| panic!("fd")),
        );
        here.write_all(b"hi").unwrap_or_else(|e| panic!("write: {e}"));
        let mut got = [0u8; 2];
        passed.read_exact(&mut got).unwrap_or_else(|e| panic!("read: {e}"));
        assert_eq!(&got, b"hi");
        let (numbers, bytes, fds): (Vec<u32>, _, _) =
            b.recv().await.ok().flatten().unwrap_or_else(|| panic!("no second message"));
        assert_eq!((numbers, &bytes[..], fds.len()), (vec![1, 2, 3], &b"kept"[..], 0));
        drop(a);
        assert!(matches!(b.recv::<String>().await, Ok(None)), "a closed channel ends cleanly");
    }
}
