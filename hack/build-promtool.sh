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

cd "$work"
printf 'module interlock.dev/promtool\n\ngo 1.26\n' >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
GO
log "resolving github.com/prometheus/prometheus@$PROMETHEUS_VERSION"
go get "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" >/dev/null 2>"$work/get.log" || { cat "$work/get.log" >&2; die "go get github.com/prometheus/prometheus@$PROMETHEUS_VERSION failed"; }
go mod tidy -e >/dev/null 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; die "go mod tidy failed in $work"; }
# 3.MM.P from v0.3MM.P, for `promtool --version`.
release="3.$((10#${PROMETHEUS_VERSION:4:2})).${PROMETHEUS_VERSION##*.}"
log "building promtool $release"
go build -trimpath -tags "netgo remove_all_sd" \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
  -o "$BIN/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool || die "go build github.com/prometheus/prometheus/cmd/promtool failed"
mv "$BIN/promtool.tmp" "$BIN/promtool"

log "built in $((SECONDS - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN/promtool"
