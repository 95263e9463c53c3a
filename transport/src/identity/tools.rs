//! Token tools of the command line: `transport gen-token` and `transport hash-token`.

use std::io::Read;
use std::process::ExitCode;

use super::config::{sha256, to_hex};

/// A new token: 32 bytes from the operating system's CSPRNG, as 64 hex digits.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(to_hex(&bytes))
}

/// `transport gen-token`: prints [`new_token`].
pub fn print_new_token() -> ExitCode {
    match new_token() {
        Ok(token) => {
            println!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("transport gen-token: no randomness from the operating system: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `token_sha256` of a token given on standard input (its first line, without the line
/// end): the token never appears in a command line or a shell history.
pub fn hash_token(input: &str) -> Option<String> {
    let token = input.lines().next().unwrap_or("").trim_end_matches('\r');
    (!token.is_empty()).then(|| to_hex(&sha256(token.as_bytes())))
}

/// `transport hash-token`: reads a token on standard input, prints its `token_sha256`.
pub fn print_token_hash() -> ExitCode {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().take(64 << 10).read_to_string(&mut input) {
        eprintln!("transport hash-token: cannot read standard input: {e}");
        return ExitCode::FAILURE;
    }
    match hash_token(&input) {
        Some(hash) => {
            println!("{hash}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "transport hash-token: give the token on standard input, e.g. `transport gen-token | tee token | transport hash-token`"
            );
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_tokens_are_long_hex_and_distinct() {
        let (a, b) = (new_token().expect("a token"), new_token().expect("another"));
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn hashes_the_first_line_only() {
        let expected = to_hex(&sha256(b"abc"));
        assert_eq!(hash_token("abc\n").as_deref(), Some(expected.as_str()));
        assert_eq!(hash_token("abc\r\nmore").as_deref(), Some(expected.as_str()));
        assert_eq!(hash_token("\n"), None);
    }
}
