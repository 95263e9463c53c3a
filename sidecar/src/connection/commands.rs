//! The command phase: each client command is one relayed turn, or a few when the upstream
//! asks the client for a file or an auth packet. Commands the client pipelined (sent without
//! waiting for an answer) go together in one request and are answered in one turn. Commands
//! without an answer ride on the next request; a COM_CHANGE_USER to a `users` entry is
//! checked here.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use common::mysql::capability as cap;
use common::mysql::command_policy::{Answer, CommandPolicy, waits_for_the_client};
use common::rare::RareWait;
use common::wire::{LoginAs, SessionEnd, TurnEnd};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::WaitForCancellationFuture;
use tracing::debug;

use super::Connection;
use super::answers::{write_answer, write_login_packets};
use super::users::Authenticator;
use crate::Error;
use crate::live::Gone;
use crate::protocol::{Scramble, parse_change_user};
use crate::tunnel::RelayStep;

/// A LOAD DATA LOCAL file is uploaded in pieces of about this size.
const FILE_PIECE: usize = 512 * 1024;

/// After the shutdown grace, how long the end of a running command's answer may take (the
/// transport kills the statement, or cuts the answer, within a few seconds).
pub const CUT_WAIT: std::time::Duration = std::time::Duration::from_secs(8);

/// How the command loop ended.
pub(crate) enum Served {
    /// The client quit, the upstream hung up, or the sidecar is shutting down.
    Quit,
    /// The client hung up without COM_QUIT.
    HungUp,
    /// The transport reported the session gone while the client was idle.
    Gone,
}

/// How a relayed exchange ended for the client connection.
enum Next {
    /// The client sends its next command.
    Command,
    /// The upstream hung up: so does the sidecar.
    Closed,
}

