#!/usr/bin/env bash
# The project's test command (README, CI): installs what is missing, checks formatting and
# lints, starts a throwaway MariaDB on a free port under a temp dir, runs every test against
# it, stops it again, and fuzzes each parser of network bytes for FUZZ_SECONDS (15) each.
#
#   scripts/test.sh            # everything: what CI runs
#   scripts/test.sh --quick    # the core: fmt, clippy, the unit tests and the QUICK_TESTS
#                              # end-to-end binaries; no other target, Wine, qemu or fuzzing
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
QUICK=0
case "${1:-}" in
    --quick) QUICK=1 ;;
    "") ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
# The quick run's end-to-end binaries: relaying, fidelity, logins, the docs and configs kept
# true, reloads, resumes and the real clients.
QUICK_TESTS=(docs configs relay fidelity prepared passthrough multi_statements infile
    mariadb_cli bad_input reload resume streams check)
# CI builds each crate once: no incremental caches (about 2 GB under target/ otherwise); the
# quick run keeps them, to reuse a developer's builds. The disk is reported at the start and
# the end, since a full disk fails tests far from its cause.
((QUICK)) || export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
echo "== disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free here at the start"

ensure_test_packages
# The other targets: Windows (mingw, run under Wine), static Linux (musl), aarch64 (under qemu).
((QUICK)) || ensure_packages gcc-mingw-w64-x86-64 wine64 musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
CLIENTS="$PWD/target/test-clients"
echo "== test clients (PyMySQL, mysql-connector-python, node mysql2, Oracle Connector/J) under $CLIENTS"
install_test_clients "$CLIENTS"

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
echo "== cargo build (binaries used by the end-to-end tests)"
cargo build --workspace --locked

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-test.XXXXXX")
cleanup() {
    stop_mariadb "$WORK/mariadb"
    # Wine's server for the tests' Windows profile lingers a few seconds after its programs.
    [[ -d $WORK/wineprefix ]] && WINEPREFIX="$WORK/wineprefix" "$(dirname "$(wine_loader_path)")/wineserver" -k 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

if ((!QUICK)); then
    echo "== the other targets (scripts/release.sh, dev profile): Windows, static Linux, aarch64"
    TARGETS=(x86_64-pc-windows-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-gnu)
    scripts/release.sh --profile dev --out "$WORK/dist" "${TARGETS[@]}"
    # Code that only Windows compiles (the service) is linted as the rest.
    cargo clippy --locked -p sidecar --target x86_64-pc-windows-gnu --all-targets -- -D warnings
    mkdir -p "$WORK/targets"
    for target in "${TARGETS[@]}"; do ln -s "$PWD/target/$target/debug" "$WORK/targets/$target"; done
    # The Windows sidecar beside the DLL Wine lacks, and a Windows profile made before the tests.
    wine_stage target/x86_64-pc-windows-gnu/debug/sidecar.exe "$WORK/windows"
    export WINEPREFIX="$WORK/wineprefix" SQLTUNNEL_TEST_WINE SQLTUNNEL_TEST_WINDOWS_DIR="$WORK/windows"
    SQLTUNNEL_TEST_WINE=$(wine_loader_path)
    WINEDEBUG=-all "$SQLTUNNEL_TEST_WINE" "$WORK/windows/sidecar.exe" --version
    # Wine's service manager gives a service 10 s to reach its dispatcher, Windows 30 s; on a
    # loaded machine a start took longer than 10 s. Wine reads ServicesPipeTimeout as a string,
    # when its service manager starts: the profile's server (and with it that manager) exits
    # before the tests.
    WINEDEBUG=-all "$SQLTUNNEL_TEST_WINE" reg add 'HKLM\System\CurrentControlSet\Control' \
        /v ServicesPipeTimeout /t REG_SZ /d 30000 /f
    "$(dirname "$SQLTUNNEL_TEST_WINE")/wineserver" -w
    export SQLTUNNEL_TEST_TARGETS_DIR="$WORK/targets"
fi

MYSQL_PORT=$(free_port)
echo "== starting MariaDB on 127.0.0.1:$MYSQL_PORT"
start_mariadb "$WORK/mariadb" "$MYSQL_PORT"

echo "== cargo test"
# What the tests write to the temp dir (configs, certificates, nginx prefixes, logs) goes
# under $WORK, removed at exit; nginx's workers (user nobody) must reach their temp paths.
mkdir -p "$WORK/tmp"
chmod 755 "$WORK" "$WORK/tmp"
set +e
export SQLTUNNEL_TEST_PYTHON="$CLIENTS/venv/bin/python" SQLTUNNEL_TEST_NODE_MODULES="$CLIENTS/node/node_modules" SQLTUNNEL_TEST_MYSQL_JAR="$CLIENTS/jars/mysql-connector-j-8.0.33.jar"
SELECTION=(--workspace)
((QUICK)) && SELECTION=(--workspace --lib --bins "${QUICK_TESTS[@]/#/--test=}")
TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$MYSQL_PORT SQLTUNNEL_TEST_MYSQL_CA="$WORK/mariadb/tls/ca.pem" cargo test "${SELECTION[@]}" --locked --no-fail-fast -- --test-threads=4 2>&1 | tee "$WORK/cargo-test.log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole run, summed over every test binary.
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$WORK/cargo-test.log"
echo "== disk: target/ holds $(du -sh target | cut -f1), $(df -h --output=avail . | tail -1 | tr -d ' ') free"
((status == 0)) || exit "$status"

((QUICK)) && exit 0
echo "== fuzzing each parser of network bytes briefly (scripts/fuzz.sh)"
FUZZ_PROFILE=dev scripts/fuzz.sh "${FUZZ_SECONDS:-15}"
