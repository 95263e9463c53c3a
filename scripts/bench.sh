#!/usr/bin/env bash
# Benchmarks, direct connection vs through the tunnel, measured in the same run:
#   - sysbench oltp_point_select, 1 thread, text protocol and prepared statements (QPS ratios)
#   - sysbench oltp_read_only, 1 thread, prepared statements (QPS ratio)
#   - a 1,000,000-row SELECT read by the mariadb client (wall-time ratio tunnel/direct)
# Two chained socat (a plain two-hop byte relay) are measured in the same rounds, as the
# floor any two-hop tunnel starts from.
# Each pair runs ROUNDS times (default 3), alternating; medians are printed, with the CPU time
# the transport and the sidecar spent per query (from /proc/<pid>/stat).
# BASELINE_BIN=DIR (a directory with other `transport` and `sidecar` binaries, e.g. an older
# build) and BASELINE_CONFIGS=DIR (their example configs) add a third column, measured
# interleaved in the same run: an A/B comparison of two builds.
# `--wan [ROUNDS]` runs the network bench instead: the shaping proxy at a 50 ms round trip
# between a direct client and MariaDB and between the sidecar and the transport (round trips
# per query, new connection, prepared execute, LOAD DATA LOCAL; the Connector/J connect
# sequence; a 1M-row SELECT at 20 Mbit/s), see tests/benches/wan.rs.
# `--faults [OPERATIONS_PER_CLIENT] [SEED]` runs the long seeded random fault run instead (see
# tests/benches/faults.rs): operations, cuts, client errors, garbled answers, writes lost or
# doubled, peak and final RSS.
# Usage: scripts/bench.sh [seconds-per-sysbench-run] | scripts/bench.sh --wan [ROUNDS] |
#        scripts/bench.sh --faults [OPERATIONS_PER_CLIENT] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

if [[ "${1:-}" == "--wan" ]]; then
    ensure_packages mariadb-server mariadb-client libmariadb-java
    command -v javac >/dev/null || ensure_packages default-jdk-headless
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-wan.XXXXXX")
    trap 'stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT
    db_port=$(free_port)
    start_mariadb "$WORK/mariadb" "$db_port"
    mkdir -p "$WORK/tmp"
    TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port cargo bench -p e2e --bench wan --locked -- "${2:-7}"
    exit 0
fi

if [[ "${1:-}" == "--faults" ]]; then
    ensure_packages mariadb-server mariadb-client
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-faults.XXXXXX")
    trap 'stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT
    db_port=$(free_port)
    start_mariadb "$WORK/mariadb" "$db_port"
    mkdir -p "$WORK/tmp"
    TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port cargo bench -p e2e --bench faults --locked -- "${2:-1500}" ${3:+"$3"}
    exit 0
fi

SECONDS_PER_RUN=${1:-10}
ROUNDS=${ROUNDS:-3}
ensure_packages mariadb-server mariadb-client sysbench
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
transport_port=$(free_port)
sidecar_port=$(free_port)
sed -e "s/address: 127.0.0.1:3306/address: 127.0.0.1:$db_port/" \
    -e "s/^listen: 127.0.0.1:8080/listen: 127.0.0.1:$transport_port/" \
    -e "s/level: info/level: warn/" configs/transport.example.yaml >"$WORK/transport.yaml"
sed -e "s#url: http://127.0.0.1:8080/#url: http://127.0.0.1:$transport_port/#" \
    -e "s/^listen: 127.0.0.1:3306/listen: 127.0.0.1:$sidecar_port/" \
    -e "s/level: info/level: warn/" configs/sidecar.example.yaml >"$WORK/sidecar.yaml"
target/release/transport --config "$WORK/transport.yaml" 2>"$WORK/transport.log" &
PIDS+=($!)
target/release/sidecar --config "$WORK/sidecar.yaml" 2>"$WORK/sidecar.log" &
PIDS+=($!)
TRANSPORT_PID=${PIDS[0]} SIDECAR_PID=${PIDS[1]}
wait_port "$transport_port"
wait_port "$sidecar_port"

