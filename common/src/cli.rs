//! The command line both binaries share: `--config` (or `SQLTUNNEL_CONFIG`; else the binary's
//! default path; else, for the sidecar, flags alone), `--check`, the overrides, and the
//! start-up sequence (config, logging, runtime, listener, Ctrl-C).

use std::fmt::Display;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::telemetry::{LogConfig, LogFormat};

/// Command-line options.
#[derive(Debug, Parser)]
struct Cli {
    /// Configuration file (YAML); default: the sidecar's in the user's config directory
    /// (~/.config/sqltunnel/sidecar.yaml; on Windows %APPDATA%\sqltunnel\sidecar.yaml, in
    /// PowerShell $env:APPDATA\sqltunnel\sidecar.yaml), the transport's
    /// /etc/sqltunnel/transport.yaml.
    #[arg(long, global = true, env = "SQLTUNNEL_CONFIG")]
    config: Option<PathBuf>,
    /// Validate the configuration, print what is wrong, and exit.
    #[arg(long)]
    check: bool,
    /// Override `listen`.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Override `log.level`.
    #[arg(long)]
    log_level: Option<String>,
    /// Override `log.format`.
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
    /// Transport: take over the listener and sessions of the transport running with the same
    /// configuration, through its `take_over_socket`; with none running, start as usual.
    #[arg(long)]
    take_over: bool,
    #[command(flatten)]
    link: LinkFlags,
}

/// The sidecar's link to its transport, given on the command line: with them the sidecar
/// runs without a config file.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LinkFlags {
    /// Sidecar: the transport's URL (sets `transport.url`).
    #[arg(long, global = true, env = "SQLTUNNEL_TRANSPORT")]
    pub transport: Option<String>,
    /// Sidecar: the environment variable holding the token (sets `transport.token_env`;
    /// without a config file, SQLTUNNEL_TOKEN by default).
    #[arg(long, global = true)]
    pub token_env: Option<String>,
}

impl LinkFlags {
    /// True when any is given.
    pub fn any(&self) -> bool {
        self.transport.is_some() || self.token_env.is_some()
    }
}

impl Cli {
    /// The configuration: the file named, else the default file if it exists, else (the
    /// sidecar) one made of the flags; then the link flags applied.
    fn load<C: ServiceConfig>(&self) -> Result<(C, String), String> {
        let path = self.config.clone().or_else(|| C::default_path().filter(|p| p.exists()));
        let (mut config, source) = match path {
            Some(path) => {
                (C::load(&path).map_err(|e| chain(e.as_ref()))?, path.display().to_string())
            }
            None => (C::from_flags(&self.link).map_err(|e| chain(e.as_ref()))?, "flags".into()),
        };
        if self.link.any() {
            config.apply_flags(&self.link).map_err(|e| chain(e.as_ref()))?;
        }
        Ok((config, source))
    }

    /// Applies the command line's overrides to a loaded configuration.
    fn override_config<C: ServiceConfig>(&self, config: &mut C) {
        if let Some(listen) = self.listen {
            *config.listen() = listen;
        }
        if let Some(level) = &self.log_level {
            config.log().level = level.clone();
        }
        if let Some(format) = &self.log_format {
            config.log().format = if format == "json" { LogFormat::Json } else { LogFormat::Text };
        }
    }
}

/// What a binary's configuration offers to the shared start-up.
pub trait ServiceConfig: Sized {
    /// Loads and validates a config file.
    fn load(path: &Path) -> Result<Self, Box<dyn std::error::Error>>;
    /// The listen address.
    fn listen(&mut self) -> &mut SocketAddr;
    /// The log section.
    fn log(&mut self) -> &mut LogConfig;
    /// Where the config file is when `--config` is not given.
    fn default_path() -> Option<PathBuf>;
    /// A configuration from the command line alone (no file).
    fn from_flags(flags: &LinkFlags) -> Result<Self, Box<dyn std::error::Error>>;
    /// Applies the link flags to a loaded configuration, and validates it again.
    fn apply_flags(&mut self, flags: &LinkFlags) -> Result<(), Box<dyn std::error::Error>>;
}

