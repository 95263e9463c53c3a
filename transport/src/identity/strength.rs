//! Whether a plain token is strong enough to stand at the door: not a placeholder from the
//! docs or examples, and at least 128 bits as its characters can carry them.

/// Least strength of a token, in bits.
pub const MIN_BITS: f64 = 128.0;

/// Words that mark a token copied from an example rather than made (`transport gen-token`).
const PLACEHOLDERS: [&str; 7] =
    ["change-me", "changeme", "change_me", "replace-me", "example", "placeholder", "your-token"];

/// Why `token` cannot be used, if it cannot: it names a placeholder, or it carries fewer than
/// [`MIN_BITS`]. Strength is length times the bits a character of its alphabet carries
/// (hexadecimal 4, letters and digits 5.95, with symbols 6.55): an upper bound, so a token it
/// refuses is weak, whatever the token's maker.
pub fn weakness(token: &str) -> Option<String> {
    let lower = token.to_ascii_lowercase();
    if let Some(word) = PLACEHOLDERS.iter().find(|w| lower.contains(*w)) {
        return Some(format!(
            "a token holds the placeholder {word:?}: make one with `transport gen-token`"
        ));
    }
    let bits = bits_of(token);
    (bits < MIN_BITS).then(|| {
        format!(
            "a token of {} characters carries at most {bits:.0} bits, under {MIN_BITS:.0}: make one with `transport gen-token`",
            token.chars().count()
        )
    })
}

/// The most bits `token` can carry, from its length and the alphabet its characters use.
fn bits_of(token: &str) -> f64 {
    let hex = token.chars().all(|c| c.is_ascii_hexdigit());
    let alphabet: f64 = if hex {
        16.0
    } else {
        let classes = [
            token.chars().any(|c| c.is_ascii_lowercase()),
            token.chars().any(|c| c.is_ascii_uppercase()),
            token.chars().any(|c| c.is_ascii_digit()),
            token.chars().any(|c| !c.is_ascii_alphanumeric()),
        ];
        let sizes = [26.0, 26.0, 10.0, 32.0];
        classes.iter().zip(sizes).filter(|(on, _)| **on).map(|(_, n)| n).sum()
    };
    // A token of one repeated character carries nothing, whatever its length.
    let distinct = {
        let mut seen: Vec<char> = token.chars().collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    };
    if distinct < 2 {
        return 0.0;
    }
    token.chars().count() as f64 * alphabet.log2()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_short_tokens_are_weak() {
        for weak in ["change-me-please", "CHANGE-ME-0123456789abcdefghijklmnopq", "test-token-123"]
        {
            assert!(weakness(weak).is_some(), "{weak}");
        }
        // 31 hex digits: 124 bits.
        assert!(weakness("0123456789abcdef0123456789abcde").is_some());
        assert!(weakness(&"a".repeat(64)).is_some(), "one character repeated");
    }

    #[test]
    fn made_tokens_are_strong() {
        // `transport gen-token`: 43 characters of base64url (256 bits).
        assert_eq!(weakness("q3Jx0v8W2mZtK1aPz9Lr7YcN4bHs6EuG5dFk8TiQw0o"), None);
        // 32 hex digits: 128 bits.
        assert_eq!(weakness("0123456789abcdef0123456789abcdef"), None);
        // `openssl rand -base64 24`.
        assert_eq!(weakness("pH9t3Wq+Zk2xL0v8/RmYcB1aNs4dUe7f"), None);
    }
}
