#!/usr/bin/env bash
# `scripts/bench.sh versus ROUNDS SECONDS WORKLOAD PS_MODE THREADS BIN_DIR...` (sourced by it):
# one sysbench workload (oltp_point_select, oltp_read_only), many short interleaved rounds,
# several builds of the tunnel (over a stream) against wstunnel. Each BIN_DIR holds a
# `transport` and a `sidecar` (target/release, or a copy of an older build), run with this
# checkout's example configs. All are started once; each round runs WORKLOAD for SECONDS
# against each in turn, one target further on each round. Prints each round's QPS and, per
# build, the median and spread of its ratio to wstunnel in the same round: a difference of a
# few per cent between builds shows only over many rounds on a noisy machine.

(($# >= 6)) || { echo "usage: scripts/bench.sh versus ROUNDS SECONDS WORKLOAD PS_MODE THREADS BIN_DIR..." >&2; exit 2; }
ROUNDS=$1 SECONDS_EACH=$2 WORKLOAD=$3 PS_MODE=$4 THREADS=$5
shift 5
ensure_packages mariadb-server mariadb-client sysbench
bench_scratch versus
ensure_wstunnel
[[ -n $WSTUNNEL ]] || exit 1
sb "$WORKLOAD" "$db_port" "$PS_MODE" "$THREADS" prepare >/dev/null

declare -A PORT
NAMES=()
for i in $(seq "$#"); do
    dir=${!i}
    start_tunnel "$dir" configs "B$i" stream
    var="PORT_B${i}_STREAM"
    PORT[$i:$dir]=${!var}
    NAMES+=("$i:$dir")
done
start_wstunnel
wait_port "$WS_PORT"
PORT[wstunnel]=$WS_PORT
NAMES+=(wstunnel)

echo "$WORKLOAD, --db-ps-mode=$PS_MODE, $THREADS thread(s): $ROUNDS interleaved rounds of ${SECONDS_EACH}s"
for name in "${NAMES[@]}"; do sb "$WORKLOAD" "${PORT[$name]}" "$PS_MODE" "$THREADS" run --time=2 >/dev/null; done
for round in $(seq "$ROUNDS"); do
    # Each round starts one target further on: a place in the order (right after wstunnel,
    # say) favours or hurts whoever holds it, and rotating shares it out.
    for k in "${!NAMES[@]}"; do
        name=${NAMES[$(((k + round) % ${#NAMES[@]}))]}
        qps=$(sb "$WORKLOAD" "${PORT[$name]}" "$PS_MODE" "$THREADS" run --time="$SECONDS_EACH" |
            grep -oE 'queries: +[0-9]+ +\([0-9.]+' | grep -oE '[0-9.]+$')
        echo "$round $name $qps" | tee -a "$WORK/rounds"
    done
done
python3 - "$WORK/rounds" <<'PY'
import collections, statistics, sys
rounds = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    number, name, qps = line.split()
    rounds[number][name] = float(qps)
names = list(next(iter(rounds.values())))
for name in names:
    qps = [r[name] for r in rounds.values()]
    ratios = [r[name] / r["wstunnel"] for r in rounds.values()]
    print(f"{name:32s} median {statistics.median(qps):8.0f} qps   / wstunnel: median "
          f"{statistics.median(ratios):.3f} (rounds {min(ratios):.3f} to {max(ratios):.3f})")
PY
