#!/usr/bin/env bash
# scripts/versus.sh ROUNDS SECONDS WORKLOAD PS_MODE THREADS BIN_DIR... : one workload, many
# short interleaved rounds, several builds of the tunnel (over a stream) against wstunnel.
# Each BIN_DIR holds a `transport` and a `sidecar` (e.g. target/release, or a copy of an older
# build), run with this checkout's example configs. All of them, and wstunnel (WSTUNNEL_DIR,
# as scripts/bench.sh builds it), are started once; then each round runs sysbench WORKLOAD
# (oltp_point_select, oltp_read_only) for SECONDS against each in turn. Prints each round's
# QPS and, per build, the median and spread of its ratio to wstunnel in the same round: a
# difference of a few percent between builds shows only over many rounds on a noisy machine.
# Example: scripts/versus.sh 6 5 oltp_point_select disable 1 /tmp/old target/release
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
(($# >= 6)) || { sed -n '2,10p' "$0"; exit 2; }
ROUNDS=$1 SECONDS_EACH=$2 WORKLOAD=$3 PS_MODE=$4 THREADS=$5
shift 5
BUILDS=("$@")
WSTUNNEL=${WSTUNNEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sqltunnel-bench/wstunnel-v10.6.2}/bin/wstunnel
[[ -x $WSTUNNEL ]] || { echo "no wstunnel at $WSTUNNEL: run scripts/bench.sh once, or set WSTUNNEL_DIR" >&2; exit 1; }
command -v sysbench >/dev/null || ensure_packages sysbench

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sqltunnel-versus.XXXXXX")
PIDS=()
cleanup() {
    kill "${PIDS[@]}" 2>/dev/null || true
    wait "${PIDS[@]}" 2>/dev/null || true
    stop_mariadb "$WORK/mariadb"
    rm -rf "$WORK"
}
trap cleanup EXIT
db_port=$(free_port)
start_mariadb "$WORK/mariadb" "$db_port" >/dev/null

sysbench_on() { # PORT SECONDS COMMAND
    sysbench "$WORKLOAD" --mysql-host=127.0.0.1 --mysql-port="$1" --mysql-user=app \
        --mysql-password=app-pw --mysql-db=tunnel_test --tables=1 --table-size=10000 \
        --threads="$THREADS" --time="$2" --db-ps-mode="$PS_MODE" "$3"
}
sysbench_on "$db_port" 0 prepare >/dev/null

declare -A PORT
NAMES=()
for i in "${!BUILDS[@]}"; do
    dir=${BUILDS[$i]} transport_port=$(free_port) sidecar_port=$(free_port)
    transport_config configs "127.0.0.1:$db_port" "$transport_port" "$WORK/transport.$i.yaml"
    sidecar_config configs "$transport_port" "$sidecar_port" "$WORK/sidecar.$i.yaml"
    "$dir/transport" --config "$WORK/transport.$i.yaml" >"$WORK/transport.$i.log" 2>&1 &
    PIDS+=($!)
    "$dir/sidecar" --config "$WORK/sidecar.$i.yaml" >"$WORK/sidecar.$i.log" 2>&1 &
    PIDS+=($!)
    wait_port "$sidecar_port"
    PORT[$i:$dir]=$sidecar_port
    NAMES+=("$i:$dir")
done
ws_server=$(free_port) ws_client=$(free_port)
"$WSTUNNEL" server --restrict-to "127.0.0.1:$db_port" "ws://127.0.0.1:$ws_server" >/dev/null 2>&1 &
PIDS+=($!)
wait_port "$ws_server"
"$WSTUNNEL" client -L "tcp://127.0.0.1:$ws_client:127.0.0.1:$db_port" "ws://127.0.0.1:$ws_server" >/dev/null 2>&1 &
PIDS+=($!)
wait_port "$ws_client"
PORT[wstunnel]=$ws_client
NAMES+=(wstunnel)

echo "$WORKLOAD, --db-ps-mode=$PS_MODE, $THREADS thread(s): $ROUNDS interleaved rounds of ${SECONDS_EACH}s"
for name in "${NAMES[@]}"; do sysbench_on "${PORT[$name]}" 2 run >/dev/null; done
for round in $(seq "$ROUNDS"); do
    # Each round starts one target further on: a place in the order (right after wstunnel,
    # say) favours or hurts whoever holds it, and rotating shares it out.
    for k in "${!NAMES[@]}"; do
        name=${NAMES[$(((k + round) % ${#NAMES[@]}))]}
        qps=$(sysbench_on "${PORT[$name]}" "$SECONDS_EACH" run | grep -oE 'queries: +[0-9]+ +\([0-9.]+' | grep -oE '[0-9.]+$')
        echo "$round $name $qps" | tee -a "$WORK/rounds"
    done
done
python3 - "$WORK/rounds" <<'EOF'
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
EOF
