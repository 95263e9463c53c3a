//! Named MySQL protocol constants used on both sides (command bytes, capability and status
//! flags, the error codes the tunnel itself reports) and the one builder of its ERR packets.

pub mod command_policy;
pub mod compressed;
pub mod err_packet;
pub mod greeting;
pub mod handshake_response;
pub mod local_infile;
pub mod packets;

/// Writes a MySQL length-encoded integer.
pub fn put_lenenc_int(buf: &mut impl bytes::BufMut, n: u64) {
    match n {
        0..=250 => buf.put_u8(n as u8),
        251..=0xffff => {
            buf.put_u8(0xfc);
            buf.put_u16_le(n as u16);
        }
        0x1_0000..=0xff_ffff => {
            buf.put_u8(0xfd);
            buf.put_uint_le(n, 3);
        }
        _ => {
            buf.put_u8(0xfe);
            buf.put_u64_le(n);
        }
    }
}

/// ERR packet payload with a SQLSTATE marker (after the greeting). The one builder of MySQL
/// errors the tunnel writes itself, on either side.
pub fn encode_err(buf: &mut impl bytes::BufMut, code: u16, sqlstate: &[u8; 5], message: &[u8]) {
    buf.put_u8(packet::ERR);
    buf.put_u16_le(code);
    buf.put_u8(b'#');
    buf.put_slice(sqlstate);
    buf.put_slice(message);
}

/// ERR packet payload sent in place of a greeting: before the client has said it speaks
/// protocol 4.1, a server sends no SQLSTATE (as for "Too many connections").
pub fn encode_err_before_greeting(buf: &mut impl bytes::BufMut, code: u16, message: &[u8]) {
    buf.put_u8(packet::ERR);
    buf.put_u16_le(code);
    buf.put_slice(message);
}

/// Command bytes (first byte of a command packet).
pub mod command {
    /// The command's name as the server's processlist shows it, for logs.
    pub fn name(cmd: u8) -> &'static str {
        match cmd {
            QUIT => "Quit",
            INIT_DB => "Init DB",
            QUERY => "Query",
            FIELD_LIST => "Field List",
            STATISTICS => "Statistics",
            PING => "Ping",
            STMT_PREPARE => "Prepare",
            STMT_EXECUTE => "Execute",
            STMT_SEND_LONG_DATA => "Long Data",
            STMT_CLOSE => "Close stmt",
            STMT_RESET => "Reset stmt",
            CHANGE_USER => "Change user",
            RESET_CONNECTION => "Reset connection",
            SET_OPTION => "Set option",
            STMT_FETCH => "Fetch",
            PROCESS_INFO => "Processlist",
            PROCESS_KILL => "Kill",
            STMT_BULK_EXECUTE => "Bulk execute",
            _ => "other",
        }
    }

    /// COM_QUIT
    pub const QUIT: u8 = 0x01;
    /// COM_INIT_DB
    pub const INIT_DB: u8 = 0x02;
    /// COM_QUERY
    pub const QUERY: u8 = 0x03;
    /// COM_FIELD_LIST
    pub const FIELD_LIST: u8 = 0x04;
    /// COM_DEBUG (`mariadb-admin debug`)
    pub const DEBUG: u8 = 0x0d;
    /// COM_STATISTICS
    pub const STATISTICS: u8 = 0x09;
    /// COM_PING
    pub const PING: u8 = 0x0e;
    /// COM_STMT_PREPARE
    pub const STMT_PREPARE: u8 = 0x16;
    /// COM_STMT_EXECUTE
    pub const STMT_EXECUTE: u8 = 0x17;
    /// COM_STMT_SEND_LONG_DATA
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    /// COM_STMT_CLOSE
    pub const STMT_CLOSE: u8 = 0x19;
    /// COM_STMT_RESET
    pub const STMT_RESET: u8 = 0x1a;
    /// COM_CHANGE_USER
    pub const CHANGE_USER: u8 = 0x11;
    /// COM_RESET_CONNECTION
    pub const RESET_CONNECTION: u8 = 0x1f;
    /// COM_REFRESH (FLUSH by flags).
    pub const REFRESH: u8 = 0x07;
    /// COM_SHUTDOWN.
    pub const SHUTDOWN: u8 = 0x08;
    /// COM_PROCESS_INFO (the process list as a result set).
    pub const PROCESS_INFO: u8 = 0x0a;
    /// COM_PROCESS_KILL (kill a connection by id).
    pub const PROCESS_KILL: u8 = 0x0c;
    /// COM_SET_OPTION (multi-statements on/off).
    pub const SET_OPTION: u8 = 0x1b;
    /// COM_STMT_FETCH (rows of an open server-side cursor).
    pub const STMT_FETCH: u8 = 0x1c;
    /// COM_BINLOG_DUMP (replication stream).
    pub const BINLOG_DUMP: u8 = 0x12;
    /// COM_TABLE_DUMP (replication).
    pub const TABLE_DUMP: u8 = 0x13;
    /// COM_REGISTER_SLAVE (replication).
    pub const REGISTER_SLAVE: u8 = 0x15;
    /// COM_BINLOG_DUMP_GTID (replication stream).
    pub const BINLOG_DUMP_GTID: u8 = 0x1e;
    /// COM_STMT_BULK_EXECUTE (MariaDB: one execute, many parameter rows).
    pub const STMT_BULK_EXECUTE: u8 = 0xfa;
}

