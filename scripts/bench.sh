#!/usr/bin/env bash
# Benchmarks, measured in the same run, interleaved: a direct connection, two chained socat
# (a plain two-hop byte relay, the floor of any two-hop tunnel), wstunnel (TCP over WebSocket;
# built from source into a cache directory when missing), the tunnel over requests (one HTTP
# request per command, `stream: off`) and the tunnel over a WebSocket stream (the default):
#   - sysbench oltp_point_select, text protocol, 1 and 8 threads (QPS ratios to direct)
#   - sysbench oltp_read_only, prepared statements, 1 thread (QPS ratio)
#   - a 1,000,000-row SELECT read by the mariadb client (wall-time ratio to direct)
# Each runs ROUNDS times (default 3), each round starting one target further on; medians are
# printed, with the CPU time, user and system, the transport and the sidecar spent per query
# (from /proc/<pid>/stat). Both halves run with the example configs as they are (log level
# info, as a user's would).
# BASELINE_BIN=DIR (a directory with other `transport` and `sidecar` binaries, e.g. an older
# build) and BASELINE_CONFIGS=DIR (their example configs) add its columns, measured
# interleaved in the same run: an A/B comparison of two builds.
# `--wan [ROUNDS]` runs the network bench instead: the shaping proxy at a 50 ms round trip
# between a direct client and MariaDB and between the sidecar and the transport (round trips
# per query, new connection, prepared execute, LOAD DATA LOCAL; PyMySQL's connect(), cold and
# warm, over requests and over a stream, with the release binaries as processes; the
# Connector/J connect sequence; a 1M-row SELECT at 20 Mbit/s), see tests/benches/wan.rs.
# `--faults [OPERATIONS_PER_CLIENT] [SEED]` runs the long seeded random fault run instead (see
# tests/benches/faults.rs): operations, cuts, client errors, garbled answers, writes lost or
# doubled, peak and final RSS.
# `--instructions [QUERIES]` counts, with callgrind, the instructions each half of the tunnel
# (over a stream) and of wstunnel (when the main run has built it) executes per point select,
# over QUERIES (default 3,000) on one thread: exact where the sampled CPU time is noisy; then,
# with a dump before each recv, send and epoll_wait, how many of them fall between a wake-up,
# a read and the write it causes (the critical path at one thread) and after the write.
# `--take-over [ROUNDS] [SECONDS]` runs point selects and 4 MB answers through repeated
# take-overs (a new transport every 2 s) and without, interleaved (tests/benches/take_over.rs):
# throughput of each, the ratio, and the longest a command took.
# `--attack [ROUNDS] [SECONDS] [REQUESTS]` runs the door's long pass instead: the attack bench
# (tests/benches/attack.rs: a sidecar's logins and queries with no attack and under a tokenless
# flood, token guessing, trickled bodies and silent connections, interleaved, with ratios to no
# attack) and the seeded door fuzzer with REQUESTS requests (default 5,000; tests/door/fuzz.rs).
# Usage: scripts/bench.sh [seconds-per-sysbench-run] | scripts/bench.sh --wan [ROUNDS] |
#        scripts/bench.sh --attack [ROUNDS] [SECONDS] [REQUESTS] |
#        scripts/bench.sh --faults [OPERATIONS_PER_CLIENT] [SEED] |
#        scripts/bench.sh --instructions [QUERIES] |
#        scripts/bench.sh --take-over [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# A scratch directory ($WORK, removed at exit) with a MariaDB on $db_port and $WORK/tmp, for
# the benches that run their own.
scratch_mariadb() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-$1.XXXXXX")
    trap 'stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT
    db_port=$(free_port)
    start_mariadb "$WORK/mariadb" "$db_port"
    mkdir -p "$WORK/tmp"
}

if [[ "${1:-}" == "--wan" ]]; then
    ensure_packages mariadb-server mariadb-client libmariadb-java
    command -v javac >/dev/null || ensure_packages default-jdk-headless
    scratch_mariadb wan
    install_test_clients "$PWD/target/test-clients"
    cargo build --release --locked -p transport -p sidecar
    TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port cargo bench -p e2e --bench wan --locked -- "${2:-7}"
    exit 0
fi