# A second transport + sidecar from BASELINE_BIN, for an A/B run.
baseline_port=""
if [[ -n "${BASELINE_BIN:-}" ]]; then
    bt_port=$(free_port)
    baseline_port=$(free_port)
    sed -e "s/address: 127.0.0.1:3306/address: 127.0.0.1:$db_port/" \
        -e "s/^listen: 127.0.0.1:8080/listen: 127.0.0.1:$bt_port/" \
        -e "s/level: info/level: warn/" "$BASELINE_CONFIGS/transport.example.yaml" >"$WORK/b-transport.yaml"
    sed -e "s#url: http://127.0.0.1:8080/#url: http://127.0.0.1:$bt_port/#" \
        -e "s/^listen: 127.0.0.1:3306/listen: 127.0.0.1:$baseline_port/" \
        -e "s/level: info/level: warn/" "$BASELINE_CONFIGS/sidecar.example.yaml" >"$WORK/b-sidecar.yaml"
    "$BASELINE_BIN/transport" --config "$WORK/b-transport.yaml" 2>"$WORK/b-transport.log" &
    PIDS+=($!)
    B_TRANSPORT_PID=$!
    "$BASELINE_BIN/sidecar" --config "$WORK/b-sidecar.yaml" 2>"$WORK/b-sidecar.log" &
    PIDS+=($!)
    B_SIDECAR_PID=$!
    wait_port "$bt_port"
    wait_port "$baseline_port"
fi

# A plain byte relay of two hops, as a model of any two-hop tunnel: two chained socat.
ensure_packages socat
socat_port=$(free_port) socat_mid=$(free_port)
socat TCP-LISTEN:"$socat_mid",bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:"$db_port",nodelay &
PIDS+=($!)
socat TCP-LISTEN:"$socat_port",bind=127.0.0.1,fork,reuseaddr,nodelay TCP:127.0.0.1:"$socat_mid",nodelay &
PIDS+=($!)
wait_port "$socat_mid"
wait_port "$socat_port"

# CPU seconds (user + system) a process has used so far.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$1/stat"; }

