//! Logging setup shared by both binaries: `tracing` with text or JSON output to standard error or
//! `log.file` (opened again on a reload), colours only on a terminal, and filters (`log.level`,
//! `RUST_LOG`) checked strictly, by `--check` too.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriter, MutexGuardWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::Error;
use crate::log_line::OneLine;

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
        parse_filter("log.level", &self.level).map(drop)
    }
}

/// A filter directive, or an error naming where it came from (`what`) and what is wrong. A
/// bare word is taken as a level only if it is one: `verbose` is refused, not read as a target.
fn parse_filter(what: &'static str, directives: &str) -> Result<EnvFilter, Error> {
    let bad = |why: String| Error::LogFilter {
        what,
        said: format!("{directives:?} is not a valid log filter: {why}"),
    };
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

/// What applies a new filter to the running subscriber.
type SetLevel = Box<dyn Fn(&str) -> Result<(), Error> + Send + Sync>;

/// The running log, as a reload changes it: its filter (a reloaded `log.level`) and its file
/// (opened again, after a rotation moved it).
pub struct Logging {
    set_level: SetLevel,
    file: Option<LogFile>,
}

impl Logging {
    /// Applies a reloaded `log.level`, unless `RUST_LOG` set the filter at start.
    pub fn set_level(&self, level: &str) -> Result<(), Error> {
        (self.set_level)(level)
    }

    /// Opens `log.file` again at its path, so that the lines after it go to a new file once
    /// a rotation has moved the old one; on an error the old file stays in use.
    pub fn reopen(&self) -> Result<(), Error> {
        let Some(log) = &self.file else { return Ok(()) };
        let file = open_log_file(&log.path, true)?;
        *log.file.lock() = file;
        Ok(())
    }
}

/// `log.file`: its path and the file lines are written to, shared with the subscriber.
struct LogFile {
    path: PathBuf,
    file: SharedFile,
}

/// The open log file, which a reload replaces under the subscriber's feet.
#[derive(Clone)]
struct SharedFile(Arc<Mutex<std::fs::File>>);

impl SharedFile {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::fs::File> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<'a> MakeWriter<'a> for SharedFile {
    type Writer = MutexGuardWriter<'a, std::fs::File>;

    fn make_writer(&'a self) -> Self::Writer {
        self.0.as_ref().make_writer()
    }
}

/// Opens (`create`: or creates, readable by its owner only, whatever the umask) a log file
/// for appending.
fn open_log_file(path: &Path, create: bool) -> Result<std::fs::File, Error> {
    let mut options = std::fs::OpenOptions::new();
    options.create(create).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(|e| Error::Telemetry(format!("log.file {}: {e}", path.display())))
}

/// The filter start-up applies: `RUST_LOG` when set (then `true`), else `log.level`.
fn start_filter(config: &LogConfig) -> Result<(EnvFilter, bool), Error> {
    match std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty()) {
        Some(value) => parse_filter("RUST_LOG", &value).map(|f| (f, true)),
        None => parse_filter("log.level", &config.level).map(|f| (f, false)),
    }
}

/// Checks what [`init`] would refuse, without installing or creating anything: the filter
/// (`RUST_LOG` or `log.level`) and that `log.file` can be opened for appending (an existing
/// file, or a folder to create it in).
pub fn check(config: &LogConfig) -> Result<(), Error> {
    start_filter(config)?;
    let Some(path) = &config.file else { return Ok(()) };
    if path.exists() {
        return open_log_file(path, false).map(drop);
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if parent.is_dir() {
        Ok(())
    } else {
        Err(Error::Telemetry(format!(
            "log.file {}: its folder {} does not exist",
            path.display(),
            parent.display()
        )))
    }
}

/// Installs the global subscriber. `RUST_LOG`, when set, wins over the configured level, then
/// and after a reload. Returns what changes the log later.
pub fn init(config: &LogConfig) -> Result<Logging, Error> {
    let (filter, from_env) = start_filter(config)?;
    // Colours only on a terminal (log files and journald get plain text), and never with
    // NO_COLOR set.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // Each event on one line, whatever a logged value holds (`log_line`).
    let (writer, ansi, file) = match &config.file {
        Some(path) => {
            let file = SharedFile(Arc::new(Mutex::new(open_log_file(path, true)?)));
            let log = LogFile { path: path.clone(), file: file.clone() };
            (BoxMakeWriter::new(OneLine::new(file, false)), false, Some(log))
        }
        None => (BoxMakeWriter::new(OneLine::new(std::io::stderr, ansi)), ansi, None),
    };
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    let reload: Box<dyn Fn(EnvFilter) -> Result<(), Error> + Send + Sync> = match config.format {
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder
                .finish()
                .with(filter_fn(may_log))
                .try_init()
                .map_err(|e| Error::Telemetry(e.to_string()))?;
            Box::new(move |f| handle.reload(f).map_err(|e| Error::Telemetry(e.to_string())))
        }
        LogFormat::Json => {
            let builder = builder.json().with_filter_reloading();
            let handle = builder.reload_handle();
            builder
                .finish()
                .with(filter_fn(may_log))
                .try_init()
                .map_err(|e| Error::Telemetry(e.to_string()))?;
            Box::new(move |f| handle.reload(f).map_err(|e| Error::Telemetry(e.to_string())))
        }
    };
    let set_level = Box::new(move |level: &str| {
        if from_env {
            return Ok(());
        }
        reload(parse_filter("log.level", level)?)
    });
    Ok(Logging { set_level, file })
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
            let e = parse_filter("log.level", bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("log.level") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn check_refuses_what_start_up_would_and_creates_nothing() {
        let dir = std::env::temp_dir().join(format!("sqltunnel-logcheck-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let with_file = |file: PathBuf| LogConfig { file: Some(file), ..LogConfig::default() };
        let new_file = dir.join("new.log");
        assert!(check(&with_file(new_file.clone())).is_ok());
        assert!(!new_file.exists(), "--check creates no log file");
        let e = check(&with_file(dir.join("gone/sidecar.log"))).err().map(|e| e.to_string());
        assert!(e.unwrap_or_default().contains("does not exist"));
        if std::env::var_os("RUST_LOG").is_none() {
            let bad = LogConfig { level: "verbose".into(), ..LogConfig::default() };
            assert!(check(&bad).is_err());
        }
        drop(std::fs::remove_dir_all(&dir));
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
