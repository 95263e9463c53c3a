#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]: runs each fuzz target (default: all) for SECONDS
# (default 20) with cargo-fuzz on the stable toolchain (RUSTC_BOOTSTRAP=1, no sanitizer), from
# the committed seeds, keeping what it finds under target/fuzz-corpus. Prints each target's
# runs and exits non-zero on a crash (the input is saved under fuzz/artifacts/). FUZZ_PROFILE=dev
# (scripts/test.sh's short pass) builds without optimisation, in half the time, with overflow
# checks and debug assertions on; it runs several times fewer inputs a second.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(mysql_login upstream_answers requests http_and_frames)

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked --version 0.13.2
fi
export RUSTC_BOOTSTRAP=1
echo "== building fuzz targets"
# FUZZ_CODEGEN_UNITS=16 builds the release targets faster and fuzzes a little slower.
if [[ ${FUZZ_PROFILE:-release} == dev ]]; then
    cargo fuzz build --sanitizer none --fuzz-dir fuzz --dev
    profile=debug
else
    cargo fuzz build --sanitizer none --fuzz-dir fuzz --codegen-units "${FUZZ_CODEGEN_UNITS:-1}"
    profile=release
fi
bin="fuzz/target/$(rustc -vV | sed -n 's/^host: //p')/$profile"
for t in "${targets[@]}"; do
    corpus="target/fuzz-corpus/$t"
    mkdir -p "$corpus"
    log=$(mktemp)
    # The binary built above runs as it is (`cargo fuzz run` would rebuild first).
    mkdir -p "fuzz/artifacts/$t"
    if ! "$bin/$t" "$corpus" "fuzz/seeds/$t" -artifact_prefix="fuzz/artifacts/$t/" \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log"
        echo "FUZZ $t: crashed (input in fuzz/artifacts/$t)" >&2
        exit 1
    fi
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    echo "fuzz $t: $runs runs in ${seconds}s, 0 crashes, corpus $(ls "$corpus" | wc -l) inputs"
    rm -f "$log"
done
