#!/usr/bin/env bash
# Builds hack/linkerd-client (a client of Linkerd's outbound policy API made of Linkerd's own
# linkerd2-proxy-api crate, with tonic) into a cache outside the checkout, keyed by the crate
# version and a hash of the client's sources (like hack/build-idp.sh keys by version): a fresh
# clone on the same machine reuses it, a second run is a no-op. The crate ships its generated
# Rust code, so no protoc is needed; cargo fetches the crates from crates.io (Cargo.lock pins
# them). The build is niced: it shares the machine with the tests.
#
# Usage: hack/build-linkerd-client.sh               # prints the binary's path on its last line
#        hack/build-linkerd-client.sh --print-path  # the path only, built or not
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock)
set -euo pipefail
cd "$(dirname "$0")/linkerd-client"

CACHE="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
log() { printf 'build-linkerd-client: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

version="$(sed -n 's/^linkerd2-proxy-api = { version = "=\([0-9.]*\)".*/\1/p' Cargo.toml)"
[[ -n "$version" ]] || die "no pinned linkerd2-proxy-api version in hack/linkerd-client/Cargo.toml"
key="$(cat Cargo.toml Cargo.lock src/main.rs | sha256sum | cut -c1-12)"
BIN="$CACHE/bin/linkerd-client-$version-$key/linkerd-client"

if [[ "${1:-}" == "--print-path" ]]; then
  echo "$BIN"
  exit 0
fi
if [[ -x "$BIN" ]]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi
command -v cargo >/dev/null 2>&1 || die "cargo is not installed (needed to build the Linkerd test client; the product itself is Python)"

start=$SECONDS
target="$CACHE/cargo-target/linkerd-client"
log "building linkerd-client with linkerd2-proxy-api $version (first time: a few minutes)"
CARGO_TARGET_DIR="$target" nice -n 10 cargo build --release --locked --quiet \
  || die "cargo build failed in hack/linkerd-client"
mkdir -p "$(dirname "$BIN")"
cp "$target/release/linkerd-client" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
log "built in $((SECONDS - start)) s: $BIN"
echo "$BIN"
