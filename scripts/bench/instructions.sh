#!/usr/bin/env bash
# `scripts/bench.sh instructions [QUERIES]` (sourced by it): the instructions each half of the
# tunnel (over a stream) and of wstunnel executes per point select, counted by callgrind over
# QUERIES (default 3,000) on one thread: exact where the sampled CPU time of `throughput` is
# noisy. Then, with a dump before each recv, send and epoll_wait, how many of them fall
# between a wake-up, a read and the write it causes (the critical path at one thread) and
# after the write (scripts/bench/critical_path.py). With PROFILES=DIR, the whole-run dumps
# are kept in DIR, to read with callgrind_annotate.

QUERIES=${1:-3000}
ensure_packages mariadb-server mariadb-client sysbench valgrind
cargo build --release --locked
bench_scratch instructions
ensure_wstunnel
sb oltp_point_select "$db_port" disable 1 prepare >/dev/null
points() { sb oltp_point_select "$1" disable 1 run --time=0 --events="$2" >/dev/null; }
# Each half under callgrind, with the options in DUMPS.
DUMPS=()
# pair NAME OUT: starts both halves of NAME (tunnel or wstunnel) under callgrind, their
# counts in $WORK/OUT-{server,client}.out*; sets PORT, SERVER_PID and CLIENT_PID.
pair() {
    local grind=(valgrind --tool=callgrind --dump-instr=no "${DUMPS[@]}")
    if [[ $1 == tunnel ]]; then
        start_tunnel target/release configs "$2" stream -- "${grind[@]}" --callgrind-out-file="$WORK/$2-%p.out"
        local t="PID_$2_TRANSPORT" s="PID_$2_STREAM" p="PORT_$2_STREAM"
        SERVER_PID=${!t} CLIENT_PID=${!s} PORT=${!p}
    else
        start_wstunnel "${grind[@]}" --callgrind-out-file="$WORK/$2-%p.out"
        read -r SERVER_PID CLIENT_PID <<<"$WS_PIDS"
        PORT=$WS_PORT
        wait_port "$PORT" 60
    fi
}
# stop_pair: ends the last pair started.
stop_pair() { { kill -9 "$SERVER_PID" "$CLIENT_PID"; wait "$SERVER_PID" "$CLIENT_PID"; } 2>/dev/null || true; }
# total FILE: the instructions a callgrind dump counts.
total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1 }'; }

NAMES=(tunnel)
[[ -n $WSTUNNEL ]] && NAMES+=(wstunnel)
for name in "${NAMES[@]}"; do
    pair "$name" "$name"
    points "$PORT" 300
    callgrind_control -z "$SERVER_PID" &>/dev/null && callgrind_control -z "$CLIENT_PID" &>/dev/null
    points "$PORT" "$QUERIES"
    for half in SERVER CLIENT; do
        pid_var="${half}_PID"
        callgrind_control -d "${!pid_var}" &>/dev/null
        ir=$(total "$(ls -S "$WORK/$name-${!pid_var}.out".* | head -1)")
        printf '%-8s %s half: %6d instructions per query\n' "$name" "${half,,}" $((ir / QUERIES))
        if [[ -n ${PROFILES:-} ]]; then
            mkdir -p "$PROFILES"
            cp "$(ls -S "$WORK/$name-${!pid_var}.out".* | head -1)" "$PROFILES/$name-${half,,}.out"
        fi
    done
    stop_pair
done
DUMPS=(--dump-line=no --dump-before=recv --dump-before=__libc_recv --dump-before=send
    --dump-before=__libc_send --dump-before=epoll_wait)
for name in "${NAMES[@]}"; do
    pair "$name" "${name}_critical"
    points "$PORT" 100
    points "$PORT" 300
    stop_pair
    for half in SERVER CLIENT; do
        pid_var="${half}_PID"
        echo "$name ${half,,} half, between system calls:"
        python3 scripts/bench/critical_path.py "$WORK/${name}_critical-${!pid_var}.out"
    done
done
