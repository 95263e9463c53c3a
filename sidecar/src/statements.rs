//! Client-side bookkeeping of prepared statements. COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA
//! have no answer and cost no round trip: closes ride on the next request, long data on the
//! execute that uses it.

use std::collections::{BTreeMap, HashMap};

/// Per-connection statement state.
#[derive(Debug, Default)]
pub struct StatementState {
    pending_closes: Vec<u32>,
    long_data: HashMap<u32, BTreeMap<u16, Vec<u8>>>,
}

/// The statement id at the start of a COM_STMT_* payload (after the command byte).
pub fn statement_id(packet: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(packet.get(1..5)?.try_into().ok()?))
}

impl StatementState {
    /// COM_STMT_CLOSE: remembered, sent with the next command.
    pub fn close(&mut self, packet: &[u8]) {
        if let Some(id) = statement_id(packet) {
            self.long_data.remove(&id);
            self.pending_closes.push(id);
        }
    }

    /// COM_STMT_SEND_LONG_DATA: the chunk is appended to the parameter's data.
    pub fn long_data(&mut self, packet: &[u8]) {
        let (Some(id), Some(param)) = (statement_id(packet), packet.get(5..7)) else { return };
        let param = u16::from_le_bytes([param[0], param[1]]);
        let data = self.long_data.entry(id).or_default().entry(param).or_default();
        data.extend_from_slice(&packet[7..]);
    }

    /// COM_STMT_RESET: forgets long data sent for the statement.
    pub fn reset(&mut self, packet: &[u8]) {
        if let Some(id) = statement_id(packet) {
            self.long_data.remove(&id);
        }
    }

    /// The long data sent for the statement this COM_STMT_EXECUTE runs (consumed: a server
    /// forgets it after the execute).
    pub fn take_long_data(&mut self, packet: &[u8]) -> Option<BTreeMap<u16, Vec<u8>>> {
        statement_id(packet).and_then(|id| self.long_data.remove(&id))
    }

    /// Statement ids to close before the next command.
    pub fn take_closes(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.pending_closes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_ride_on_the_next_command_and_long_data_is_flagged() {
        let mut s = StatementState::default();
        s.close(&[0x19, 7, 0, 0, 0]);
        s.close(&[0x19, 9, 0, 0, 0]);
        assert_eq!(s.take_closes(), vec![7, 9]);
        assert!(s.take_closes().is_empty());
        s.long_data(&[0x18, 3, 0, 0, 0, 1, 0, b'a', b'b']);
        s.long_data(&[0x18, 3, 0, 0, 0, 1, 0, b'c']);
        let taken = s.take_long_data(&[0x17, 3, 0, 0, 0]).expect("long data");
        assert_eq!(taken.get(&1).map(Vec::as_slice), Some(&b"abc"[..]));
        assert!(s.take_long_data(&[0x17, 3, 0, 0, 0]).is_none(), "consumed by the execute");
        s.long_data(&[0x18, 3, 0, 0, 0, 0, 0, b'x']);
        s.reset(&[0x1a, 3, 0, 0, 0]);
        assert!(s.take_long_data(&[0x17, 3, 0, 0, 0]).is_none(), "reset forgets it");
        s.close(&[0x19]);
        assert!(s.take_closes().is_empty(), "truncated packets are ignored");
    }
}
