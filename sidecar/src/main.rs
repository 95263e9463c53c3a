//! `sidecar` binary: the shared command line (config, logging, runtime, listener) around
//! [`sidecar::run`].

use std::process::ExitCode;

use common::cli::Binary;

fn main() -> ExitCode {
    let bin = Binary {
        name: env!("CARGO_PKG_NAME"),
        version: env!("CARGO_PKG_VERSION"),
        about: env!("CARGO_PKG_DESCRIPTION"),
    };
    let check = common::cli::Subcommand {
        name: "check",
        about: "Reach the transport, check the token, list the upstreams with their versions, measure the round trip; one line per step, with the fix for each that fails",
        run: sidecar::check::run,
    };
    common::cli::main_with(
        bin,
        |listener, config: sidecar::SidecarConfig, shutdown, reloads| {
            sidecar::run_with_reloads(listener, config, shutdown, reloads)
        },
        &[check],
    )
}
