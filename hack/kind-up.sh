#!/usr/bin/env bash
# Create a kind cluster running interlock: build and load the image, install the Gateway API
# CRDs, apply our manifests, and wait until the controller is ready.
#
# Needs: kind, kubectl, docker. Usage: hack/kind-up.sh [cluster-name]
set -euo pipefail

cluster="${1:-interlock}"
image="${IMAGE:-ghcr.io/interlock-dev/interlock:0.1.0}"
gateway_api_version="${GATEWAY_API_VERSION:-v1.6.1}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "kind-up: $1 is required but not installed" >&2; exit 1; }
}
need kind
need kubectl
need docker

if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  echo "kind-up: cluster '$cluster' exists; reusing it"
else
  echo "kind-up: creating cluster '$cluster'"
  kind create cluster --name "$cluster" --wait 120s
fi
context="kind-$cluster"

echo "kind-up: building $image"
docker build --tag "$image" "$root"
echo "kind-up: loading $image into '$cluster'"
kind load docker-image "$image" --name "$cluster"

echo "kind-up: installing Gateway API $gateway_api_version CRDs"
kubectl --context "$context" apply -f \
  "https://github.com/kubernetes-sigs/gateway-api/releases/download/${gateway_api_version}/standard-install.yaml"

echo "kind-up: applying manifests"
kubectl --context "$context" apply -k "$root/manifests"

echo "kind-up: waiting for interlock to become ready"
kubectl --context "$context" -n interlock-system rollout status deployment/interlock --timeout=180s

cat <<MSG
kind-up: ready. Try the examples (docs/kind.md, "Try it"):
  kubectl --context $context apply -f $root/manifests/examples/
  kubectl --context $context -n interlock-system port-forward svc/interlock-policy 8090:8090 &
  curl -s localhost:8090/v1/outbound/default/echo/80
MSG
