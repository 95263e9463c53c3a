//! Whether a LOCAL INFILE request may reach the client (security review F5, the rogue-server
//! file read: a server, or anything between, asking any client with local files enabled for
//! `~/.ssh/id_*` in answer to any query). Only as the answer to a COM_QUERY whose own text names
//! that file in a `LOAD DATA|XML … LOCAL INFILE` statement (`common::mysql::local_infile`).

use std::borrow::Cow;

use common::mysql::packets::split_packets;
use common::mysql::{command, local_infile, packet};

/// True when `request` (a LOCAL INFILE request's payload: 0xFB, then the file name) may go to
/// the client as the answer to `asked`: the client's command, one logical packet with its
/// headers (16 MiB continuations included); `None` when the answer is to no command of the
/// client's (an auth step).
pub(super) fn file_request_allowed(asked: Option<&[u8]>, request: &[u8]) -> bool {
    let Some((&packet::LOCAL_INFILE, requested)) = request.split_first() else { return false };
    let Some(statement) = asked.and_then(query_text) else { return false };
    local_infile::requested_file_allowed(&statement, requested)
}

/// The statement text of a COM_QUERY packet (headers included), its continuations joined;
/// `None` for any other command.
fn query_text(asked: &[u8]) -> Option<Cow<'_, [u8]>> {
    let packets = split_packets(asked)?;
    let (first, continued) = packets.split_first()?;
    let (&command::QUERY, text) = first.1.split_first()? else { return None };
    if continued.is_empty() {
        return Some(Cow::Borrowed(text));
    }
    let mut joined = text.to_vec();
    continued.iter().for_each(|(_, payload)| joined.extend_from_slice(payload));
    Some(Cow::Owned(joined))
}

/// The file a refused request named, for the client's error and the logs.
pub(super) fn requested_name(request: Option<&[u8]>) -> Option<String> {
    let name = request?.strip_prefix(&[packet::LOCAL_INFILE])?;
    Some(String::from_utf8_lossy(name).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::mysql::packets::PacketHead;

    fn packet_of(payload: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        PacketHead::write(&mut p, payload.len(), 0);
        p.extend_from_slice(payload);
        p
    }

    fn query(text: &str) -> Vec<u8> {
        packet_of(&[&[command::QUERY], text.as_bytes()].concat())
    }

    #[test]
    fn only_a_file_the_query_named_is_asked_for() {
        let load = query("LOAD DATA LOCAL INFILE '/tmp/data.csv' INTO TABLE t");
        assert!(file_request_allowed(Some(&load), b"\xfb/tmp/data.csv"));
        assert!(!file_request_allowed(Some(&load), b"\xfb/home/me/.ssh/id_ed25519"));
        assert!(!file_request_allowed(Some(&load), b"\xfb/tmp/data.csv\0"));
        assert!(!file_request_allowed(Some(&load), b"/tmp/data.csv"));
        assert!(!file_request_allowed(Some(&load), b""));
        let select = query("SELECT 1");
        assert!(!file_request_allowed(Some(&select), b"\xfb/tmp/data.csv"));
        assert!(!file_request_allowed(None, b"\xfb/tmp/data.csv"));
        // The same text in a prepared statement (which LOAD DATA cannot be) or cut short.
        let mut prepare = load.clone();
        prepare[4] = command::STMT_PREPARE;
        assert!(!file_request_allowed(Some(&prepare), b"\xfb/tmp/data.csv"));
        assert!(!file_request_allowed(Some(&load[..load.len() - 1]), b"\xfb/tmp/data.csv"));
        assert!(!file_request_allowed(Some(&[]), b"\xfb/tmp/data.csv"));
    }

    #[test]
    fn a_statement_past_16_mib_is_read_joined() {
        let mut text = b"LOAD DATA LOCAL INFILE 'f' INTO TABLE t /*".to_vec();
        text.resize(common::mysql::packets::MAX_PAYLOAD + 10, b' ');
        text.extend_from_slice(b"*/;LOAD DATA LOCAL INFILE 'g' INTO TABLE t");
        let payload = [&[command::QUERY], &text[..]].concat();
        let (head, tail) = payload.split_at(common::mysql::packets::MAX_PAYLOAD);
        let asked = [packet_of(head), packet_of(tail)].concat();
        assert!(file_request_allowed(Some(&asked), b"\xfbf"));
        assert!(file_request_allowed(Some(&asked), b"\xfbg"));
        assert!(!file_request_allowed(Some(&asked), b"\xfbh"));
    }

    #[test]
    fn the_refused_name_is_readable() {
        assert_eq!(requested_name(Some(b"\xfb/etc/passwd")).as_deref(), Some("/etc/passwd"));
        assert_eq!(requested_name(Some(b"\x01x")), None);
        assert_eq!(requested_name(None), None);
    }
}
