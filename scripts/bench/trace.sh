#!/usr/bin/env bash
# `scripts/bench.sh trace [QUERIES] [ROUNDS]` (sourced by it): where a one-thread query's time
# goes, through the tunnel (over a stream) and through wstunnel, from a system-wide perf trace
# of its system calls and context switches (scripts/bench/hops.py). Each round traces QUERIES
# (default 3,000) point selects through each, in turn, and prints the wall time of each
# stretch of a query (the client's write to the client half's read, that half's read to its
# write, and so on to MariaDB and back) and the CPU time of each half per query, in user space
# and in each system call. Then the medians over ROUNDS (default 3) of the mean query and of
# each half's user and system time. Where the sampled QPS of `throughput` moves by a few per
# cent between rounds, these move by tenths of a microsecond. Needs root (perf's tracepoints).

QUERIES=${1:-3000} ROUNDS=${2:-3}
((EUID == 0)) || { echo "scripts/bench.sh trace traces every process with perf: run it as root" >&2; exit 1; }
ensure_packages mariadb-server mariadb-client sysbench linux-perf
cargo build --release --locked
bench_scratch trace
ensure_wstunnel
[[ -n $WSTUNNEL ]] || exit 1
recorder=
# (perf is stopped first, with SIGINT: it writes its trace and exits.)
trap '[[ -n $recorder ]] && kill -INT "$recorder" 2>/dev/null; bench_cleanup' EXIT
sb oltp_point_select "$db_port" disable 1 prepare >/dev/null
points() { sb oltp_point_select "$1" disable 1 run --time=0 --events="$2"; }

# Each target: its port, and the pids of its client half and its server half.
declare -A PORT HALVES
start_tunnel target/release configs T stream
PORT[tunnel]=$PORT_T_STREAM HALVES[tunnel]="$PID_T_STREAM $PID_T_TRANSPORT"
start_wstunnel
wait_port "$WS_PORT"
read -r ws_server ws_client <<<"$WS_PIDS"
PORT[wstunnel]=$WS_PORT HALVES[wstunnel]="$ws_client $ws_server"

NAMES=(tunnel wstunnel)
for round in $(seq "$ROUNDS"); do
    for k in "${!NAMES[@]}"; do
        name=${NAMES[$(((k + round) % ${#NAMES[@]}))]}
        points "${PORT[$name]}" 300 >/dev/null
        perf record -a -e raw_syscalls:sys_enter,raw_syscalls:sys_exit,sched:sched_switch \
            -o "$WORK/trace.data" >"$WORK/perf.log" 2>&1 &
        recorder=$!
        sleep 1
        kill -0 "$recorder" 2>/dev/null || { cat "$WORK/perf.log" >&2; exit 1; }
        points "${PORT[$name]}" "$QUERIES" >"$WORK/sysbench.out"
        kill -INT "$recorder"
        wait "$recorder" || true
        recorder=
        # Events perf could not keep up with would leave holes in the stretches.
        if grep -i "lost" "$WORK/perf.log" >&2; then echo "round $round, $name: perf lost events (above)" >&2; fi
        perf script --ns -i "$WORK/trace.data" -F comm,pid,tid,cpu,time,event,trace >"$WORK/trace.txt" 2>/dev/null
        echo "round $round, $name: $(grep -oE 'queries: +[0-9]+ +\([0-9.]+ per sec' "$WORK/sysbench.out" | grep -oE '[0-9.]+ per sec') (traced)"
        # shellcheck disable=SC2086 # two pids
        python3 scripts/bench/hops.py "$WORK/trace.txt" "$QUERIES" sysbench "$db_pid" ${HALVES[$name]} |
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