if [[ "${1:-}" == "--attack" ]]; then
    ensure_packages mariadb-server mariadb-client
    cargo build --release --locked -p transport -p sidecar
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-attack.XXXXXX")
    trap 'stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT
    db_port=$(free_port)
    start_mariadb "$WORK/mariadb" "$db_port"
    mkdir -p "$WORK/tmp"
    export TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port
    cargo bench -p e2e --bench attack --locked -- "${2:-3}" "${3:-8}"
    # The fuzzer checks invariants, not speed: the test build, as scripts/test.sh's short pass.
    cargo build --locked -p transport -p sidecar
    SQLTUNNEL_DOOR_REQUESTS=${4:-5000} cargo test -p e2e --test door --locked -- fuzz:: --nocapture
    exit 0
fi

if [[ "${1:-}" == "--faults" ]]; then
    ensure_packages mariadb-server mariadb-client
    scratch_mariadb faults
    TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port cargo bench -p e2e --bench faults --locked -- "${2:-1500}" ${3:+"$3"}
    exit 0
fi

if [[ "${1:-}" == "--take-over" ]]; then
    ensure_packages mariadb-server mariadb-client
    scratch_mariadb take-over
    cargo build --release --locked -p transport -p sidecar
    TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port cargo bench -p e2e --bench take_over --locked -- "${2:-3}" "${3:-10}"
    exit 0
fi

if [[ "${1:-}" == "--instructions" ]]; then
    # Instructions per query on each half, counted by callgrind (deterministic where the
    # sampled CPU time of the main bench is noisy): the tunnel over a stream and wstunnel,
    # each half under valgrind while sysbench runs QUERIES point selects on one thread.
    QUERIES=${2:-3000}
    ensure_packages mariadb-server mariadb-client sysbench valgrind
    cargo build --release --locked
    WSTUNNEL=${WSTUNNEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sqltunnel-bench/wstunnel-${WSTUNNEL_TAG:-v10.6.2}}/bin/wstunnel
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-instructions.XXXXXX")
    PIDS=()
    # (Every pid is gone already after the last stop_pair: a failing kill must not end the trap
    # before MariaDB is stopped.)
    trap 'kill -9 "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true; stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT
    db_port=$(free_port)
    start_mariadb "$WORK/mariadb" "$db_port"
    sb() {
        sysbench oltp_point_select --mysql-host=127.0.0.1 --mysql-port="$1" --mysql-user=app \
            --mysql-password=app-pw --mysql-db=tunnel_test --tables=1 --table-size=10000 \
            --threads=1 --time=0 --events="$2" --db-ps-mode=disable "$3" >/dev/null
    }
    sb "$db_port" 1 prepare
    # callgrind NAME COMMAND...: COMMAND under callgrind (with the options in DUMPS), in the
    # background, its output in $WORK/NAME.out.
    DUMPS=()
    callgrind() { valgrind --tool=callgrind --dump-instr=no "${DUMPS[@]}" --callgrind-out-file="$WORK/$1.out" "${@:2}" >/dev/null 2>&1 & PIDS+=($!); }
    # measure NAME PORT SERVER_HALF_PID CLIENT_HALF_PID: Ir per query of each half.
    measure() {
        local name=$1 port=$2 half ir
        wait_port "$port"
        sb "$port" 300 run
        callgrind_control -z "$3" >/dev/null && callgrind_control -z "$4" >/dev/null
        sb "$port" "$QUERIES" run
        for half in 3 4; do callgrind_control -d "${!half}" >/dev/null; done
        for half in server client; do
            ir=$(callgrind_annotate "$(ls -S "$WORK/$name-$half.out".* | head -1)" 2>/dev/null |
                awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1 }')
            printf '%-8s %s half: %6d instructions per query\n' "$name" "$half" $((ir / QUERIES))
        done
    }
    # pair NAME: starts both halves of NAME (tunnel or wstunnel) under callgrind; sets PORT.
    pair() {
        local server
        server=$(free_port) PORT=$(free_port)
        if [[ $1 == tunnel ]]; then
            transport_config configs "127.0.0.1:$db_port" "$server" "$WORK/transport.yaml"
            sidecar_config configs "$server" "$PORT" "$WORK/sidecar.yaml"
            callgrind "$2-server" target/release/transport --config "$WORK/transport.yaml"
            callgrind "$2-client" target/release/sidecar --config "$WORK/sidecar.yaml"
        else
            callgrind "$2-server" "$WSTUNNEL" server --restrict-to "127.0.0.1:$db_port" "ws://127.0.0.1:$server"
            wait_port "$server"
            callgrind "$2-client" "$WSTUNNEL" client -L "tcp://127.0.0.1:$PORT:127.0.0.1:$db_port" "ws://127.0.0.1:$server"
        fi
    }
    # stop_pair: ends the last pair started (quietly: the shell reports killed jobs).
    stop_pair() { { kill -9 "${PIDS[-2]}" "${PIDS[-1]}"; wait "${PIDS[-2]}" "${PIDS[-1]}"; } 2>/dev/null || true; }
    # critical NAME: the same, with a dump before each recv, send and epoll_wait, over 300
    # queries: the instructions between a wake-up, the read and the write it causes, on the
    # critical path of each hop at one thread (scripts/critical_path.py).
    critical() {
        DUMPS=(--dump-line=no --dump-before=recv --dump-before=__libc_recv --dump-before=send
            --dump-before=__libc_send --dump-before=epoll_wait)
        pair "$1" "$1-critical"
        wait_port "$PORT"
        sb "$PORT" 100 run
        sb "$PORT" 300 run
        stop_pair
        DUMPS=()
        for half in server client; do
            echo "$1 $half half, between system calls:"
            python3 scripts/critical_path.py "$WORK/$1-critical-$half.out"
        done
    }
    NAMES=(tunnel)
    if [[ -x "$WSTUNNEL" ]]; then
        NAMES+=(wstunnel)
    else
        echo "note: no wstunnel at $WSTUNNEL (scripts/bench.sh builds it): its lines are skipped"
    fi
    for name in "${NAMES[@]}"; do
        pair "$name" "$name"
        measure "$name" "$PORT" "${PIDS[-2]}" "${PIDS[-1]}"
        stop_pair
    done
    for name in "${NAMES[@]}"; do critical "$name"; done
    exit 0