/// Implements [`ServiceConfig`] for a config struct with `listen` and `log`
/// fields and an inherent `load(&Path)`.
#[macro_export]
macro_rules! service_config {
    ($config:ty) => {
        impl $crate::cli::ServiceConfig for $config {
            fn load(path: &::std::path::Path) -> Result<Self, Box<dyn ::std::error::Error>> {
                Ok(<$config>::load(path)?)
            }
            fn listen(&mut self) -> &mut ::std::net::SocketAddr {
                &mut self.listen
            }
            fn log(&mut self) -> &mut $crate::telemetry::LogConfig {
                &mut self.log
            }
            fn default_path() -> Option<::std::path::PathBuf> {
                <$config>::default_path()
            }
            fn from_flags(
                flags: &$crate::cli::LinkFlags,
            ) -> Result<Self, Box<dyn ::std::error::Error>> {
                Ok(<$config>::from_flags(flags)?)
            }
            fn apply_flags(
                &mut self,
                flags: &$crate::cli::LinkFlags,
            ) -> Result<(), Box<dyn ::std::error::Error>> {
                Ok(<$config>::apply_flags(self, flags)?)
            }
        }
    };
}

/// What a binary was built from: `commit <git commit>, <target triple>`.
pub const BUILD: &str =
    concat!("commit ", env!("SQLTUNNEL_COMMIT"), ", ", env!("SQLTUNNEL_TARGET"));

/// Name, version and one-line description of a binary (from its Cargo metadata).
#[derive(Debug, Clone, Copy)]
pub struct Binary {
    /// Program name.
    pub name: &'static str,
    /// Version.
    pub version: &'static str,
    /// What it is.
    pub about: &'static str,
}

/// Configurations reloaded on SIGHUP, for the service to apply what it can.
pub type Reloads<C> = tokio::sync::mpsc::UnboundedReceiver<C>;

/// A subcommand a binary adds (e.g. `sidecar check`): it runs with the loaded configuration
/// instead of the service.
pub struct Subcommand<C> {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line of help.
    pub about: &'static str,
    /// Its switches (`--name`), each with a line of help.
    pub flags: &'static [(&'static str, &'static str)],
    /// What it does, given the switches set; its exit code is the process's.
    pub run: fn(C, &[&'static str]) -> ExitCode,
}

/// A subcommand that needs no configuration (e.g. `transport gen-token`).
pub struct Tool {
    /// Its name on the command line.
    pub name: &'static str,
    /// One line of help.
    pub about: &'static str,
    /// What it does; its exit code is the process's.
    pub run: fn() -> ExitCode,
}

/// Parses the command line and runs `serve` until Ctrl-C or SIGTERM. SIGHUP reloads the
/// config file: the log level is applied here, the rest is handed to the service; a file
/// that does not load is refused with an error line, and the running configuration stays.
pub fn main<C, F, Fut, E>(bin: Binary, serve: F) -> ExitCode
where
    C: ServiceConfig + Send + 'static,
    F: FnOnce(Option<TcpListener>, C, CancellationToken, Reloads<C>) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    main_with(bin, serve, &[])
}

/// [`main`] with subcommands.
pub fn main_with<C, F, Fut, E>(bin: Binary, serve: F, subcommands: &[Subcommand<C>]) -> ExitCode
where
    C: ServiceConfig + Send + 'static,
    F: FnOnce(Option<TcpListener>, C, CancellationToken, Reloads<C>) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    main_with_tools(bin, serve, subcommands, &[])
}

