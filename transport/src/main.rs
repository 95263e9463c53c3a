//! `transport` binary: the shared command line (config, logging, runtime, listener) around
//! [`transport::run`].

use std::process::ExitCode;

use common::cli::Binary;

fn main() -> ExitCode {
    let bin = Binary {
        name: env!("CARGO_PKG_NAME"),
        version: env!("CARGO_PKG_VERSION"),
        about: env!("CARGO_PKG_DESCRIPTION"),
    };
    common::cli::main(bin, |listener, config: transport::TransportConfig, shutdown, reloads| {
        transport::run_with_reloads(listener, config, shutdown, reloads)
    })
}
