#!/usr/bin/env bash
# Installs what building and testing need on Debian or Ubuntu, once (with sudo when not root):
# the Debian packages (a C compiler, MariaDB, nginx, a JDK, Python, node…) and the test clients
# under target/test-clients/ (PyMySQL, mysql-connector-python, node's mysql2 and oidc-provider,
# Oracle's Connector/J). Then `cargo build` and any `cargo test -p e2e --test NAME` run
# without scripts/test.sh: each test binary starts a MariaDB of its own (tests/harness/mariadb.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

command -v cargo >/dev/null || {
    echo "cargo not found: install Rust 1.85 or newer with rustup (https://rustup.rs)" >&2
    exit 1
}
ensure_test_packages
echo "== test clients under $PWD/target/test-clients"
install_test_clients "$PWD/target/test-clients"
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
echo "== ready: cargo build, then cargo test -p e2e --test relay (CONTRIBUTING.md)"