/// Capability flags.
pub mod capability {
    /// CLIENT_LONG_PASSWORD (also: "this is not a MariaDB server" when set by a server).
    pub const LONG_PASSWORD: u32 = 0x0000_0001;
    /// CLIENT_FOUND_ROWS
    pub const FOUND_ROWS: u32 = 0x0000_0002;
    /// CLIENT_LONG_FLAG
    pub const LONG_FLAG: u32 = 0x0000_0004;
    /// CLIENT_CONNECT_WITH_DB
    pub const CONNECT_WITH_DB: u32 = 0x0000_0008;
    /// CLIENT_ODBC
    pub const ODBC: u32 = 0x0000_0040;
    /// CLIENT_COMPRESS
    pub const COMPRESS: u32 = 0x0000_0020;
    /// CLIENT_IGNORE_SPACE
    pub const IGNORE_SPACE: u32 = 0x0000_0100;
    /// CLIENT_LOCAL_FILES: the client can send files for LOAD DATA LOCAL INFILE.
    pub const LOCAL_FILES: u32 = 0x0000_0080;
    /// CLIENT_PROTOCOL_41
    pub const PROTOCOL_41: u32 = 0x0000_0200;
    /// CLIENT_INTERACTIVE
    pub const INTERACTIVE: u32 = 0x0000_0400;
    /// CLIENT_SSL
    pub const SSL: u32 = 0x0000_0800;
    /// CLIENT_TRANSACTIONS
    pub const TRANSACTIONS: u32 = 0x0000_2000;
    /// CLIENT_SECURE_CONNECTION
    pub const SECURE_CONNECTION: u32 = 0x0000_8000;
    /// CLIENT_MULTI_STATEMENTS
    pub const MULTI_STATEMENTS: u32 = 0x0001_0000;
    /// CLIENT_MULTI_RESULTS
    pub const MULTI_RESULTS: u32 = 0x0002_0000;
    /// CLIENT_PS_MULTI_RESULTS
    pub const PS_MULTI_RESULTS: u32 = 0x0004_0000;
    /// CLIENT_PLUGIN_AUTH
    pub const PLUGIN_AUTH: u32 = 0x0008_0000;
    /// CLIENT_CONNECT_ATTRS
    pub const CONNECT_ATTRS: u32 = 0x0010_0000;
    /// CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    pub const PLUGIN_AUTH_LENENC_DATA: u32 = 0x0020_0000;
    /// CLIENT_DEPRECATE_EOF
    pub const DEPRECATE_EOF: u32 = 0x0100_0000;
    /// CLIENT_SSL_VERIFY_SERVER_CERT (client side only; never sent by a server).
    pub const SSL_VERIFY_SERVER_CERT: u32 = 0x4000_0000;
    /// CLIENT_ZSTD_COMPRESSION_ALGORITHM (MySQL 8.0.18+): zstd instead of zlib compression.
    pub const ZSTD_COMPRESSION_ALGORITHM: u32 = 0x0400_0000;
    /// Capabilities that change how every later byte is framed: a client may use them only
    /// when the greeting offered them.
    pub const CHANGES_THE_WIRE: u32 = COMPRESS | ZSTD_COMPRESSION_ALGORITHM;

    /// MariaDB's extended capabilities (the greeting's and handshake response's reserved
    /// bytes, valid when a server clears CLIENT_LONG_PASSWORD).
    pub mod mariadb {
        /// MARIADB_CLIENT_PROGRESS: progress reports (ERR packets with code 0xFFFF).
        pub const PROGRESS: u32 = 1;
        /// MARIADB_CLIENT_COM_MULTI.
        pub const COM_MULTI: u32 = 2;
        /// MARIADB_CLIENT_STMT_BULK_OPERATIONS.
        pub const STMT_BULK_OPERATIONS: u32 = 4;
        /// MARIADB_CLIENT_EXTENDED_METADATA (JSON, UUID, INET… type names in column definitions).
        pub const EXTENDED_METADATA: u32 = 8;
        /// MARIADB_CLIENT_CACHE_METADATA (execute answers without repeated column definitions).
        pub const CACHE_METADATA: u32 = 16;
    }
}

/// Server status flags.
pub mod status {
    /// SERVER_STATUS_IN_TRANS: a transaction is open.
    pub const IN_TRANS: u16 = 0x0001;
    /// SERVER_STATUS_AUTOCOMMIT
    pub const AUTOCOMMIT: u16 = 0x0002;
    /// SERVER_MORE_RESULTS_EXISTS
    pub const MORE_RESULTS_EXISTS: u16 = 0x0008;
    /// SERVER_STATUS_CURSOR_EXISTS: an execute opened a cursor (rows come by COM_STMT_FETCH).
    pub const CURSOR_EXISTS: u16 = 0x0040;
}

