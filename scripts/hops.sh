#!/usr/bin/env bash
# scripts/hops.sh [QUERIES] [ROUNDS]: where a one-thread query's time goes, through the tunnel
# (over a stream) and through wstunnel, from a system-wide perf trace of its system calls and
# context switches (scripts/hops.py). Each round traces QUERIES (default 3,000) point selects
# through each, in turn, and prints the wall time of each stretch of a query (the client's write
# to the client half's read, that half's read to its write, and so on to MariaDB and back) and
# the CPU time of each half per query, in user space and in each system call. Then the medians
# over ROUNDS (default 3) of the mean query and of each half's user and system time. Where
# the sampled QPS of scripts/bench.sh moves by a few per cent between rounds, these move by
# tenths of a microsecond. Needs root (perf's tracepoints) and wstunnel, as scripts/versus.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
QUERIES=${1:-3000} ROUNDS=${2:-3}
WSTUNNEL=${WSTUNNEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sqltunnel-bench/wstunnel-v10.6.2}/bin/wstunnel
[[ -x $WSTUNNEL ]] || { echo "no wstunnel at $WSTUNNEL: run scripts/bench.sh once, or set WSTUNNEL_DIR" >&2; exit 1; }
((EUID == 0)) || { echo "scripts/hops.sh traces every process with perf: run it as root" >&2; exit 1; }
command -v sysbench >/dev/null || ensure_packages sysbench
command -v perf >/dev/null || ensure_packages linux-perf
cargo build --release --locked

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-hops.XXXXXX")
PIDS=()
recorder=
# (perf is stopped first, with SIGINT: it writes its trace and exits.)
trap '[[ -n $recorder ]] && kill -INT "$recorder" 2>/dev/null; kill "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true; stop_mariadb "$WORK/mariadb"; rm -rf "$WORK"' EXIT
db_port=$(free_port)
start_mariadb "$WORK/mariadb" "$db_port" >/dev/null
db_pid=$(cat "$WORK/mariadb/mysqld.pid")
sysbench_on() { # PORT QUERIES COMMAND
    sysbench oltp_point_select --mysql-host=127.0.0.1 --mysql-port="$1" --mysql-user=app \
        --mysql-password=app-pw --mysql-db=tunnel_test --tables=1 --table-size=10000 \
        --threads=1 --time=0 --events="$2" --db-ps-mode=disable "$3"
}
sysbench_on "$db_port" 0 prepare >/dev/null

# Each target: its port and the pids of its client half and its server half.
declare -A PORT HALVES
transport_port=$(free_port) PORT[tunnel]=$(free_port)
transport_config configs "127.0.0.1:$db_port" "$transport_port" "$WORK/transport.yaml"
sidecar_config configs "$transport_port" "${PORT[tunnel]}" "$WORK/sidecar.yaml"
target/release/transport --config "$WORK/transport.yaml" >"$WORK/transport.log" 2>&1 &
PIDS+=($!)
target/release/sidecar --config "$WORK/sidecar.yaml" >"$WORK/sidecar.log" 2>&1 &
PIDS+=($!)
HALVES[tunnel]="${PIDS[1]} ${PIDS[0]}"
ws_server=$(free_port) PORT[wstunnel]=$(free_port)
"$WSTUNNEL" server --restrict-to "127.0.0.1:$db_port" "ws://127.0.0.1:$ws_server" >/dev/null 2>&1 &
PIDS+=($!)
wait_port "$ws_server"
"$WSTUNNEL" client -L "tcp://127.0.0.1:${PORT[wstunnel]}:127.0.0.1:$db_port" "ws://127.0.0.1:$ws_server" >/dev/null 2>&1 &
PIDS+=($!)
HALVES[wstunnel]="${PIDS[3]} ${PIDS[2]}"
wait_port "${PORT[tunnel]}"
wait_port "${PORT[wstunnel]}"

NAMES=(tunnel wstunnel)
for round in $(seq "$ROUNDS"); do
    for k in "${!NAMES[@]}"; do
        name=${NAMES[$(((k + round) % ${#NAMES[@]}))]}
        sysbench_on "${PORT[$name]}" 300 run >/dev/null
        perf record -a -e raw_syscalls:sys_enter,raw_syscalls:sys_exit,sched:sched_switch \
            -o "$WORK/trace.data" >"$WORK/perf.log" 2>&1 &
        recorder=$!
        sleep 1
        kill -0 "$recorder" 2>/dev/null || { cat "$WORK/perf.log" >&2; exit 1; }
        sysbench_on "${PORT[$name]}" "$QUERIES" run >"$WORK/sysbench.out"
        kill -INT "$recorder"
        wait "$recorder" || true
        recorder=
        # Events perf could not keep up with would leave holes in the stretches.
        if grep -i "lost" "$WORK/perf.log" >&2; then echo "round $round, $name: perf lost events (above)" >&2; fi
        perf script --ns -i "$WORK/trace.data" -F comm,pid,tid,cpu,time,event,trace >"$WORK/trace.txt" 2>/dev/null
        echo "round $round, $name: $(grep -oE 'queries: +[0-9]+ +\([0-9.]+ per sec' "$WORK/sysbench.out" | grep -oE '[0-9.]+ per sec') (traced)"
        # shellcheck disable=SC2086 # two pids
        python3 scripts/hops.py "$WORK/trace.txt" "$QUERIES" sysbench "$db_pid" ${HALVES[$name]} |
            tee "$WORK/$name.$round"
        rm -f "$WORK/trace.data" "$WORK/trace.txt"
    done
done

echo "medians over $ROUNDS rounds, microseconds per query (mean query; user and system time of each half):"
for name in "${NAMES[@]}"; do
    grep -h 'summary:' "$WORK/$name".* | python3 -c '
import re, statistics, sys
rows = [list(map(float, re.findall(r"[\d.]+", line))) for line in sys.stdin]
query, client_user, client_system, server_user, server_system = (statistics.median(c) for c in zip(*rows))
print("  %-9s query %.1f; client half user %.2f, system %.2f; server half user %.2f, system %.2f"
      % (sys.argv[1], query, client_user, client_system, server_user, server_system))' "$name"
done
