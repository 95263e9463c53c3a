//! `transport` binary: parse the CLI, load the config, start logging, serve until Ctrl-C.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use common::telemetry::LogFormat;
use tokio_util::sync::CancellationToken;
use transport::TransportConfig;

/// sqltunnel transport: serves MySQL sessions over HTTP to sidecars.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Configuration file (YAML).
    #[arg(long, env = "SQLTUNNEL_CONFIG")]
    config: PathBuf,
    /// Validate the configuration, print what is wrong, and exit.
    #[arg(long)]
    check: bool,
    /// Override `listen`.
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Override `log.level`.
    #[arg(long)]
    log_level: Option<String>,
    /// Override `log.format`.
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

fn main() -> ExitCode {
    match start(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("transport: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn start(cli: Cli) -> anyhow::Result<()> {
    let config = TransportConfig::load(&cli.config)?;
    if cli.check {
        println!("{}: ok", cli.config.display());
        return Ok(());
    }
    common::runtime::build(config.worker_threads)?.block_on(serve(cli, config))
}

async fn serve(cli: Cli, mut config: TransportConfig) -> anyhow::Result<()> {
    config.listen = cli.listen.unwrap_or(config.listen);
    if let Some(level) = cli.log_level {
        config.log.level = level;
    }
    if let Some(format) = cli.log_format {
        config.log.format = if format == "json" { LogFormat::Json } else { LogFormat::Text };
    }
    common::telemetry::init(&config.log)?;
    let listener = common::runtime::bind(config.listen)
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        common::runtime::wait_for_signal().await;
        on_signal.cancel();
    });
    transport::run(listener, config, shutdown).await?;
    Ok(())
}
