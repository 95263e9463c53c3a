//! A secret value (password, token) that never prints itself, resolvable from inline text,
//! an environment variable or a file.

use std::fmt;

use serde::Deserialize;

use crate::Error;

/// A secret string. `Debug` and `Display` print `***`, so it cannot leak into logs.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; call only where it is used, never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Resolves a secret given inline, as `*_env` (variable name) or as `*_file` (path).
    /// Exactly one of the three may be set; `key` names the config key in errors.
    pub fn resolve(
        key: &str,
        inline: Option<Secret>,
        env: Option<&str>,
        file: Option<&str>,
    ) -> Result<Option<Secret>, Error> {
        let given = [inline.is_some(), env.is_some(), file.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(Error::Secret {
                key: key.into(),
                reason: format!("set only one of {key}, {key}_env, {key}_file"),
            });
        }
        if let Some(var) = env {
            let value = std::env::var(var).map_err(|_| Error::Secret {
                key: format!("{key}_env"),
                reason: format!("environment variable {var} is not set"),
            })?;
            return Ok(Some(Secret(value)));
        }
        if let Some(path) = file {
            let value = std::fs::read_to_string(path).map_err(|e| Error::Secret {
                key: format!("{key}_file"),
                reason: format!("cannot read {path}: {e}"),
            })?;
            return Ok(Some(Secret(value.trim_end_matches(['\r', '\n']).to_owned())));
        }
        Ok(inline)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_itself() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "*** ***");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn resolves_from_file_and_refuses_two_sources() {
        let path = std::env::temp_dir().join(format!("sqltunnel-secret-{}", std::process::id()));
        std::fs::write(&path, "from-file\n").unwrap_or_default();
        let got = Secret::resolve("token", None, None, path.to_str()).ok().flatten();
        assert_eq!(got.as_ref().map(Secret::expose), Some("from-file"));
        let _ = std::fs::remove_file(&path);
        assert!(Secret::resolve("token", Some(Secret::new("a")), Some("X"), None).is_err());
        assert!(Secret::resolve("token", None, Some("SQLTUNNEL_SURELY_UNSET_VAR"), None).is_err());
    }
}
