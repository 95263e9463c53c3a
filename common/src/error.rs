//! The one error type of the `common` crate.

use std::path::PathBuf;

/// Everything that can go wrong in shared code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A frame or control message on the HTTP wire could not be decoded.
    #[error("malformed wire data: {0}")]
    Wire(&'static str),
    /// A step's request says something no step can mean (a header's bad value, a field that
    /// contradicts another).
    #[error("{0}")]
    BadStep(String),
    /// A frame announced a payload larger than the configured limit.
    #[error("frame of {size} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// Announced payload size.
        size: usize,
        /// Largest payload accepted.
        limit: usize,
    },
    /// A configuration file could not be read.
    #[error("cannot read {path}: {source}")]
    ConfigRead {
        /// The file that could not be read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A configuration file is not valid YAML for its schema (names the key and line).
    #[error("{path}: {message}")]
    ConfigParse {
        /// The offending file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A configuration parsed but a value is not acceptable.
    #[error("invalid configuration: {0}")]
    ConfigInvalid(String),
    /// A secret could not be resolved from the environment or a file.
    #[error("secret {key}: {reason}")]
    Secret {
        /// The config key that names the secret.
        key: String,
        /// Why it could not be resolved.
        reason: String,
    },
    /// A packet of the MySQL compressed protocol does not inflate to its announced length
    /// (a broken zlib stream, or a lie).
    #[error("a compressed packet does not inflate to its announced {0} bytes")]
    CompressedCorrupt(usize),
    /// A packet of the MySQL compressed protocol would inflate beyond what is accepted.
    #[error("a compressed packet of {0} bytes exceeds the limit")]
    CompressedTooLarge(usize),
    /// A resumed answer does not say where it resumes from (or not readably).
    #[error("the resumed answer does not say where it resumes from")]
    ResumeUnstated,
    /// A resumed answer starts elsewhere than where the answer broke.
    #[error("the answer resumed from byte {from}, not from byte {broke_at} where it broke")]
    ResumedElsewhere {
        /// Where it says it resumes.
        from: u64,
        /// Where the answer broke: the bytes received.
        broke_at: u64,
    },
    /// A resumed answer does not continue the bytes received: their checksums differ.
    #[error(
        "the resumed answer does not continue the {from} bytes received (checksum {stated:08x}, not {kept:08x})"
    )]
    ResumeDiffers {
        /// Where it resumes.
        from: u64,
        /// The CRC-32 it states of the bytes before.
        stated: u32,
        /// The CRC-32 of the bytes received.
        kept: u32,
    },
    /// A log filter (`log.level`, `RUST_LOG`) that is not one. (Two fields, not three: every
    /// `Result` of this crate's error, and of the halves' that hold it, is as large as its
    /// largest variant.)
    #[error("invalid configuration: {what} {said}")]
    LogFilter {
        /// Where it came from.
        what: &'static str,
        /// The filter as written, and what is wrong with it.
        said: String,
    },
    /// A duration (`30s`, `1m30s`) that is not one.
    #[error("invalid duration {text:?}: {why}")]
    BadDuration {
        /// The text as written.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The logging subscriber could not be installed.
    #[error("cannot initialise logging: {0}")]
    Telemetry(String),
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_error_is_no_larger_than_its_largest_variant_before_log_filters() {
        // A path and a message: what every `Result` of this error (and of the halves' errors
        // that hold it) moves at each return on a command's path.
        assert!(
            std::mem::size_of::<super::Error>() <= 56,
            "{}",
            std::mem::size_of::<super::Error>()
        );
    }
}
