//! Human duration strings: `250ms`, `30s`, `5m`, `1h`, `1d`, and combinations like `1m30s`.

use std::time::Duration;

use crate::Error;

/// Parses a human duration. A bare number is refused: the unit must be explicit.
pub fn parse_duration(text: &str) -> Result<Duration, Error> {
    let text = text.trim();
    let bad = |why| Error::BadDuration { text: text.to_owned(), why };
    if text.is_empty() {
        return Err(bad("empty"));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let value: u64 = rest[..digits].parse().map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" => Duration::from_secs(value.saturating_mul(60)),
            "h" => Duration::from_secs(value.saturating_mul(3600)),
            "d" => Duration::from_secs(value.saturating_mul(86_400)),
            "" => return Err(bad("missing unit (ms, s, m, h, d)")),
            _ => return Err(bad("unknown unit (ms, s, m, h, d)")),
        };
        total = total.saturating_add(part);
    }
    Ok(total)
}

/// Formats a duration the way `parse_duration` reads it (largest exact unit).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match s {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse_duration("250ms").ok(), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s").ok(), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m").ok(), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h").ok(), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1m30s").ok(), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 2d ").ok(), Some(Duration::from_secs(172_800)));
    }

    #[test]
    fn refuses_missing_or_unknown_units() {
        let missing = parse_duration("30").err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(missing, "invalid duration \"30\": missing unit (ms, s, m, h, d)");
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("99999999999999999999s").is_err());
    }

    #[test]
    fn format_round_trips() {
        for text in ["250ms", "30s", "5m", "2h", "0s"] {
            let d = parse_duration(text).unwrap_or_default();
            assert_eq!(format_duration(d), text);
        }
    }
}
