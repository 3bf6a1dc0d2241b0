#!/usr/bin/env bash
# Builds promtool from the Prometheus Go module (github.com/prometheus/prometheus, cmd/promtool)
# at a pinned release, into the cache outside the checkout keyed by version (like
# hack/build-real-binaries.sh): CI checks the alert rules with `promtool check rules` and their
# unit tests with `promtool test rules`, and has no network but the package registries.
#
# The Prometheus module's tags are v0.3MM.P for Prometheus 3.MM.P. Built with the `remove_all_sd`
# tag: promtool registers every service-discovery plugin (AWS, Azure, GCE, Kubernetes, ...) only
# for `promtool check service-discovery`, which we never run; without them the build resolves and
# compiles a fraction of the modules (file and HTTP discovery stay, they are always built in).
#
# Usage: hack/build-promtool.sh        # prints the binary's path on its last line
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock), PROMETHEUS_VERSION
set -euo pipefail

# shellcheck source=hack/go-build.sh
source "$(dirname "$0")/go-build.sh"

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
BIN="$CACHE/bin/promtool-$PROMETHEUS_VERSION"

require_go "promtool"

if [[ -x "$BIN/promtool" ]]; then
  log "cached: $BIN/promtool"
  echo "$BIN/promtool"
  exit 0
fi

mkdir -p "$BIN"
go_scratch
start=$SECONDS

# 3.MM.P from v0.3MM.P, for `promtool --version`.
release="3.$((10#${PROMETHEUS_VERSION:4:2})).${PROMETHEUS_VERSION##*.}"
go_build_from github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
  github.com/prometheus/prometheus/cmd/promtool "$BIN/promtool" -tags "netgo remove_all_sd" \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release"

log "built in $((SECONDS - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN/promtool"