impl Connection {
    /// The command loop, until the client quits, the upstream hangs up, the session is `gone`
    /// or the sidecar shuts down. Between commands only: a running command's answer is never
    /// cut short here.
    pub(super) async fn serve(&mut self, session: &str, gone: &Gone) -> Result<Served, Error> {
        let mut riding = BytesMut::new();
        // Room in max_inflight_bytes for the commands held, until their request is sent.
        let mut room = Vec::new();
        let budget = self.shared.inflight.clone();
        let draining = self.shared.draining.clone();
        // Waited on between commands, made once for the connection, and polled only when
        // woken (a wait made each command, or polled at each wake-up, cost about 1,000
        // instructions per command, callgrind).
        let mut session_gone = RareWait::new(gone.cancelled());
        let mut shutting_down = RareWait::new(draining.cancelled());
        // Waited on during commands.
        let cut = self.shared.cut.clone();
        let mut cut_wait = RareWait::new(cut.cancelled());
        loop {
            self.io.reset_seq();
            let read = tokio::select! {
                biased;
                // Not polled again once it completed: a revoked session stays revoked.
                () = &mut session_gone, if !gone.was_revoked() => {
                    if gone.was_revoked() {
                        // Told at the client's next command, as an answer to it.
                        continue;
                    }
                    return Ok(Served::Gone);
                }
                read = self.io.read_raw_within(Some(&budget)) => read?,
                () = &mut shutting_down => return Ok(Served::Quit),
            };
            let Some((packet, held)) = read else { return Ok(Served::HungUp) };
            if gone.was_revoked() {
                self.write_error(&Error::AccessRevoked).await?;
                return Ok(Served::Gone);
            }
            if draining.is_cancelled() {
                // A command that arrives during shutdown is refused, not dropped unanswered.
                self.write_error(&Error::ShuttingDown).await?;
                return Ok(Served::Quit);
            }
            room.extend(held);
            if packet[3] != 0 {
                // Not a command (each starts at 0): a file, say, sent for a request the client
                // saw and the turn's end did not announce. A server says the same and hangs up.
                return Err(Error::PacketsOutOfOrder);
            }
            let Some(&cmd) = packet.get(4) else {
                return Err(Error::ClientProtocol("empty command packet"));
            };
            match CommandPolicy::of(cmd) {
                CommandPolicy::Quit => return Ok(Served::Quit),
                CommandPolicy::Answered(Answer::Auth)
                    if self.checks_change_user(&packet[5..])? =>
                {
                    room.clear();
                    self.change_user_as(session, &packet[5..]).await?;
                    continue;
                }
                // No answer: they ride on the next command's request.
                CommandPolicy::Unanswered => {
                    riding.extend_from_slice(&packet);
                    continue;
                }
                CommandPolicy::Replication => {
                    debug!(command = cmd, "replication command not relayed");
                    self.write_error(&Error::NotRelayed).await?;
                    continue;
                }
                _ => {}
            }
            let (pipelined, asked) = self.read_pipelined(&packet, &budget, &mut room).await?;
            // The command the answer ends with: the one a LOCAL INFILE request may answer.
            let last_command = pipelined.last().unwrap_or(&packet).clone();
            let body = if riding.is_empty() && pipelined.is_empty() {
                packet
            } else {
                riding.extend_from_slice(&packet);
                pipelined.iter().for_each(|p| riding.extend_from_slice(p));
                riding.split().freeze()
            };
            let started = std::time::Instant::now();
            let step = RelayStep::Command(body);
            let exchanged = self.exchange(session, step, &last_command, &mut cut_wait).await;
            self.shared.metrics.command_seconds.observe(started.elapsed().as_secs_f64());
            room.clear();
            match exchanged {
                Ok(Next::Command) => {}
                Ok(Next::Closed) => return Ok(Served::Quit),
                // One error answers one command: a pipeline that failed ends the connection.
                Err(e) if !e.is_fatal() && asked == 1 => self.write_error(&e).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// The commands the client sent right behind `first` (just read), without waiting for its
    /// answer, up to the transport's limit and `max_packet` bytes in all (what one command may
    /// be): those already here whole that pass as they are. Returns their packets and how many
    /// commands with an answer the request now carries.
    async fn read_pipelined(
        &mut self,
        first: &Bytes,
        budget: &Arc<Semaphore>,
        room: &mut Vec<OwnedSemaphorePermit>,
    ) -> Result<(Vec<Bytes>, usize), Error> {
        let (mut packets, mut asked) = (Vec::new(), 1);
        let (limit, max_bytes) = (self.tunnel.pipeline_limit(), self.shared.config.max_packet);
        let (mut last, mut bytes) = (first.clone(), first.len());
        while let Some((cmd, size)) = self.io.buffered_command() {
            bytes += size;
            let policy = CommandPolicy::of(cmd);
            let alone = !policy.pipelines() || waits_for_the_client(&last[4..]);
            if asked == limit || bytes > max_bytes || alone {
                break;
            }
            let Some((packet, held)) = self.io.read_raw_within(Some(budget)).await? else { break };
            room.extend(held);
            if packet[3] != 0 {
                return Err(Error::PacketsOutOfOrder);
            }
            last = packet.clone();
            packets.push(packet);
            if policy != CommandPolicy::Unanswered {
                asked += 1;
            }
        }
        Ok((packets, asked))
    }

    /// Sends `step` and relays answers until the client's next command is due. Once the
    /// shutdown grace is over, the transport is asked to end the statement; the rest of its
    /// answer (the server's error, or the transport's 1053) is still relayed, for a while.
    async fn exchange(
        &mut self,
        session: &str,
        step: RelayStep<'_>,
        last_command: &[u8],
        cut: &mut RareWait<WaitForCancellationFuture<'_>>,
    ) -> Result<Next, Error> {
        let shared = self.shared.clone();
        let (bucket, authorization) = (self.bucket, self.tunnel.authorization());
        let relayed = self.relay_exchange(session, step, last_command);
        tokio::pin!(relayed);
        tokio::select! {
            biased;
            next = &mut relayed => return next,
            () = cut => {}
        }
        let mut ender = shared.tunnel.connection_as(shared.affinity(bucket), authorization);
        let id = session.to_owned();
        tokio::spawn(async move { ender.end_session(&id, SessionEnd::KillQuery).await });
        tokio::time::timeout(CUT_WAIT, relayed).await.unwrap_or(Err(Error::ShuttingDown))
    }

    /// [`Self::exchange`] until its end; `last_command` is the last command of `step`, the one a
    /// LOCAL INFILE request may answer (for each statement of a multi-statement query).
    async fn relay_exchange(
        &mut self,
        session: &str,
        step: RelayStep<'_>,
        last_command: &[u8],
    ) -> Result<Next, Error> {
        // An answer within an authentication is checked whole before it is written: a server
        // asking for the password in clear is refused (`auth.cleartext_passwords`).
        let cleartext = self.shared.config.auth.cleartext_passwords;
        let changes_user = last_command.get(4) == Some(&common::mysql::command::CHANGE_USER);
        let mut end = {
            let mut frames = self.tunnel.relay(session, step).await?;
            let auth = changes_user.then_some(cleartext);
            write_answer(&mut self.io, &mut frames, Some(last_command), auth).await?
        };
        loop {
            self.io.flush().await?;
            end = match end {
                TurnEnd::Done => return Ok(Next::Command),
                TurnEnd::Closed => return Ok(Next::Closed),
                TurnEnd::AwaitAuth => {
                    let packet =
                        self.io.read_expected("client hung up during authentication").await?;
                    let step = RelayStep::Login(packet);
                    let mut frames = Box::pin(self.tunnel.relay(session, step)).await?;
                    write_answer(&mut self.io, &mut frames, None, Some(cleartext)).await?
                }
                TurnEnd::AwaitFile => Box::pin(self.send_file(session, last_command)).await?,
            };
        }
    }

    /// Reads the file the client sends after a LOAD DATA LOCAL request and uploads it in
    /// pieces; returns how the answer that follows it ended (`last_command` is the query it answers:
    /// a later statement of it may ask for another file).
    async fn send_file(&mut self, session: &str, last_command: &[u8]) -> Result<TurnEnd, Error> {
        let mut piece = BytesMut::new();
        loop {
            let seq = self.io.next_seq();
            let packet = self.io.read_raw().await?.ok_or(Error::ClientProtocol(
                "client hung up while sending a LOAD DATA LOCAL file",
            ))?;
            if packet[3] != seq {
                // Not the file: a command pipelined behind the LOAD DATA, say. A server says
                // the same and hangs up.
                return Err(Error::PacketsOutOfOrder);
            }
            let last = packet.len() == 4;
            piece.extend_from_slice(&packet);
            if last {
                let step = RelayStep::File { packets: piece.freeze(), last: true };
                let mut frames = self.tunnel.relay(session, step).await?;
                return write_answer(&mut self.io, &mut frames, Some(last_command), None).await;
            }
            if piece.len() >= FILE_PIECE {
                let step = RelayStep::File { packets: piece.split().freeze(), last: false };
                // A piece that is not the last is answered without frames (204).
                let mut frames = self.tunnel.relay(session, step).await?;
                while frames.next().await?.is_some() {}
            }
        }
    }

    /// True when a COM_CHANGE_USER (payload after the command byte) names a `users` entry, or
    /// every login must be one: the sidecar then checks it itself.
    fn checks_change_user(&self, payload: &[u8]) -> Result<bool, Error> {
        let request = parse_change_user(payload, self.client.capabilities)?;
        let config = &self.shared.config;
        Ok(config.user(&request.user).is_some() || !config.passthrough())
    }

    /// COM_CHANGE_USER to a `users` entry: proven with an auth switch and a fresh scramble,
    /// then the transport changes the upstream connection to the entry's credentials. A
    /// refusal keeps the session, as on a server.
    async fn change_user_as(&mut self, session: &str, payload: &[u8]) -> Result<(), Error> {
        let request = parse_change_user(payload, self.client.capabilities)?;
        let host = self.io.peer().map_or_else(|| "localhost".into(), |p| p.ip().to_string());
        let entry = self.shared.config.user(&request.user);
        let authenticator = Authenticator {
            io: &mut self.io,
            host: &host,
            scramble: Scramble::random()?,
            can_switch: self.client.capabilities & cap::PLUGIN_AUTH != 0,
        };
        let entry = match authenticator.check(&request.user, entry, None).await {
            Ok(entry) => entry,
            Err(e) if !e.is_fatal() => return self.write_error(&e).await,
            Err(e) => return Err(e),
        };
        let login = LoginAs {
            user: entry.upstream_user().to_owned(),
            password: entry.upstream_password().expose().to_owned(),
            database: request.database,
            client_flags: self.client.capabilities,
            mariadb_flags: self.client.mariadb,
            collation: request.collation.unwrap_or(self.client.collation),
        };
        let mut frames = self.tunnel.relay(session, RelayStep::LoginAs(&login)).await?;
        let cleartext = self.shared.config.auth.cleartext_passwords;
        write_login_packets(&mut self.io, &mut frames, cleartext).await.map(drop)
    }
}
