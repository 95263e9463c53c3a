//! `sidecar` binary: the shared command line (config, logging, runtime, listener) around
//! [`sidecar::run`].

use std::process::ExitCode;

use common::cli::Binary;

/// jemalloc where it builds from source with the system's C compiler (not Windows): a
/// command's few small allocations cost less than with glibc's allocator (measured on the
/// relay path), and memory a burst of large answers used goes back to the system.
#[cfg(not(windows))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // `sidecar service …` (a Windows service) reads its own arguments: the service manager
    // starts `sidecar service run --config PATH`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "service") {
        return sidecar::service::main(&args[1..]);
    }
    let bin = Binary {
        name: env!("CARGO_PKG_NAME"),
        version: env!("CARGO_PKG_VERSION"),
        about: env!("CARGO_PKG_DESCRIPTION"),
    };
    let check = common::cli::Subcommand {
        name: "check",
        about: "Reach the transport, check the token, list the upstreams with their versions, measure the round trip; one line per step, with the fix for each that fails",
        flags: &[],
        run: |config, _| sidecar::check::run(config),
    };
    let login = common::cli::Subcommand {
        name: "login",
        about: "Log in at the identity provider of transport.login: in the browser, or with --device on any other device; the login is kept, and renewed by the sidecar",
        flags: &[(
            "device",
            "log in on another device with a code (no browser here: SSH, a server)",
        )],
        run: sidecar::login::login_command,
    };
    let logout = common::cli::Subcommand {
        name: "logout",
        about: "Forget the login that `sidecar login` kept",
        flags: &[],
        run: sidecar::login::logout_command,
    };
    let service = common::cli::Tool {
        name: "service",
        about: "Windows: install | uninstall | start | stop the sidecar as a service (install takes --config PATH)",
        run: || sidecar::service::main(&[]),
    };
    common::cli::main_with_tools(
        bin,
        |listener, config: sidecar::SidecarConfig, shutdown, reloads| async move {
            let taking_over = "--take-over is the transport's".to_owned();
            let listener = listener.ok_or(common::Error::ConfigInvalid(taking_over))?;
            sidecar::run_with_reloads(listener, config, shutdown, reloads).await
        },
        &[check, login, logout],
        &[service],
    )
}
