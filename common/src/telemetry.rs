//! Logging setup shared by both binaries: `tracing` with text or JSON output, colours only on a
//! terminal, and filters (`log.level`, `RUST_LOG`) checked strictly.

use std::io::IsTerminal;

use serde::Deserialize;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::Error;

/// Output format of the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The `log` section of both config files.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// Filter directive, e.g. `info` or `sidecar=debug,info`.
    pub level: String,
    /// `text` or `json`.
    pub format: LogFormat,
    /// Append logs to this file instead of standard error (a Windows service has none).
    pub file: Option<std::path::PathBuf>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { level: "info".into(), format: LogFormat::Text, file: None }
    }
}

impl LogConfig {
    /// Checks `level` as start-up would.
    pub fn validate(&self) -> Result<(), Error> {
        parse_filter("log.level", &self.level).map(drop).map_err(Error::ConfigInvalid)
    }
}

/// A filter directive, or an error naming where it came from (`what`) and what is wrong. A
/// bare word is taken as a level only if it is one: `verbose` is refused, not read as a target.
fn parse_filter(what: &str, directives: &str) -> Result<EnvFilter, String> {
    let bad = |why: String| format!("{what} {directives:?} is not a valid log filter: {why}");
    for directive in directives.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, level)| level);
        let bare = !directive.contains(['=', ':', '[']);
        if (bare || directive.contains('='))
            && level.parse::<tracing::level_filters::LevelFilter>().is_err()
        {
            return Err(bad(format!(
                "{level:?} is not a level (off, error, warn, info, debug, trace)"
            )));
        }
    }
    EnvFilter::builder().parse(directives).map_err(|e| bad(e.to_string()))
}

/// Libraries whose debug and trace lines may carry secrets: the WebSocket library traces every
/// frame with its payload (tokens, login packets).
const SILENCED_BELOW_INFO: [&str; 2] = ["tungstenite", "tokio_tungstenite"];

/// False for a line of [`SILENCED_BELOW_INFO`] below info, whatever the filter asks: no
/// directive, however specific, lets a secret reach a log.
fn may_log(meta: &tracing::Metadata<'_>) -> bool {
    *meta.level() <= tracing::Level::INFO
        || !SILENCED_BELOW_INFO.iter().any(|t| {
            meta.target()
                .strip_prefix(t)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
}

/// Changes the log filter of the running process (a reloaded `log.level`).
pub type LevelReload = Box<dyn Fn(&str) -> Result<(), Error> + Send + Sync>;

/// Installs the global subscriber. `RUST_LOG`, when set, wins over the configured level, then
/// and after a reload. Returns what changes the level later.
pub fn init(config: &LogConfig) -> Result<LevelReload, Error> {
    let env = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
    let from_env = env.is_some();
    let filter = match &env {
        Some(value) => parse_filter("RUST_LOG", value),
        None => parse_filter("log.level", &config.level),
    }
    .map_err(Error::Telemetry)?;
    // Colours only on a terminal (log files and journald get plain text), and never with
    // NO_COLOR set.
    let (writer, terminal) = match &config.file {
        Some(path) => {
            let mut options = std::fs::OpenOptions::new();
            options.create(true).append(true);
            // Only its owner reads it, whatever the umask.
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = options.open(path);
            let file =
                file.map_err(|e| Error::Telemetry(format!("log.file {}: {e}", path.display())))?;
            (BoxMakeWriter::new(std::sync::Mutex::new(file)), false)
        }
        None => (BoxMakeWriter::new(std::io::stderr), std::io::stderr().is_terminal()),
    };
    let ansi = terminal && std::env::var_os("NO_COLOR").is_none();
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    let reload: Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync> = match config.format {
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder
                .finish()
                .with(filter_fn(may_log))
                .try_init()
                .map_err(|e| Error::Telemetry(e.to_string()))?;
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()))
        }
        LogFormat::Json => {
            let builder = builder.json().with_filter_reloading();
            let handle = builder.reload_handle();
            builder
                .finish()
                .with(filter_fn(may_log))
                .try_init()
                .map_err(|e| Error::Telemetry(e.to_string()))?;
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()))
        }
    };
    Ok(Box::new(move |level| {
        if from_env {
            return Ok(());
        }
        reload(parse_filter("log.level", level).map_err(Error::ConfigInvalid)?)
            .map_err(Error::Telemetry)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_checked_strictly() {
        for good in ["info", "warn,transport=debug", "sidecar::connection=trace", "off", "DEBUG"] {
            assert!(parse_filter("log.level", good).is_ok(), "{good}");
        }
        for bad in ["verbose", "info,transport=loud", "a=b=c"] {
            let e = parse_filter("log.level", bad).err().unwrap_or_default();
            assert!(e.contains("log.level") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn the_websocket_library_never_logs_below_info() {
        use tracing::Level;
        use tracing::callsite::Identifier;
        use tracing::metadata::{Kind, Metadata};
        struct Site;
        impl tracing::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!("not asked")
            }
        }
        static SITE: Site = Site;
        let line = |target: &'static str, level: Level| {
            let fields = tracing::field::FieldSet::new(&[], Identifier(&SITE));
            may_log(&Metadata::new("l", target, level, None, None, None, fields, Kind::EVENT))
        };
        assert!(!line("tungstenite::protocol", Level::TRACE));
        assert!(!line("tokio_tungstenite", Level::DEBUG));
        assert!(line("tungstenite::protocol", Level::INFO));
        assert!(line("tungstenite_like_crate", Level::TRACE));
        assert!(line("transport::stream", Level::TRACE));
    }
}
