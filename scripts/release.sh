#!/usr/bin/env bash
# Builds the release artifacts into dist/ (or --out DIR): for each target an archive named by
# it (both binaries on Linux, the sidecar on Windows, and the docs), a CycloneDX SBOM of each
# binary per target, and SHA256SUMS over them all. Each binary's --version (commit and target) is checked,
# under qemu-user for aarch64 and Wine for Windows.
#
#   scripts/release.sh                           # every target, release profile
#   scripts/release.sh --profile dev x86_64-pc-windows-gnu x86_64-unknown-linux-musl   # CI
#
# Targets: x86_64-unknown-linux-gnu, x86_64-unknown-linux-musl (fully static),
# aarch64-unknown-linux-gnu, x86_64-pc-windows-gnu. macOS cannot be built here (no SDK).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PROFILE=release
OUT=dist
TARGETS=()
while (($#)); do
    case "$1" in
        --profile) PROFILE=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) TARGETS+=("$1"); shift ;;
    esac
done
((${#TARGETS[@]})) || TARGETS=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-gnu x86_64-pc-windows-gnu)
PROFILE_DIR=$([[ $PROFILE == dev ]] && echo debug || echo "$PROFILE")
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# What each target needs: its Rust standard library, a C cross compiler (ring, zstd, jemalloc
# build C), a runner for the --version check.
for target in "${TARGETS[@]}"; do
    case "$target" in
        x86_64-unknown-linux-musl) ensure_packages musl-tools ;;
        aarch64-unknown-linux-gnu) ensure_packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static ;;
        x86_64-pc-windows-gnu) ensure_packages gcc-mingw-w64-x86-64 wine64 ;;
        x86_64-unknown-linux-gnu) ;;
        *) echo "unsupported target $target" >&2; exit 2 ;;
    esac
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
done
export CC_x86_64_unknown_linux_musl=musl-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc

command -v cargo-cyclonedx >/dev/null || {
    echo "== installing cargo-cyclonedx (the SBOM) into ~/.cargo/bin"
    cargo install --locked --quiet cargo-cyclonedx@0.5.9
}

# What each archive carries beside the binaries.
DOCS=(README.md CHANGELOG.md CONTRIBUTING.md ARCHITECTURE.md SECURITY.md LICENSE-MIT LICENSE-APACHE configs docs)

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
for target in "${TARGETS[@]}"; do
    bins=(sidecar transport)
    [[ $target == *windows* ]] && bins=(sidecar)
    echo "== $target: ${bins[*]} ($PROFILE)"
    packages=()
    for bin in "${bins[@]}"; do packages+=(-p "$bin"); done
    cargo build --locked --profile "$PROFILE" --target "$target" "${packages[@]}"
    name="sqltunnel-$VERSION-$target"
    stage="$OUT/$name"
    mkdir -p "$stage"
    for bin in "${bins[@]}"; do
        exe=$bin
        [[ $target == *windows* ]] && exe=$bin.exe
        cp "target/$target/$PROFILE_DIR/$exe" "$stage/"
        # --version names the commit and the target, on the target's own runtime.
        case "$target" in
            aarch64-*) said=$(qemu-aarch64-static -L /usr/aarch64-linux-gnu "$stage/$exe" --version) ;;
            *windows*) said=$(WINEDEBUG=-all wine_loader "$stage/$exe" --version) ;;
            *) said=$("$stage/$exe" --version) ;;
        esac
        echo "   $said"
        [[ $said == *"commit $COMMIT, $target"* ]] || { echo "$exe --version says: $said" >&2; exit 1; }
        if [[ $target == *musl* ]] && ldd "$stage/$exe" 2>&1 | grep -q '=>'; then
            echo "$exe for $target links shared libraries: $(ldd "$stage/$exe")" >&2
            exit 1
        fi
    done
    # One CycloneDX SBOM per binary: every crate in it, for this target.
    cargo cyclonedx --quiet --format json --spec-version 1.5 --target "$target" --override-filename sbom
    for bin in "${bins[@]}"; do mv "$bin/sbom.json" "$OUT/$name-$bin.cdx.json"; done
    rm -f ./*/sbom.json
    # The user docs, so that every link of the README and docs/ works in the unpacked
    # archive (tests/docs.rs checks the links against this list).
    cp -r "${DOCS[@]}" "$stage/"
    if [[ $target == *windows* ]]; then
        (cd "$OUT" && python3 -m zipfile -c "$name.zip" "$name" >/dev/null)
    else
        tar -C "$OUT" -czf "$OUT/$name.tar.gz" "$name"
    fi
    rm -rf "$stage"
done
(cd "$OUT" && sha256sum -- *.tar.gz *.zip *.cdx.json 2>/dev/null > SHA256SUMS)
echo "== $OUT"
cat "$OUT/SHA256SUMS"
