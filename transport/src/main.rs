//! `transport` binary: the shared command line (config, logging, runtime, listener) around
//! [`transport::run`].

use std::process::ExitCode;

use common::cli::Binary;

/// jemalloc, whose background thread hands freed memory back to the system within seconds;
/// glibc's allocator kept what a burst of large answers had used (tens of MiB, measured) for
/// the life of the process.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let bin = Binary {
        name: env!("CARGO_PKG_NAME"),
        version: env!("CARGO_PKG_VERSION"),
        about: env!("CARGO_PKG_DESCRIPTION"),
    };
    let gen_token = common::cli::Tool {
        name: "gen-token",
        about: "Print a new random token (256 bits, hex) for `tokens` and a sidecar's transport.token",
        run: transport::identity::tools::print_new_token,
    };
    let hash_token = common::cli::Tool {
        name: "hash-token",
        about: "Read a token on standard input and print its SHA-256, for an identity's token_sha256",
        run: transport::identity::tools::print_token_hash,
    };
    common::cli::main_with_tools(
        bin,
        |listener, config: transport::TransportConfig, shutdown, reloads| {
            transport::run_with_reloads(listener, config, shutdown, reloads)
        },
        &[],
        &[gen_token, hash_token],
    )
}
