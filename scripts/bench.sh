#!/usr/bin/env bash
# The benchmarks: one driver, one subcommand each. Each starts its targets once (a scratch
# MariaDB, the tunnel, two chained socat, wstunnel: scripts/bench/targets.sh) and measures
# them interleaved, in the same run; speed is never asserted, only printed, as ratios.
#   throughput [SECONDS]       (the default) sysbench point selects at 1 and 8 threads,
#                              read_only at 1, and a 1M-row SELECT: direct, two socat hops,
#                              wstunnel, the tunnel over requests and over a stream; ratios,
#                              CPU per query; connection set-up; the timing wheel against
#                              tokio's DelayQueue (scripts/bench/throughput.sh)
#   versus ROUNDS SECONDS WORKLOAD PS_MODE THREADS BIN_DIR...
#                              one workload, many short rounds, builds against wstunnel
#                              (scripts/bench/versus.sh)
#   instructions [QUERIES]     callgrind's instructions per point select, each half of the
#                              tunnel and of wstunnel (scripts/bench/instructions.sh)
#   trace [QUERIES] [ROUNDS]   a perf trace of each hop of a query (root; scripts/bench/trace.sh)
#   wan [ROUNDS]               a 50 ms round trip: round trips per operation, connects,
#                              LOAD DATA, a 1M-row SELECT at 20 Mbit/s (tests/benches/wan.rs)
#   faults [OPERATIONS] [SEED] the long seeded random fault run (tests/benches/faults.rs)
#   take-over [ROUNDS] [SECONDS]
#                              queries through repeated take-overs and without
#                              (tests/benches/take_over.rs)
#   keepalive [ROUNDS] [POLLS] [ENDS]
#                              the transport's CPU per session end with no keep-alive long
#                              poll waiting and with POLLS of another identity's waiting
#                              (tests/benches/keepalive.rs)
#   attack [ROUNDS] [SECONDS] [REQUESTS]
#                              a sidecar's logins and queries under each attack on the door,
#                              then the seeded door fuzzer (tests/benches/attack.rs,
#                              tests/door/fuzz.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/bench/targets.sh
what=${1:-throughput}
what=${what#--}
[[ $what =~ ^[0-9]+$ ]] && what=throughput || shift $(($# > 0))

# cargo_bench BENCH ARGS...: a benchmark program of tests/benches with a scratch MariaDB.
cargo_bench() {
    ensure_packages mariadb-server mariadb-client
    bench_scratch "$1"
    cargo build --release --locked -p transport -p sidecar
    TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port cargo bench -p e2e --bench "$1" --locked -- "${@:2}"
}

case $what in
    throughput | versus | instructions | trace) source "scripts/bench/$what.sh" "$@" ;;
    wan)
        ensure_packages libmariadb-java
        command -v javac >/dev/null || ensure_packages default-jdk-headless
        install_test_clients "$PWD/target/test-clients"
        cargo_bench wan "${1:-7}"
        ;;
    faults) cargo_bench faults "${1:-1500}" ${2:+"$2"} ;;
    take-over) cargo_bench take_over "${1:-3}" "${2:-10}" ;;
    keepalive) cargo_bench keepalive "${1:-3}" "${2:-200}" "${3:-240}" ;;
    attack)
        cargo_bench attack "${1:-3}" "${2:-8}"
        # The fuzzer checks invariants, not speed: the test build, as scripts/test.sh's short pass.
        cargo build --locked -p transport -p sidecar
        TMPDIR="$WORK/tmp" SQLTUNNEL_TEST_MYSQL_PORT=$db_port SQLTUNNEL_DOOR_REQUESTS=${3:-5000} \
            cargo test -p e2e --test door --locked -- fuzz:: --nocapture
        ;;
    help | -h) sed -n '2,29p' "$0" ;;
    *) sed -n '2,29p' "$0" >&2; exit 2 ;;
esac
