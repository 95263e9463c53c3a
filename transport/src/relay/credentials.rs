//! The transport's own login for a `users` entry (sans-IO): a handshake response built from the
//! client's capabilities and the entry's upstream credentials, and the answers to a server's
//! auth switch. The auth plugins are `mysql_common`'s.

use bytes::BufMut;
use common::mysql::capability as cap;
use common::mysql::put_lenenc_int;
use common::wire::LoginAs;
use mysql_common::packets::AuthPlugin;

/// Capabilities the transport's own login always needs.
const REQUIRED: u32 = cap::PROTOCOL_41 | cap::SECURE_CONNECTION | cap::PLUGIN_AUTH;
/// Capabilities it leaves out: connect attributes are the client's to send.
const LEFT_OUT: u32 = cap::CONNECT_ATTRS | cap::PLUGIN_AUTH_LENENC_DATA;

/// A HandshakeResponse41 logging in as `login` against the greeting's `scramble` and `plugin`
/// (TLS and compression are set by the link, as for a relayed response).
pub fn handshake_response(login: &LoginAs, scramble: &[u8], plugin: &[u8]) -> Vec<u8> {
    let plugin = first_plugin(plugin);
    let mut flags = (login.client_flags | REQUIRED) & !LEFT_OUT;
    if login.database.is_some() {
        flags |= cap::CONNECT_WITH_DB;
    } else {
        flags &= !cap::CONNECT_WITH_DB;
    }
    let auth = auth_data(plugin, &login.password, scramble, false).unwrap_or_default();
    let mut p = Vec::with_capacity(128);
    p.put_u32_le(flags);
    p.put_u32_le(1 << 24);
    p.put_u8(login.collation);
    p.put_bytes(0, 19);
    p.put_u32_le(if flags & cap::LONG_PASSWORD == 0 { login.mariadb_flags } else { 0 });
    p.put_slice(login.user.as_bytes());
    p.put_u8(0);
    put_lenenc_int(&mut p, auth.len() as u64);
    p.put_slice(&auth);
    if let Some(db) = &login.database {
        p.put_slice(db.as_bytes());
        p.put_u8(0);
    }
    p.put_slice(plugin);
    p.put_u8(0);
    p
}

/// A COM_CHANGE_USER payload switching to `login`, answering the connection's `scramble`.
pub fn change_user(login: &LoginAs, scramble: &[u8], plugin: &[u8]) -> Vec<u8> {
    let plugin = first_plugin(plugin);
    let auth = auth_data(plugin, &login.password, scramble, false).unwrap_or_default();
    let mut p = Vec::with_capacity(96);
    p.put_u8(common::mysql::command::CHANGE_USER);
    p.put_slice(login.user.as_bytes());
    p.put_u8(0);
    p.put_u8(u8::try_from(auth.len()).unwrap_or(0));
    p.put_slice(&auth);
    p.put_slice(login.database.as_deref().unwrap_or_default().as_bytes());
    p.put_u8(0);
    p.put_u16_le(u16::from(login.collation));
    p.put_slice(plugin);
    p.put_u8(0);
    p
}

/// The answer to an AuthSwitchRequest payload (`0xfe`, plugin name, NUL, data), on a link
/// that is TLS or not; an error names a plugin the transport will not answer.
pub fn switch_answer(switch: &[u8], password: &str, tls: bool) -> Result<Vec<u8>, Refused> {
    let rest = switch.get(1..).ok_or(Refused::Malformed)?;
    let nul = rest.iter().position(|&b| b == 0).ok_or(Refused::Malformed)?;
    let (plugin, data) = (&rest[..nul], &rest[nul + 1..]);
    let nonce = data.strip_suffix(&[0]).unwrap_or(data);
    auth_data(plugin, password, nonce, tls)
}

/// Why the transport will not answer a server's auth step with a `users` entry's password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub enum Refused {
    /// `mysql_clear_password` on a link without TLS: the password would cross in clear.
    ClearWithoutTls,
    /// A plugin the transport does not use: `mysql_old_password` (broken hashing), or one it
    /// does not know.
    Unsupported,
    /// The switch request is not one.
    Malformed,
}

impl Refused {
    /// What the log and the caller are told.
    pub fn message(self) -> &'static str {
        match self {
            Refused::ClearWithoutTls => {
                "the upstream asks for the password in clear (mysql_clear_password) without TLS: refused"
            }
            Refused::Unsupported => {
                "the upstream asks for an auth plugin the transport does not use"
            }
            Refused::Malformed => "the upstream sent a malformed auth switch",
        }
    }
}

