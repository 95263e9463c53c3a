//! `sidecar` binary: parse the CLI, load the config, start logging, serve until Ctrl-C.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use common::telemetry::LogFormat;
use tokio_util::sync::CancellationToken;
use sidecar::SidecarConfig;

/// sqltunnel sidecar: a local MySQL server that tunnels to a transport over HTTP.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Configuration file (YAML).
    #[arg(long, env = "SQLTUNNEL_CONFIG")]
    config: PathBuf,
    /// Validate the configuration and exit.
    #[arg(long)]
    check: bool,
    /// Override `listen`.
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Override `log.level`.
    #[arg(long)]
    log_level: Option<String>,
    /// Override `log.format` (`text` or `json`).
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut config = SidecarConfig::load(&cli.config).with_context(|| format!("config {}", cli.config.display()))?;
    if cli.check {
        println!("{}: ok", cli.config.display());
        return Ok(());
    }
    if let Some(listen) = cli.listen {
        config.listen = listen;
    }
    if let Some(level) = cli.log_level {
        config.log.level = level;
    }
    if let Some(format) = cli.log_format {
        config.log.format = if format == "json" { LogFormat::Json } else { LogFormat::Text };
    }
    common::telemetry::init(&config.log)?;
    let listener = tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("bind {}", config.listen))?;
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        on_signal.cancel();
    });
    sidecar::run(listener, config, shutdown).await?;
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
            return;
        }
    }
    drop(ctrl_c.await);
}