sb() {
    local test=$1 port=$2 ps=$3 action=$4
    sysbench "$test" --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=app \
        --mysql-password=app-pw --mysql-db=tunnel_test --tables=1 --table-size=10000 \
        --threads=1 --time="$SECONDS_PER_RUN" --db-ps-mode="$ps" "$action"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
qps() { sb "$1" "$2" "$3" run | awk '/queries:/ { gsub(/\(/, "", $3); print $3 }'; }
big_select() {
    local port=$1 start end
    start=$(date +%s.%N)
    mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$port" -uapp -papp-pw --quick --batch \
        --skip-column-names -e "SELECT seq, REPEAT('x', 100), seq * 2 FROM seq_1_to_1000000" tunnel_test >/dev/null
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}

ensure_packages bc
sb oltp_point_select "$db_port" disable prepare >/dev/null
WORKLOADS=("oltp_point_select disable" "oltp_point_select auto" "oltp_read_only auto")
for _ in $(seq "$ROUNDS"); do
    for i in "${!WORKLOADS[@]}"; do
        read -r test ps <<<"${WORKLOADS[$i]}"
        qps "$test" "$db_port" "$ps" >>"$WORK/qps.$i.direct"
        t0=$(cpu_seconds "$TRANSPORT_PID") s0=$(cpu_seconds "$SIDECAR_PID")
        q=$(qps "$test" "$sidecar_port" "$ps")
        t1=$(cpu_seconds "$TRANSPORT_PID") s1=$(cpu_seconds "$SIDECAR_PID")
        echo "$q" >>"$WORK/qps.$i.tunnel"
        echo "($t1 - $t0) * 1000000 / ($q * $SECONDS_PER_RUN)" | bc -l >>"$WORK/cpu.$i.transport"
        echo "($s1 - $s0) * 1000000 / ($q * $SECONDS_PER_RUN)" | bc -l >>"$WORK/cpu.$i.sidecar"
        qps "$test" "$socat_port" "$ps" >>"$WORK/qps.$i.socat"
        if [[ -n "$baseline_port" ]]; then
            t0=$(cpu_seconds "$B_TRANSPORT_PID") s0=$(cpu_seconds "$B_SIDECAR_PID")
            q=$(qps "$test" "$baseline_port" "$ps")
            t1=$(cpu_seconds "$B_TRANSPORT_PID") s1=$(cpu_seconds "$B_SIDECAR_PID")
            echo "$q" >>"$WORK/qps.$i.baseline"
            echo "($t1 - $t0) * 1000000 / ($q * $SECONDS_PER_RUN)" | bc -l >>"$WORK/cpu.$i.b-transport"
            echo "($s1 - $s0) * 1000000 / ($q * $SECONDS_PER_RUN)" | bc -l >>"$WORK/cpu.$i.b-sidecar"
        fi
    done
    big_select "$db_port" >>"$WORK/big.direct"
    big_select "$sidecar_port" >>"$WORK/big.tunnel"
done

bd=$(median <"$WORK/big.direct"); bt=$(median <"$WORK/big.tunnel")
echo
echo "sqltunnel benchmark, $ROUNDS rounds of ${SECONDS_PER_RUN}s, medians, 1 thread"
for i in "${!WORKLOADS[@]}"; do
    read -r test ps <<<"${WORKLOADS[$i]}"
    qd=$(median <"$WORK/qps.$i.direct"); qt=$(median <"$WORK/qps.$i.tunnel")
    printf '%-18s ps-mode=%-8s direct %6.0f qps, tunnel %6.0f qps, ratio %.2f   (runs: %s | %s)\n' "$test" "$ps" "$qd" "$qt" \
        "$(echo "$qt / $qd" | bc -l)" "$(paste -sd' ' "$WORK/qps.$i.direct")" "$(paste -sd' ' "$WORK/qps.$i.tunnel")"
    printf '%-18s CPU per query: transport %.1f us, sidecar %.1f us\n' "" \
        "$(median <"$WORK/cpu.$i.transport")" "$(median <"$WORK/cpu.$i.sidecar")"
    qs=$(median <"$WORK/qps.$i.socat")
    printf '%-18s 2 socat hops %6.0f qps, ratio %.2f; tunnel / 2 socat hops %.2f   (runs: %s)\n' "" "$qs" \
        "$(echo "$qs / $qd" | bc -l)" "$(echo "$qt / $qs" | bc -l)" "$(paste -sd' ' "$WORK/qps.$i.socat")"
    if [[ -n "$baseline_port" ]]; then
        qb=$(median <"$WORK/qps.$i.baseline")
        printf '%-18s baseline build %6.0f qps, ratio %.2f; this build / baseline %.2f   (runs: %s)\n' "" "$qb" \
            "$(echo "$qb / $qd" | bc -l)" "$(echo "$qt / $qb" | bc -l)" "$(paste -sd' ' "$WORK/qps.$i.baseline")"
        printf '%-18s baseline CPU per query: transport %.1f us, sidecar %.1f us\n' "" \
            "$(median <"$WORK/cpu.$i.b-transport")" "$(median <"$WORK/cpu.$i.b-sidecar")"
    fi
done
printf '1M-row SELECT:              direct %.2f s,   tunnel %.2f s,   ratio %.2f (target <= 2.0)\n' "$bd" "$bt" "$(echo "$bt / $bd" | bc -l)"
echo
echo "== connection set-up (the sidecar prepares the next relayed session's greeting ahead)"
cargo bench -p e2e --bench connect --locked -- "$db_port" "$sidecar_port" 300
echo
echo "== timing wheel vs DelayQueue vs BinaryHeap"
cargo bench -p sqltunnel-common --bench wheel --locked -- 10000 1000000