/// The plugin a first response is computed with: the greeting's when it is one that proves
/// the password without giving it away, else `mysql_native_password` (the server switches
/// to the account's own, and that switch is answered, or refused, as any other).
fn first_plugin(plugin: &[u8]) -> &[u8] {
    match AuthPlugin::from_bytes(plugin) {
        AuthPlugin::MysqlNativePassword | AuthPlugin::CachingSha2Password => plugin,
        _ => b"mysql_native_password",
    }
}

/// What `plugin` sends for `password` and `nonce` (an empty password sends nothing). Only
/// plugins that prove the password are answered, and the cleartext one over TLS.
fn auth_data(plugin: &[u8], password: &str, nonce: &[u8], tls: bool) -> Result<Vec<u8>, Refused> {
    let plugin = AuthPlugin::from_bytes(plugin);
    match plugin {
        AuthPlugin::MysqlNativePassword | AuthPlugin::CachingSha2Password => {}
        AuthPlugin::MysqlClearPassword if tls => {}
        AuthPlugin::MysqlClearPassword => return Err(Refused::ClearWithoutTls),
        _ => return Err(Refused::Unsupported),
    }
    if password.is_empty() {
        return Ok(Vec::new());
    }
    let data = plugin.gen_data(Some(password), nonce).ok_or(Refused::Unsupported)?;
    let mut out = data.to_vec();
    if plugin == AuthPlugin::MysqlClearPassword {
        out.push(0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(database: Option<&str>) -> LoginAs {
        LoginAs {
            user: "app".into(),
            password: "app-pw".into(),
            database: database.map(Into::into),
            client_flags: cap::PROTOCOL_41 | cap::DEPRECATE_EOF | cap::CONNECT_ATTRS,
            mariadb_flags: 8,
            collation: 33,
        }
    }

    #[test]
    fn builds_a_native_password_response() {
        let scramble = b"abcdefghijklmnopqrst";
        let p = handshake_response(&login(Some("db")), scramble, b"mysql_native_password");
        let flags = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
        assert_eq!(flags & (cap::CONNECT_ATTRS | cap::LONG_PASSWORD), 0);
        assert_ne!(flags & cap::CONNECT_WITH_DB, 0);
        assert_eq!(p[8], 33);
        assert_eq!(&p[28..32], &8u32.to_le_bytes());
        assert_eq!(&p[32..36], b"app\0");
        assert_eq!(p[36], 20);
        let expected = mysql_common::scramble::scramble_native(scramble, b"app-pw");
        assert_eq!(Some(&p[37..57]), expected.as_ref().map(|e| &e[..]));
        assert!(p.ends_with(b"db\0mysql_native_password\0"));
    }

    #[test]
    fn builds_a_change_user_request() {
        let p = change_user(&login(None), b"abcdefghijklmnopqrst", b"mysql_native_password");
        assert_eq!(&p[..5], b"\x11app\0");
        assert_eq!(p[5], 20);
        assert_eq!(&p[26..30], b"\0\x21\x00m");
        assert!(p.ends_with(b"mysql_native_password\0"));
    }

    #[test]
    fn answers_a_switch_with_the_new_nonce() {
        let mut switch = b"\xfemysql_native_password\0".to_vec();
        switch.extend_from_slice(b"ABCDEFGHIJKLMNOPQRST\0");
        let answer = switch_answer(&switch, "app-pw", false).unwrap_or_default();
        let expected = mysql_common::scramble::scramble_native(b"ABCDEFGHIJKLMNOPQRST", b"app-pw");
        assert_eq!(Some(answer.as_slice()), expected.as_ref().map(|e| &e[..]));
        assert_eq!(
            switch_answer(b"\xfeunknown_plugin\0xyz", "pw", true),
            Err(Refused::Unsupported)
        );
        assert_eq!(switch_answer(&switch, "", false), Ok(Vec::new()));
        assert_eq!(switch_answer(b"\xfemysql_clear_password\0", "pw", true), Ok(b"pw\0".to_vec()));
    }

    #[test]
    fn never_gives_the_password_away_nor_panics_on_a_hostile_switch() {
        let clear = b"\xfemysql_clear_password\0";
        assert_eq!(switch_answer(clear, "pw", false), Err(Refused::ClearWithoutTls));
        // An empty nonce panicked inside mysql_common's old-password hashing.
        for old in [&b"\xfemysql_old_password\0"[..], b"\xfemysql_old_password\0\0", b"\xfe"] {
            assert!(switch_answer(old, "pw", false).is_err());
        }
        // A greeting naming the cleartext plugin gets a native-password proof instead.
        let p = handshake_response(&login(None), b"abcdefghijklmnopqrst", b"mysql_clear_password");
        assert!(!p.windows(6).any(|w| w == b"app-pw"), "no password in clear");
        assert!(p.ends_with(b"mysql_native_password\0"));
    }
}