/// [`main_with`], and subcommands that need no configuration.
pub fn main_with_tools<C, F, Fut, E>(
    bin: Binary,
    serve: F,
    subcommands: &[Subcommand<C>],
    tools: &[Tool],
) -> ExitCode
where
    C: ServiceConfig + Send + 'static,
    F: FnOnce(Option<TcpListener>, C, CancellationToken, Reloads<C>) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let version = Box::leak(format!("{} ({BUILD})", bin.version).into_boxed_str());
    let mut command = Cli::command().name(bin.name).version(&*version).about(bin.about);
    for sub in subcommands {
        let mut sub_command = clap::Command::new(sub.name).about(sub.about);
        for (flag, help) in sub.flags {
            let arg = clap::Arg::new(*flag).long(*flag).help(*help);
            sub_command = sub_command.arg(arg.action(clap::ArgAction::SetTrue));
        }
        command = command.subcommand(sub_command);
    }
    for tool in tools {
        command = command.subcommand(clap::Command::new(tool.name).about(tool.about));
    }
    let matches = command.get_matches();
    if let Some(tool) = tools.iter().find(|t| matches.subcommand_name() == Some(t.name)) {
        return (tool.run)();
    }
    let chosen = subcommands.iter().find(|s| matches.subcommand_name() == Some(s.name));
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string());
    let result = match chosen {
        Some(sub) => match cli.and_then(|cli| cli.load::<C>()) {
            Ok((config, _)) => {
                let set = matches.subcommand_matches(sub.name).map_or_else(Vec::new, |m| {
                    sub.flags.iter().map(|(f, _)| *f).filter(|f| m.get_flag(f)).collect()
                });
                return (sub.run)(config, &set);
            }
            Err(e) => Err(e),
        },
        None => cli.and_then(|cli| start(cli, serve)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {e}", bin.name);
            ExitCode::FAILURE
        }
    }
}

fn start<C, F, Fut, E>(cli: Cli, serve: F) -> Result<(), String>
where
    C: ServiceConfig + Send + 'static,
    F: FnOnce(Option<TcpListener>, C, CancellationToken, Reloads<C>) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let (mut config, source) = cli.load::<C>()?;
    cli.override_config(&mut config);
    if cli.check {
        // What start-up would refuse next: the log filter (`RUST_LOG`, `--log-level`) and file.
        crate::telemetry::check(config.log()).map_err(|e| e.to_string())?;
        println!("{source}: ok");
        return Ok(());
    }
    let logging = crate::telemetry::init(config.log()).map_err(|e| e.to_string())?;
    let runtime = crate::runtime::build().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let addr = *config.listen();
        // Taking over, the listener comes from the running process.
        let listener = match cli.take_over {
            true => None,
            false => Some(
                crate::runtime::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?,
            ),
        };
        let shutdown = CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            crate::runtime::wait_for_signal().await;
            on_signal.cancel();
        });
        let (reloaded, reloads) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(reload_on_hangup(cli, logging, reloaded));
        serve(listener, config, shutdown, reloads).await.map_err(|e| e.to_string())
    })
}

/// On each SIGHUP, opens `log.file` again (a rotation moved it), loads the config file again
/// and hands it on; never ends the process.
async fn reload_on_hangup<C: ServiceConfig>(
    cli: Cli,
    logging: crate::telemetry::Logging,
    reloaded: tokio::sync::mpsc::UnboundedSender<C>,
) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else { return };
        while hangups.recv().await.is_some() {
            if let Err(e) = logging.reopen() {
                tracing::error!(error = %e, "log.file not opened again; logging goes on to the old file");
            }
            let mut config = match cli.load::<C>() {
                Ok((config, _)) => config,
                Err(e) => {
                    tracing::error!(error = %e, "reload refused; the running configuration stays");
                    continue;
                }
            };
            cli.override_config(&mut config);
            if let Err(e) = logging.set_level(&config.log().level) {
                tracing::error!(error = %e, "log.level not applied");
            }
            if reloaded.send(config).is_err() {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    drop((cli, logging, reloaded));
}

/// An error and its causes, joined.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // A cause that its effect already quotes is not said twice.
        let cause = s.to_string();
        if !text.contains(&cause) {
            text.push_str(&format!(": {cause}"));
        }
        source = s.source();
    }
    text
}
