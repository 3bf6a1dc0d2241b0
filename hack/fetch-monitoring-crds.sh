#!/usr/bin/env bash
# Fetches prometheus-operator's ServiceMonitor and PrometheusRule CRDs from its Go module at a
# pinned release (the module's example/prometheus-operator-crd/ holds them), into the cache
# outside the checkout keyed by version: the chart's real-lane test installs them so the API
# server checks the chart's ServiceMonitor and PrometheusRule against their real schemas. CI has
# no network but the package registries; the Go module proxy serves the module (4 MB).
#
# Usage: hack/fetch-monitoring-crds.sh        # prints the CRD folder on its last line
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock), PROMETHEUS_OPERATOR_VERSION
set -euo pipefail

# shellcheck source=hack/go-build.sh
source "$(dirname "$0")/go-build.sh"

PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.89.0}"
DIR="$CACHE/crds/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
CRDS=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

require_go "nothing: go mod download fetches prometheus-operator's CRDs"

if [[ -f "$DIR/${CRDS[0]}" && -f "$DIR/${CRDS[1]}" ]]; then
  log "cached: $DIR"
  echo "$DIR"
  exit 0
fi

go_scratch
cd "$work"
module="github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION"
log "downloading $module"
source_dir="$(go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$source_dir/example/prometheus-operator-crd" ]] || die "go mod download $module gave no example/prometheus-operator-crd"
mkdir -p "$DIR"
for crd in "${CRDS[@]}"; do
  cp "$source_dir/example/prometheus-operator-crd/$crd" "$DIR/$crd.tmp"
  mv "$DIR/$crd.tmp" "$DIR/$crd"
done
log "copied ${CRDS[*]} to $DIR"
echo "$DIR"
