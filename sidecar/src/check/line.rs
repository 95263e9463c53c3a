//! One line of `sidecar check`'s report: how a step went, and what was found or is to fix.

use std::fmt;

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Fine.
    Ok,
    /// Could not be checked; not an error.
    Warn,
    /// Wrong: the line says the fix.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Line {
    /// How it went.
    pub outcome: Outcome,
    /// The step: `dns`, `connect`, `proxy`, `tls`, `certificate`, `transport`, `path`,
    /// `token`, `round trip`, `stream`, `upstream`, `body limit`, `exposure`.
    pub step: &'static str,
    /// What was found, and for a failure the fix.
    pub text: String,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.outcome {
            Outcome::Ok => "ok",
            Outcome::Warn => "warn",
            Outcome::Fail => "FAIL",
        };
        write!(f, "{mark:<5} {:<12} {}", self.step, self.text)
    }
}

/// A step that went well.
pub fn ok(step: &'static str, text: String) -> Line {
    Line { outcome: Outcome::Ok, step, text }
}

/// A step that could not be checked.
pub fn warn(step: &'static str, text: String) -> Line {
    Line { outcome: Outcome::Warn, step, text }
}

/// A step that failed; `text` ends with the fix.
pub fn fail(step: &'static str, text: String) -> Line {
    Line { outcome: Outcome::Fail, step, text }
}