fi

SECONDS_PER_RUN=${1:-10}
ROUNDS=${ROUNDS:-3}
ensure_packages mariadb-server mariadb-client sysbench socat bc
cargo build --release --locked

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-bench.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    stop_mariadb "$WORK/mariadb"
    rm -rf "$WORK"
}
trap cleanup EXIT

db_port=$(free_port)
start_mariadb "$WORK/mariadb" "$db_port"

# One transport; two sidecars on it: one on WebSocket streams (stream: auto, the default),
# one on a request per command (stream: off, what nginx's defaults allow).
# start_tunnel BIN_DIR CONFIG_DIR TAG: starts a transport and both sidecars from BIN_DIR, sets
# PORT_<TAG>_STREAM, PORT_<TAG>_REQUESTS and PID_<TAG>_{TRANSPORT,STREAM,REQUESTS}.
start_tunnel() {
    local bin=$1 configs=$2 tag=$3 tport sport rport
    tport=$(free_port) sport=$(free_port) rport=$(free_port)
    transport_config "$configs" "127.0.0.1:$db_port" "$tport" "$WORK/$tag-transport.yaml"
    "$bin/transport" --config "$WORK/$tag-transport.yaml" 2>"$WORK/$tag-transport.log" &
    PIDS+=($!)
    printf -v "PID_${tag}_TRANSPORT" '%s' $!
    for carrier in stream requests; do
        local port=$sport mode=auto
        [[ $carrier == requests ]] && port=$rport mode=off
        sidecar_config "$configs" "$tport" "$port" "$WORK/$tag-$carrier.yaml" "$mode"
        "$bin/sidecar" --config "$WORK/$tag-$carrier.yaml" 2>"$WORK/$tag-$carrier.log" &
        PIDS+=($!)
        printf -v "PID_${tag}_${carrier^^}" '%s' $!
        printf -v "PORT_${tag}_${carrier^^}" '%s' "$port"
    done
    wait_port "$tport"
    wait_port "$sport"
    wait_port "$rport"
}
start_tunnel target/release configs T

# TARGETS: "name port [transport-pid sidecar-pid]", measured in this order each round.
TARGETS=("direct $db_port")

# A plain byte relay of two hops, as a model of any two-hop tunnel: two chained socat.
socat_port=$(free_port) socat_mid=$(free_port)
socat TCP-LISTEN:"$socat_mid",bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:"$db_port",nodelay &
PIDS+=($!)
socat TCP-LISTEN:"$socat_port",bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:"$socat_mid",nodelay &
PIDS+=($!)
wait_port "$socat_mid"
wait_port "$socat_port"
TARGETS+=("socat-2-hops $socat_port")

