//! Logging setup shared by both binaries: `tracing` with text or JSON output.

use serde::Deserialize;
use tracing_subscriber::EnvFilter;

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
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { level: "info".into(), format: LogFormat::Text }
    }
}

/// Changes the log filter of the running process (a reloaded `log.level`).
pub type LevelReload = Box<dyn Fn(&str) -> Result<(), Error> + Send + Sync>;

/// Installs the global subscriber. `RUST_LOG`, when set, wins over the configured level, then
/// and after a reload. Returns what changes the level later.
pub fn init(config: &LogConfig) -> Result<LevelReload, Error> {
    let from_env = std::env::var_os("RUST_LOG").is_some();
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&config.level))
        .map_err(|e| Error::Telemetry(e.to_string()))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let reload: Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync> = match config.format {
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.try_init().map_err(|e| Error::Telemetry(e.to_string()))?;
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()))
        }
        LogFormat::Json => {
            let builder = builder.json().with_filter_reloading();
            let handle = builder.reload_handle();
            builder.try_init().map_err(|e| Error::Telemetry(e.to_string()))?;
            Box::new(move |f| handle.reload(f).map_err(|e| e.to_string()))
        }
    };
    Ok(Box::new(move |level| {
        if from_env {
            return Ok(());
        }
        let filter = EnvFilter::try_new(level).map_err(|e| Error::Telemetry(e.to_string()))?;
        reload(filter).map_err(Error::Telemetry)
    }))
}
