//! COM_CHANGE_USER: the request's fields, read when it names a `users` entry (the sidecar then
//! checks it with an auth switch and a fresh scramble).

use common::mysql::capability as cap;

use super::take_cstr;
use crate::Error;

/// What a COM_CHANGE_USER asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeUser {
    /// New login name.
    pub user: String,
    /// New default database.
    pub database: Option<String>,
    /// New collation, when the client sent one.
    pub collation: Option<u8>,
}

/// Parses a COM_CHANGE_USER payload (after the command byte).
pub fn parse_change_user(mut p: &[u8], capabilities: u32) -> Result<ChangeUser, Error> {
    let malformed = || Error::ClientProtocol("malformed COM_CHANGE_USER");
    let user = take_cstr(&mut p).ok_or_else(malformed)?;
    // The auth response answers the old scramble; the sidecar asks again with a fresh one.
    if capabilities & cap::SECURE_CONNECTION != 0 {
        let len = usize::from(*p.first().ok_or_else(malformed)?);
        p = p.get(1 + len..).ok_or_else(malformed)?;
    } else {
        take_cstr(&mut p).ok_or_else(malformed)?;
    }
    let database = take_cstr(&mut p).filter(|d| !d.is_empty());
    let collation = (p.len() >= 2).then(|| p[0]);
    Ok(ChangeUser { user, database, collation })
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_fields() {
        let mut p = b"bob\0".to_vec();
        p.push(20);
        p.extend_from_slice(&[9; 20]);
        p.extend_from_slice(b"shop\0\x2d\x00mysql_native_password\0");
        let c = parse_change_user(&p, cap::SECURE_CONNECTION).expect("parses");
        assert_eq!(
            c,
            ChangeUser { user: "bob".into(), database: Some("shop".into()), collation: Some(45) }
        );
        assert!(parse_change_user(b"bob", cap::SECURE_CONNECTION).is_err());
        assert!(parse_change_user(b"bob\0\x05ab", cap::SECURE_CONNECTION).is_err());
    }
}
