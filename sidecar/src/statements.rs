//! Client-side bookkeeping of prepared statements: COM_STMT_CLOSE has no answer and rides on
//! the next request; COM_STMT_SEND_LONG_DATA is not tunnelled yet, so an execute that relies
//! on it gets a clear error instead of wrong parameters.

use std::collections::HashSet;

/// Per-connection statement state.
#[derive(Debug, Default)]
pub struct StatementState {
    pending_closes: Vec<u32>,
    long_data: HashSet<u32>,
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

    /// COM_STMT_SEND_LONG_DATA: remembered, so the next execute of that statement fails clearly.
    pub fn long_data(&mut self, packet: &[u8]) {
        if let Some(id) = statement_id(packet) {
            self.long_data.insert(id);
        }
    }

    /// COM_STMT_RESET: forgets long data sent for the statement.
    pub fn reset(&mut self, packet: &[u8]) {
        if let Some(id) = statement_id(packet) {
            self.long_data.remove(&id);
        }
    }

    /// True when this COM_STMT_EXECUTE needs long data the tunnel did not carry.
    pub fn needs_long_data(&self, packet: &[u8]) -> bool {
        statement_id(packet).is_some_and(|id| self.long_data.contains(&id))
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
        s.long_data(&[0x18, 3, 0, 0, 0, 0, 0, b'x']);
        assert!(s.needs_long_data(&[0x17, 3, 0, 0, 0]));
        s.reset(&[0x1a, 3, 0, 0, 0]);
        assert!(!s.needs_long_data(&[0x17, 3, 0, 0, 0]));
        s.close(&[0x19]);
        assert!(s.take_closes().is_empty(), "truncated packets are ignored");
    }
}