# wstunnel (TCP over WebSocket, Rust and tokio; not on crates.io): built from its source into
# a cache directory when missing (WSTUNNEL_SRC: a checkout, else a clone of its GitHub repository
# at WSTUNNEL_TAG), skipped with a note when that is not possible.
WSTUNNEL_TAG=${WSTUNNEL_TAG:-v10.6.2}
WSTUNNEL_DIR=${WSTUNNEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sqltunnel-bench/wstunnel-$WSTUNNEL_TAG}
if [[ ! -x "$WSTUNNEL_DIR/bin/wstunnel" ]]; then
    echo "building wstunnel $WSTUNNEL_TAG into $WSTUNNEL_DIR (once, several minutes)"
    src=${WSTUNNEL_SRC:-$WSTUNNEL_DIR/src}
    if [[ ! -d "$src" ]]; then
        git clone --quiet --depth 1 --branch "$WSTUNNEL_TAG" https://github.com/erebe/wstunnel "$src" \
            >"$WORK/wstunnel-build.log" 2>&1 || true
    fi
    if [[ -d "$src" ]] && (cd "$src" && cargo build --quiet --release --locked -p wstunnel-cli) \
        >>"$WORK/wstunnel-build.log" 2>&1; then
        mkdir -p "$WSTUNNEL_DIR/bin" && cp "$src/target/release/wstunnel" "$WSTUNNEL_DIR/bin/"
    else
        echo "note: wstunnel could not be built, its column is skipped:"
        tail -3 "$WORK/wstunnel-build.log"
    fi
fi
if [[ -x "$WSTUNNEL_DIR/bin/wstunnel" ]]; then
    ws_server=$(free_port) ws_client=$(free_port)
    "$WSTUNNEL_DIR/bin/wstunnel" server --restrict-to "127.0.0.1:$db_port" "ws://127.0.0.1:$ws_server" >"$WORK/wstunnel-server.log" 2>&1 &
    PIDS+=($!)
    wait_port "$ws_server"
    "$WSTUNNEL_DIR/bin/wstunnel" client -L "tcp://127.0.0.1:$ws_client:127.0.0.1:$db_port" "ws://127.0.0.1:$ws_server" >"$WORK/wstunnel-client.log" 2>&1 &
    PIDS+=($!)
    wait_port "$ws_client"
    TARGETS+=("wstunnel $ws_client")
fi
TARGETS+=("tunnel-requests $PORT_T_REQUESTS $PID_T_TRANSPORT $PID_T_REQUESTS")
TARGETS+=("tunnel-stream $PORT_T_STREAM $PID_T_TRANSPORT $PID_T_STREAM")

# A second transport + sidecars from BASELINE_BIN, for an A/B run.
if [[ -n "${BASELINE_BIN:-}" ]]; then
    start_tunnel "$BASELINE_BIN" "$BASELINE_CONFIGS" B
    TARGETS+=("baseline-requests $PORT_B_REQUESTS $PID_B_TRANSPORT $PID_B_REQUESTS")
    TARGETS+=("baseline-stream $PORT_B_STREAM $PID_B_TRANSPORT $PID_B_STREAM")
fi

# CPU seconds (user and system) a process has used so far.
cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }

sb() {
    local test=$1 port=$2 ps=$3 threads=$4 action=$5
    sysbench "$test" --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=app \
        --mysql-password=app-pw --mysql-db=tunnel_test --tables=1 --table-size=10000 \
        --threads="$threads" --time="$SECONDS_PER_RUN" --db-ps-mode="$ps" "$action"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
qps() { sb "$1" "$2" "$3" "$4" run | awk '/queries:/ { gsub(/\(/, "", $3); print $3 }'; }
big_select() {
    local port=$1 start end
    start=$(date +%s.%N)
    mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uapp -papp-pw --quick --batch \
        --skip-column-names -e "SELECT seq, REPEAT('x', 100), seq * 2 FROM seq_1_to_1000000" tunnel_test >/dev/null
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}
# half FILE N: the median of column N of FILE.
half() { awk -v n="$2" '{ print $n }' "$1" | median; }
# per_query FILE PID QUERIES BEFORE: appends "user system" microseconds per query since BEFORE.
per_query() {
    local hz after
    hz=$(getconf CLK_TCK)
    after=$(cpu_ticks "$2")
    awk -v a="$after" -v b="$4" -v q="$3" -v hz="$hz" 'BEGIN { split(a, x); split(b, y);
        printf "%.1f %.1f\n", (x[1] - y[1]) * 1e6 / hz / q, (x[2] - y[2]) * 1e6 / hz / q }' >>"$1"
}

