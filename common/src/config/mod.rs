//! Configuration helpers shared by both binaries: YAML loading, human durations, secrets.

mod duration;
mod secret;

pub use duration::{format_duration, parse_duration};
pub use secret::Secret;

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::Error;

/// Reads and parses a YAML file into `T`; errors name the file, the key and the line.
pub fn load_yaml<T: DeserializeOwned>(path: &Path) -> Result<T, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| Error::ConfigRead { path: path.to_owned(), source })?;
    serde_saphyr::from_str(&text)
        .map_err(|e| Error::ConfigParse { path: path.to_owned(), message: message_of(&e) })
}

/// Parses YAML text that is not a file's (a test's, an example's) into `T`; an error says what
/// the parser said, with line and column.
pub fn parse_yaml<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_saphyr::from_str(text).map_err(|e| Error::ConfigInvalid(message_of(&e)))
}

/// The parser's message for a person: the key and the line.
fn message_of(e: &serde_saphyr::Error) -> String {
    e.render_with_formatter(&serde_saphyr::UserMessageFormatter)
}

/// Serde helper for `Duration` fields written as human strings (`250ms`, `30s`, `5m`, `1h`).
pub mod serde_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    /// Deserializes a human duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(de)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}
