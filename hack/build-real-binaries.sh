#!/usr/bin/env bash
# Builds the real Kubernetes test binaries (kube-apiserver, kube-controller-manager, etcd) from
# their Go modules at pinned releases, into a cache outside the checkout keyed by version, so a
# fresh clone on the same machine (CI) reuses them and a second run is a no-op.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging module
# (k8s.io/api, k8s.io/apiserver, ...) with a local ./staging path. We build it from a small
# module of our own that requires it and replaces each staging module with its published
# v0.N.M release; that list is generated from the kubernetes go.mod itself.
#
# Usage: hack/build-real-binaries.sh        # prints the bin directory on its last line
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock), KUBERNETES_VERSION, ETCD_VERSION
set -euo pipefail

# shellcheck source=hack/go-build.sh
source "$(dirname "$0")/go-build.sh"

KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
BIN="$CACHE/bin/kubernetes-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"

require_go "kube-apiserver and etcd"

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-controller-manager" && -x "$BIN/etcd" ]]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$BIN"
go_scratch

staging_version="v0.${KUBERNETES_VERSION#v1.}"
start=$SECONDS

# -- kubernetes ------------------------------------------------------------------------------
if [[ ! -x "$BIN/kube-apiserver" || ! -x "$BIN/kube-controller-manager" ]]; then
  mkdir -p "$work/k8s"
  cd "$work/k8s"
  log "fetching k8s.io/kubernetes@$KUBERNETES_VERSION go.mod"
  upstream_mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "$upstream_mod" ]] || die "go mod download k8s.io/kubernetes@$KUBERNETES_VERSION gave no go.mod"
  go_line="$(grep -m1 '^go ' "$upstream_mod")"
  {
    echo "module interlock.dev/realbinaries"
    echo
    echo "$go_line"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "replace ("
    # every `k8s.io/X => ./staging/src/k8s.io/X` becomes `k8s.io/X => k8s.io/X v0.N.M`
    sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/src/k8s\.io/.*#\t\1 => \1 '"$staging_version"'#p' "$upstream_mod"
    echo ")"
  } >go.mod
  cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  log "resolving modules (first time: downloads several hundred MB)"
  go mod tidy -e >/dev/null 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; die "go mod tidy failed in $work/k8s"; }
  log "building kube-apiserver and kube-controller-manager $KUBERNETES_VERSION"
  go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION" \
    -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    || die "go build k8s.io/kubernetes/cmd/kube-apiserver failed"
fi

# -- etcd ------------------------------------------------------------------------------------
if [[ ! -x "$BIN/etcd" ]]; then
  log "building etcd $ETCD_VERSION from go.etcd.io/etcd/server/v3"
  mkdir -p "$work/etcd"
  cd "$work/etcd"
  printf 'module interlock.dev/realetcd\n\ngo 1.26\n' >go.mod
  cat >tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>"$work/etcd-get.log" || { cat "$work/etcd-get.log" >&2; die "go get go.etcd.io/etcd/server/v3@$ETCD_VERSION failed"; }
  go mod tidy -e >/dev/null 2>&1 || true
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3 || die "go build go.etcd.io/etcd/server/v3 failed"
fi

log "built in $((SECONDS - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN"
