#!/usr/bin/env bash
# Runs test files of node-mysql2's own suite directly against a throwaway MariaDB and through
# the tunnel (the binaries in $BIN, default target/debug: `cargo build -p transport -p sidecar`
# first), over a stream and over requests, and prints each outcome. node-mysql2's code is not part of this repository:
# CHECKOUT is a working tree of it (a `git clone https://github.com/sidorares/node-mysql2`);
# its dependencies, poku and tsx (which runs the TypeScript test files on any Node) are
# installed by npm under a temp dir, the checkout itself is left as it was.
# Usage: scripts/mysql2_tests.sh CHECKOUT [TEST_FILE...]
#        (default: test/integration/test-pool-disconnect.test.mts)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

CHECKOUT=$(cd "${1:?usage: scripts/mysql2_tests.sh CHECKOUT [TEST_FILE...]}" && pwd)
shift
TESTS=("${@:-test/integration/test-pool-disconnect.test.mts}")
BIN=${BIN:-target/debug}
for bin in transport sidecar; do
    [[ -x $BIN/$bin ]] || { echo "$BIN/$bin is missing: cargo build -p $bin" >&2; exit 1; }
done
ensure_packages mariadb-server mariadb-client
command -v npm >/dev/null || ensure_packages nodejs npm

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-mysql2.XXXXXX")
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true; stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT

# A copy of the checkout with its runtime dependencies, and poku and tsx in a directory above
# it (module resolution walks up to it; the suite's own dev tools are not needed).
mkdir -p "$WORK/tools" "$WORK/suite"
(cd "$CHECKOUT" && tar --exclude=./node_modules --exclude=./.git -cf - .) | tar -xf - -C "$WORK/suite"
(cd "$WORK/suite" && npm install --omit=dev --ignore-scripts --no-audit --no-fund >/dev/null)
(cd "$WORK/tools" && echo '{"private": true}' >package.json &&
    npm install --ignore-scripts --no-audit --no-fund poku@4 tsx >/dev/null)
ln -s "$WORK/tools/node_modules" "$WORK/node_modules"

db_port=$(free_port)
start_mariadb "$WORK/mariadb" "$db_port" >/dev/null

# run NAME PORT: every test file against PORT, a line each.
run() {
    local name=$1 port=$2 test status
    for test in "${TESTS[@]}"; do
        status=passed
        (cd "$WORK/suite" && CI=1 MYSQL_HOST=127.0.0.1 MYSQL_PORT=$port MYSQL_USER=app \
            MYSQL_PASSWORD=app-pw MYSQL_DATABASE=tunnel_test \
            timeout 120 "$WORK/tools/node_modules/.bin/tsx" "$test") >"$WORK/$name.log" 2>&1 ||
            status="FAILED (its output: below)"
        printf '%-9s %s: %s\n' "$name" "$test" "$status"
        [[ $status == passed ]] || sed 's/^/    /' "$WORK/$name.log"
    done
}

run direct "$db_port"
for stream in on off; do
    server=$(free_port) port=$(free_port)
    transport_config configs "127.0.0.1:$db_port" "$server" "$WORK/transport.yaml"
    sidecar_config configs "$server" "$port" "$WORK/sidecar.yaml" "$stream"
    "$BIN/transport" --config "$WORK/transport.yaml" 2>"$WORK/transport-$stream.log" &
    PIDS+=($!)
    wait_port "$server"
    "$BIN/sidecar" --config "$WORK/sidecar.yaml" 2>"$WORK/sidecar-$stream.log" &
    PIDS+=($!)
    wait_port "$port"
    run "stream:$stream" "$port"
    kill "${PIDS[-2]}" "${PIDS[-1]}"
    wait "${PIDS[-2]}" "${PIDS[-1]}" 2>/dev/null || true
done
