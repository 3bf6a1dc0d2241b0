#!/usr/bin/env bash
# Builds helm from its Go module (helm.sh/helm/v4, cmd/helm) at a pinned release, into the cache
# outside the checkout keyed by version (like hack/build-real-binaries.sh): the chart's CI checks
# (helm lint, helm template, helm install / upgrade / uninstall against the real API server) need
# it, CI has no network but the package registries, and a second run is a no-op.
#
# Usage: hack/build-helm.sh        # prints the binary's path on its last line
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock), HELM_VERSION
set -euo pipefail

# shellcheck source=hack/go-build.sh
source "$(dirname "$0")/go-build.sh"

HELM_VERSION="${HELM_VERSION:-v4.3.2}"
BIN="$CACHE/bin/helm-$HELM_VERSION"

require_go "helm"

if [[ -x "$BIN/helm" ]]; then
  log "cached: $BIN/helm"
  echo "$BIN/helm"
  exit 0
fi

mkdir -p "$BIN"
go_scratch
start=$SECONDS

go_build_from helm.sh/helm/v4 "$HELM_VERSION" helm.sh/helm/v4/cmd/helm "$BIN/helm" \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

log "built in $((SECONDS - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN/helm"
