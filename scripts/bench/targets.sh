#!/usr/bin/env bash
# The benchmarks' targets, each started once per run (sourced by scripts/bench.sh, after
# scripts/lib.sh): a scratch MariaDB, the tunnel (a transport and a sidecar per carrier),
# two chained socat, wstunnel (built from source into a cache directory when missing), and
# sysbench against any of them. Every process started goes into PIDS; the exit trap of
# bench_scratch stops them all and the MariaDB, and removes the scratch directory.

PIDS=()

# bench_scratch NAME: a scratch directory ($WORK, removed at exit, with $WORK/tmp) and a
# MariaDB on $db_port (its pid in $db_pid).
bench_scratch() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-$1.XXXXXX")
    trap bench_cleanup EXIT
    db_port=$(free_port)
    start_mariadb "$WORK/mariadb" "$db_port" >/dev/null
    db_pid=$(cat "$WORK/mariadb/mysqld.pid")
    mkdir -p "$WORK/tmp"
}

# Stops every process started (quietly: the shell reports killed jobs), then the MariaDB.
# (Only named pids are waited for: a bare `wait` would wait for the MariaDB too.)
bench_cleanup() {
    if ((${#PIDS[@]})); then
        { kill -9 "${PIDS[@]}"; wait "${PIDS[@]}"; } 2>/dev/null || true
    fi
    stop_mariadb "$WORK/mariadb"
    rm -rf "$WORK"
}

# sb TEST PORT PS_MODE THREADS ACTION [SYSBENCH_OPTION...]: sysbench TEST on the tunnel_test
# table through the target on PORT.
sb() {
    sysbench "$1" --mysql-host=127.0.0.1 --mysql-port="$2" --mysql-user=app \
        --mysql-password=app-pw --mysql-db=tunnel_test --tables=1 --table-size=10000 \
        --threads="$4" --db-ps-mode="$3" "${@:6}" "$5"
}

# WSTUNNEL: wstunnel's binary (TCP over WebSocket, Rust and tokio; not on crates.io), built
# from its source into a cache directory when missing (WSTUNNEL_SRC: a checkout, else a clone
# of its GitHub repository at WSTUNNEL_TAG); empty, with a note, when that is not possible.
ensure_wstunnel() {
    local tag=${WSTUNNEL_TAG:-v10.6.2} dir src
    dir=${WSTUNNEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sqltunnel-bench/wstunnel-$tag}
    WSTUNNEL=$dir/bin/wstunnel
    [[ -x $WSTUNNEL ]] && return
    echo "building wstunnel $tag into $dir (once, several minutes)"
    src=${WSTUNNEL_SRC:-$dir/src}
    if [[ ! -d $src ]]; then
        git clone --quiet --depth 1 --branch "$tag" https://github.com/erebe/wstunnel "$src" \
            >"$WORK/wstunnel-build.log" 2>&1 || true
    fi
    if [[ -d $src ]] && (cd "$src" && cargo build --quiet --release --locked -p wstunnel-cli) \
        >>"$WORK/wstunnel-build.log" 2>&1; then
        mkdir -p "$dir/bin" && cp "$src/target/release/wstunnel" "$dir/bin/"
    else
        echo "note: wstunnel could not be built, its lines are skipped:"
        tail -3 "$WORK/wstunnel-build.log"
        WSTUNNEL=
    fi
}

# start_wstunnel [WRAPPER...]: both halves of wstunnel (each under WRAPPER, e.g. valgrind);
# sets WS_PORT and WS_PIDS ("server client").
start_wstunnel() {
    local server
    server=$(free_port) WS_PORT=$(free_port)
    "$@" "$WSTUNNEL" server --restrict-to "127.0.0.1:$db_port" "ws://127.0.0.1:$server" >"$WORK/wstunnel-server.log" 2>&1 &
    PIDS+=($!)
    WS_PIDS=$!
    wait_port "$server"
    "$@" "$WSTUNNEL" client -L "tcp://127.0.0.1:$WS_PORT:127.0.0.1:$db_port" "ws://127.0.0.1:$server" >"$WORK/wstunnel-client.log" 2>&1 &
    PIDS+=($!)
    WS_PIDS+=" $!"
}

# start_tunnel BIN_DIR CONFIG_DIR TAG CARRIER... [-- WRAPPER...]: a transport from BIN_DIR and
# one sidecar per CARRIER (stream: `stream: auto`, the default; requests: `stream: off`), with
# CONFIG_DIR's example configs, each under WRAPPER; sets PORT_<TAG>_<CARRIER> and
# PID_<TAG>_{TRANSPORT,<CARRIER>}.
start_tunnel() {
    local bin=$1 configs=$2 tag=$3 tport port mode carriers=() wrapper=()
    shift 3
    while (($#)) && [[ $1 != -- ]]; do carriers+=("$1"); shift; done
    (($#)) && shift && wrapper=("$@")
    tport=$(free_port)
    transport_config "$configs" "127.0.0.1:$db_port" "$tport" "$WORK/$tag-transport.yaml"
    "${wrapper[@]}" "$bin/transport" --config "$WORK/$tag-transport.yaml" >"$WORK/$tag-transport.log" 2>&1 &
    PIDS+=($!)
    printf -v "PID_${tag}_TRANSPORT" '%s' $!
    for carrier in "${carriers[@]}"; do
        port=$(free_port) mode=auto
        [[ $carrier == requests ]] && mode=off
        sidecar_config "$configs" "$tport" "$port" "$WORK/$tag-$carrier.yaml" "$mode"
        "${wrapper[@]}" "$bin/sidecar" --config "$WORK/$tag-$carrier.yaml" >"$WORK/$tag-$carrier.log" 2>&1 &
        PIDS+=($!)
        printf -v "PID_${tag}_${carrier^^}" '%s' $!
        printf -v "PORT_${tag}_${carrier^^}" '%s' "$port"
    done
    wait_port "$tport" 60
    for carrier in "${carriers[@]}"; do
        local var="PORT_${tag}_${carrier^^}"
        wait_port "${!var}" 60
    done
}

# start_socat: a plain byte relay of two hops, as a model of any two-hop tunnel; sets
# SOCAT_PORT.
start_socat() {
    local mid
    SOCAT_PORT=$(free_port) mid=$(free_port)
    socat TCP-LISTEN:"$mid",bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:"$db_port",nodelay &
    PIDS+=($!)
    socat TCP-LISTEN:"$SOCAT_PORT",bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:"$mid",nodelay &
    PIDS+=($!)
    wait_port "$mid"
    wait_port "$SOCAT_PORT"
}

# median: the median of the numbers on standard input.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
