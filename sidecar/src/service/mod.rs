//! `sidecar service install|uninstall|start|stop`: the sidecar as a Windows service (through
//! the `windows-service` crate), with its config path; the service manager runs
//! `sidecar service run --config PATH`, which serves until the service is stopped and then
//! drains as on Ctrl-C. Logs go to `log.file`, by default `sidecar.log` beside the config.
//! Elsewhere the command says which unit to use instead (systemd, launchd).

use std::process::ExitCode;

mod action;
#[cfg(windows)]
mod windows;

pub use action::{Action, SERVICE_NAME, parse};

/// `sidecar service …` with the arguments after `service`.
pub fn main(args: &[String]) -> ExitCode {
    let action = match parse(args) {
        Ok(action) => action,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(action) {
        Ok(said) => {
            if !said.is_empty() {
                println!("{said}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sidecar service: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(windows)]
fn run(action: Action) -> Result<String, String> {
    windows::run(action)
}

#[cfg(not(windows))]
fn run(_: Action) -> Result<String, String> {
    Err(if cfg!(target_os = "macos") {
        "Windows services only: on macOS use the launchd agent configs/launchd/com.sqltunnel.sidecar.plist".into()
    } else {
        "Windows services only: on Linux use the systemd user unit configs/systemd/sqltunnel-sidecar.service".into()
    })
}
