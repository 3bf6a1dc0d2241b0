#!/usr/bin/env bash
# Builds the official Gateway API conformance suite and its echo backend from their Go module at
# a pinned release, into a cache outside the checkout keyed by version (like
# hack/build-real-binaries.sh): a fresh clone on the same machine reuses them, a second run is a
# no-op, and a run needs no network once they are built.
#
#   conformance.test  the suite: `go test -c` of sigs.k8s.io/gateway-api/conformance (its test
#                     manifests are embedded; it reads a kubeconfig and talks to the API server
#                     and to each Gateway's status.addresses)
#   echo-basic        the backend every GATEWAY-HTTP test's Pods run (configured by environment:
#                     HTTP_PORT, H2C_PORT, HTTPS_PORT, POD_NAME, NAMESPACE, TLS_SERVER_CERT, ...)
#
# The conformance module's go.mod replaces sigs.k8s.io/gateway-api with its parent folder (`../`),
# which a dependent module cannot follow: our scratch module replaces it with the same release.
#
# Usage: hack/build-conformance.sh        # prints the bin directory on its last line
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock), GATEWAY_API_VERSION
set -euo pipefail

# shellcheck source=hack/go-build.sh
source "$(dirname "$0")/go-build.sh"

GATEWAY_API_VERSION="${GATEWAY_API_VERSION:-v1.6.1}"
BIN="$CACHE/bin/gateway-api-conformance-$GATEWAY_API_VERSION"

require_go "the Gateway API conformance suite"

if [[ -x "$BIN/conformance.test" && -x "$BIN/echo-basic" ]]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
go_scratch
start=$SECONDS

cd "$work"
printf 'module interlock.dev/conformance\n\ngo 1.26\n' >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "sigs.k8s.io/gateway-api/conformance"
	_ "sigs.k8s.io/gateway-api/conformance/echo-basic"
)
GO
log "resolving sigs.k8s.io/gateway-api/conformance@$GATEWAY_API_VERSION"
go mod edit -require "sigs.k8s.io/gateway-api/conformance@$GATEWAY_API_VERSION" \
  -replace "sigs.k8s.io/gateway-api=sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION"
go mod tidy -e >/dev/null 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; die "go mod tidy failed in $work"; }
# `go test -c` of a dependency's package needs the modules its tests import in go.sum too.
go get -t "sigs.k8s.io/gateway-api/conformance@$GATEWAY_API_VERSION" >/dev/null 2>"$work/get.log" \
  || { cat "$work/get.log" >&2; die "go get -t sigs.k8s.io/gateway-api/conformance failed"; }

log "building echo-basic"
go build -trimpath -ldflags "-s -w" -o "$BIN/echo-basic.tmp" sigs.k8s.io/gateway-api/conformance/echo-basic \
  || die "go build sigs.k8s.io/gateway-api/conformance/echo-basic failed"
log "building the suite (go test -c sigs.k8s.io/gateway-api/conformance)"
go test -c -trimpath -ldflags "-s -w" -o "$BIN/conformance.test.tmp" sigs.k8s.io/gateway-api/conformance \
  || die "go test -c sigs.k8s.io/gateway-api/conformance failed"
mv "$BIN/echo-basic.tmp" "$BIN/echo-basic"
mv "$BIN/conformance.test.tmp" "$BIN/conformance.test"

log "built in $((SECONDS - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN"
