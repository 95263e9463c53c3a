#!/usr/bin/env bash
# Quick start: builds the release binaries, starts a throwaway MariaDB (unless
# SQLTUNNEL_UPSTREAM=host:port names a real one), then the transport and the sidecar with the
# example configs, and prints what to type into DBeaver or `mysql`. Ctrl-C stops it all.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

cargo build --release --locked
WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-demo.XXXXXX")
PIDS=()
cleanup() {
    trap - INT TERM EXIT
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    stop_mariadb "$WORK/mariadb"
    rm -rf "$WORK"
    echo "stopped"
}
trap cleanup INT TERM EXIT

upstream=${SQLTUNNEL_UPSTREAM:-}
if [[ -z "$upstream" ]]; then
    ensure_packages mariadb-server mariadb-client
    db_port=$(free_port)
    echo "starting a throwaway MariaDB on 127.0.0.1:$db_port (user app / app-pw, database tunnel_test)"
    start_mariadb "$WORK/mariadb" "$db_port"
    upstream="127.0.0.1:$db_port"
fi

transport_port=$(free_port)
sidecar_port=3306
(exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null && sidecar_port=$(free_port)

transport_config configs "$upstream" "$transport_port" "$WORK/transport.yaml"
sidecar_config configs "$transport_port" "$sidecar_port" "$WORK/sidecar.yaml"

target/release/transport --config "$WORK/transport.yaml" 2>"$WORK/transport.log" &
PIDS+=($!)
wait_port "$transport_port"
target/release/sidecar --config "$WORK/sidecar.yaml" 2>"$WORK/sidecar.log" &
PIDS+=($!)
wait_port "$sidecar_port"

if [[ -z "${SQLTUNNEL_UPSTREAM:-}" ]]; then
    login="  User:     app
  Password: app-pw
  Database: tunnel_test

  mariadb -h127.0.0.1 -P$sidecar_port -uapp -papp-pw tunnel_test

Any other user of this MariaDB logs in with its own password (auth.mode: passthrough)."
else
    login="  User and password: your own account on $upstream (auth.mode: passthrough: the
  login goes to that server, which decides)

  mariadb -h127.0.0.1 -P$sidecar_port -u<user> -p"
fi
cat <<INFO

sqltunnel is running.
  Host:     127.0.0.1 (not localhost, which some clients take for a Unix socket)
  Port:     $sidecar_port
$login

DBeaver: either driver, default settings, SSL off (the sidecar offers SSL only with
client_tls.enabled). A MySQL 8 account on caching_sha2_password without SSL also needs the
driver property allowPublicKeyRetrieval=true; ed25519 accounts need the MariaDB driver.
More in docs/clients.md.

Logs: $WORK/transport.log, $WORK/sidecar.log. Press Ctrl-C to stop.
INFO
wait