/// First bytes of server packets.
pub mod packet {
    /// OK packet.
    pub const OK: u8 = 0x00;
    /// AuthMoreData (caching_sha2_password and other plugins' extra rounds).
    pub const AUTH_MORE_DATA: u8 = 0x01;
    /// LOCAL INFILE request in place of a result set.
    pub const LOCAL_INFILE: u8 = 0xfb;
    /// EOF packet, an OK packet in EOF's place (CLIENT_DEPRECATE_EOF), or AuthSwitchRequest.
    pub const EOF: u8 = 0xfe;
    /// ERR packet.
    pub const ERR: u8 = 0xff;
    /// Error code of a MariaDB progress report (an ERR packet that ends nothing).
    pub const PROGRESS_REPORT_CODE: u16 = 0xffff;
    /// caching_sha2_password's "fast authentication succeeded" (an OK packet follows).
    pub const FAST_AUTH_OK: u8 = 0x03;
    /// Largest payload of one packet; a payload this long continues in the next packet.
    pub const MAX_PAYLOAD: usize = 0xff_ffff;
}

/// Error codes (and their SQLSTATE) that the tunnel reports itself.
pub mod error_code {
    /// ER_CON_COUNT_ERROR: too many connections.
    pub const TOO_MANY_CONNECTIONS: u16 = 1040;
    /// ER_OUT_OF_RESOURCES.
    pub const OUT_OF_RESOURCES: u16 = 1041;
    /// ER_HANDSHAKE_ERROR: bad handshake.
    pub const HANDSHAKE: u16 = 1043;
    /// ER_ACCESS_DENIED_ERROR.
    pub const ACCESS_DENIED: u16 = 1045;
    /// ER_NOT_SUPPORTED_AUTH_MODE: an auth plugin the client side does not take.
    pub const AUTH_MODE: u16 = 1251;
    /// ER_NO_SUCH_THREAD: unknown thread id (KILL).
    pub const UNKNOWN_THREAD: u16 = 1094;
    /// ER_UNKNOWN_ERROR.
    pub const UNKNOWN_ERROR: u16 = 1105;
    /// ER_NOT_ALLOWED_COMMAND: a LOAD DATA LOCAL file refused.
    pub const NOT_ALLOWED_COMMAND: u16 = 1148;
    /// ER_PARSE_ERROR: SQL syntax error.
    pub const PARSE_ERROR: u16 = 1064;
    /// ER_UNKNOWN_COM_ERROR: unknown command.
    pub const UNKNOWN_COMMAND: u16 = 1047;
    /// ER_NOT_SUPPORTED_YET.
    pub const NOT_SUPPORTED_YET: u16 = 1235;
    /// ER_NET_PACKET_TOO_LARGE.
    pub const PACKET_TOO_LARGE: u16 = 1153;
    /// ER_NET_PACKETS_OUT_OF_ORDER.
    pub const PACKETS_OUT_OF_ORDER: u16 = 1156;
    /// ER_NET_UNCOMPRESS_ERROR.
    pub const UNCOMPRESS: u16 = 1157;
    /// ER_CONNECT_TO_FOREIGN_DATA_SOURCE: the tunnel could not reach the transport or upstream.
    /// (Never a client-range code 2000–2999: libmariadb reports a server that sends one as
    /// "Malformed packet" and drops the message.)
    pub const CANNOT_REACH: u16 = 1429;
    /// ER_NET_READ_ERROR: the connection to the upstream or the transport broke.
    pub const CONNECTION_LOST: u16 = 1158;
    /// ER_SERVER_SHUTDOWN: the tunnel is shutting down.
    pub const SERVER_SHUTDOWN: u16 = 1053;
    /// ER_CONNECTION_KILLED (MariaDB's code): the session was ended by the tunnel.
    pub const CONNECTION_KILLED: u16 = 1927;
    /// SQLSTATE of access errors.
    pub const STATE_ACCESS: &[u8; 5] = b"28000";
    /// SQLSTATE of communication errors.
    pub const STATE_COMM: &[u8; 5] = b"08S01";
    /// SQLSTATE of generic errors.
    pub const STATE_GENERAL: &[u8; 5] = b"HY000";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_ints_use_the_right_width() {
        let mut v = Vec::new();
        for n in [0u64, 250, 251, 0xffff, 0x1_0000, 0xff_ffff, 0x100_0000] {
            put_lenenc_int(&mut v, n);
        }
        assert_eq!(v.len(), 1 + 1 + 3 + 3 + 4 + 4 + 9);
        assert_eq!(&v[..5], &[0, 250, 0xfc, 251, 0]);
    }

    #[test]
    fn err_packets_with_and_without_sqlstate() {
        let mut b = Vec::new();
        encode_err(&mut b, 1146, b"42S02", b"no");
        assert_eq!(&b[..], &[0xff, 0x7a, 0x04, b'#', b'4', b'2', b'S', b'0', b'2', b'n', b'o']);
        let mut b = Vec::new();
        encode_err_before_greeting(&mut b, 1040, b"Too many connections");
        assert_eq!(&b[..3], &[0xff, 0x10, 0x04]);
        assert_eq!(&b[3..], b"Too many connections");
    }
}
