#!/usr/bin/env bash
# `scripts/bench.sh throughput [SECONDS]` (sourced by it): every target started once, then
# ROUNDS (default 3) interleaved rounds, each starting one target further on: sysbench
# oltp_point_select (text protocol) at 1 and 8 threads and oltp_read_only (prepared) at 1,
# SECONDS (default 10) each, and a 1,000,000-row SELECT read by the mariadb client. Medians,
# as ratios to direct; the CPU time, user and system, each half spent per query (from
# /proc/<pid>/stat); ratios to two socat hops and to wstunnel. Both halves run with the
# example configs as they are (log level info, as a user's would). BASELINE_BIN=DIR (another
# build's `transport` and `sidecar`) and BASELINE_CONFIGS=DIR (its example configs) add its
# columns, measured in the same rounds.

SECONDS_PER_RUN=${1:-10}
ROUNDS=${ROUNDS:-3}
ensure_packages mariadb-server mariadb-client sysbench socat bc
cargo build --release --locked
bench_scratch bench
start_tunnel target/release configs T stream requests
# TARGETS: "name port [transport-pid sidecar-pid]", measured in this order each round.
TARGETS=("direct $db_port")
start_socat
TARGETS+=("socat-2-hops $SOCAT_PORT")
ensure_wstunnel
if [[ -n $WSTUNNEL ]]; then
    start_wstunnel
    wait_port "$WS_PORT"
    TARGETS+=("wstunnel $WS_PORT")
fi
TARGETS+=("tunnel-requests $PORT_T_REQUESTS $PID_T_TRANSPORT $PID_T_REQUESTS")
TARGETS+=("tunnel-stream $PORT_T_STREAM $PID_T_TRANSPORT $PID_T_STREAM")
if [[ -n "${BASELINE_BIN:-}" ]]; then
    start_tunnel "$BASELINE_BIN" "$BASELINE_CONFIGS" B stream requests
    TARGETS+=("baseline-requests $PORT_B_REQUESTS $PID_B_TRANSPORT $PID_B_REQUESTS")
    TARGETS+=("baseline-stream $PORT_B_STREAM $PID_B_TRANSPORT $PID_B_STREAM")
fi

# CPU seconds (user and system) a process has used so far.
cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
qps() { sb "$1" "$2" "$3" "$4" run --time="$SECONDS_PER_RUN" | awk '/queries:/ { gsub(/\(/, "", $3); print $3 }'; }
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