sb oltp_point_select "$db_port" disable 1 prepare >/dev/null
WORKLOADS=("oltp_point_select disable 1" "oltp_point_select disable 8" "oltp_read_only auto 1")
for round in $(seq "$ROUNDS"); do
    for i in "${!WORKLOADS[@]}"; do
        read -r test ps threads <<<"${WORKLOADS[$i]}"
        # Each round starts one target further on, so that no target always follows the same
        # one (a place in the order can favour whoever holds it).
        for k in "${!TARGETS[@]}"; do
            target=${TARGETS[$(((k + round) % ${#TARGETS[@]}))]}
            read -r name port tpid spid <<<"$target"
            [[ -n "${tpid:-}" ]] && t0=$(cpu_ticks "$tpid") s0=$(cpu_ticks "$spid")
            q=$(qps "$test" "$port" "$ps" "$threads")
            echo "$q" >>"$WORK/qps.$i.$name"
            if [[ -n "${tpid:-}" ]]; then
                n=$(echo "$q * $SECONDS_PER_RUN" | bc -l)
                per_query "$WORK/cpu.$i.$name.transport" "$tpid" "$n" "$t0"
                per_query "$WORK/cpu.$i.$name.sidecar" "$spid" "$n" "$s0"
            fi
            unset tpid spid
        done
    done
    for target in "${TARGETS[@]}"; do
        read -r name port _ <<<"$target"
        big_select "$port" >>"$WORK/big.$name"
    done
done

echo
echo "sqltunnel benchmark: $ROUNDS interleaved rounds of ${SECONDS_PER_RUN}s, medians; ratios to direct"
printf '%-34s' "workload"
for target in "${TARGETS[@]}"; do read -r name _ <<<"$target"; printf '%18s' "$name"; done
echo
for i in "${!WORKLOADS[@]}"; do
    read -r test ps threads <<<"${WORKLOADS[$i]}"
    qd=$(median <"$WORK/qps.$i.direct")
    printf '%-34s' "$test ps=$ps threads=$threads"
    for target in "${TARGETS[@]}"; do
        read -r name _ <<<"$target"
        printf '%12.2f %5.0fk' "$(echo "$(median <"$WORK/qps.$i.$name") / $qd" | bc -l)" \
            "$(echo "$(median <"$WORK/qps.$i.$name") / 1000" | bc -l)"
    done
    echo
done
bd=$(median <"$WORK/big.direct")
printf '%-34s' "1M-row SELECT, wall time"
for target in "${TARGETS[@]}"; do
    read -r name _ <<<"$target"
    printf '%12.2f %5.2fs' "$(echo "$(median <"$WORK/big.$name") / $bd" | bc -l)" "$(median <"$WORK/big.$name")"
done
echo
echo
echo "CPU per query in microseconds, user + system (medians of the rounds):"
for i in "${!WORKLOADS[@]}"; do
    read -r test ps threads <<<"${WORKLOADS[$i]}"
    for target in "${TARGETS[@]}"; do
        read -r name _ tpid _ <<<"$target"
        [[ -z "${tpid:-}" ]] && continue
        printf '  %-34s %-18s transport %5.1f + %5.1f   sidecar %5.1f + %5.1f\n' "$test ps=$ps threads=$threads" "$name" \
            "$(half "$WORK/cpu.$i.$name.transport" 1)" "$(half "$WORK/cpu.$i.$name.transport" 2)" \
            "$(half "$WORK/cpu.$i.$name.sidecar" 1)" "$(half "$WORK/cpu.$i.$name.sidecar" 2)"
        unset tpid
    done
done
for i in "${!WORKLOADS[@]}"; do
    read -r test ps threads <<<"${WORKLOADS[$i]}"
    qs=$(median <"$WORK/qps.$i.socat-2-hops")
    printf '%-34s tunnel-stream / 2 socat hops %.2f, tunnel-requests / 2 socat hops %.2f' "$test ps=$ps threads=$threads" \
        "$(echo "$(median <"$WORK/qps.$i.tunnel-stream") / $qs" | bc -l)" "$(echo "$(median <"$WORK/qps.$i.tunnel-requests") / $qs" | bc -l)"
    if [[ -f "$WORK/qps.$i.wstunnel" ]]; then
        printf ', tunnel-stream / wstunnel %.2f' "$(echo "$(median <"$WORK/qps.$i.tunnel-stream") / $(median <"$WORK/qps.$i.wstunnel")" | bc -l)"
    fi
    echo
done
echo
echo "== connection set-up (the sidecar prepares the next relayed session's greeting ahead)"
cargo bench -p e2e --bench connect --locked -- "$db_port" "$PORT_T_STREAM" 300
echo
echo "== timing wheel vs DelayQueue vs BinaryHeap"
cargo bench -p sqltunnel-common --bench wheel --locked -- 10000 1000000
