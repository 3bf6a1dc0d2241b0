#!/usr/bin/env bash
# Runs the official Gateway API conformance suite (v1.6.1, profiles GATEWAY-HTTP and GATEWAY-TLS,
# the latter's core: TLSRoute on Passthrough listeners) against interlock on a real
# kube-apiserver, with Pods played by processes (tests/conformance/podrunner.py), all inside one
# network namespace this script creates and deletes: no address outside it is used.
#
#   hack/conformance/run.sh full   every GATEWAY-HTTP test (all features) and GATEWAY-TLS core
#                                  test; writes the report and the summary under
#                                  docs/conformance/   (make conformance)
#   hack/conformance/run.sh ci     the bounded run CI makes (see CI_* below); writes under
#                                  build/conformance/ and fails when a test of
#                                  docs/conformance/claimed-tests.txt did not pass
#
# Inside the namespace: etcd and kube-apiserver (hack/real-cluster.sh, on loopback), our own
# kube-controller-manager (deployment, replicaset, endpointslice, serviceaccount, namespace and
# garbage-collector controllers), the pod runner (a Node, Pods on a bridge at 10.244.0.0/16),
# interlock (`interlock run` as the controller identity, Gateways on INTERLOCK_GATEWAY_ADDRESSES),
# the GatewayClass `interlock`, and the suite (conformance.test from hack/build-conformance.sh).
# Logs of each process: build/conformance/<mode>/logs/.
#
# Needs root (network namespaces), Go the first time (the binaries are cached by version under
# ~/.cache/interlock), kubectl, openssl, and a venv with interlock installed ($PYTHON).
#
# Env: INTERLOCK_GATEWAY_ADDRESSES  the address pool interlock gives Gateways (default
#                                   127.10.0.0/24: loopback of the run's namespace)
#      INTERLOCK_RUN_ARGS           interlock run's arguments besides --kubeconfig (default: an
#                                   edge on loopback and --gateway-addresses from the pool)
#      CONFORMANCE_USABLE_ADDRESS, CONFORMANCE_UNUSABLE_ADDRESS  for GatewayStaticAddresses
#      CONFORMANCE_PARALLEL         how many parallel tests run at once (default 6)
#      CONFORMANCE_ARGS             more arguments for the suite (e.g. --run-test NAME)
#      CONFORMANCE_CRD_CHANNEL      the Gateway API CRDs installed: experimental (default: the
#                                   channel with HTTPRoute's rules[].retry, which HTTPRouteRetry
#                                   needs; every claimed test passes under it) or standard
#      PYTHON                       the venv's python (default .venv/bin/python)
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
log() { printf 'conformance: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

GATEWAY_API_VERSION="${GATEWAY_API_VERSION:-v1.6.1}"
GATEWAY_CLASS=interlock
CONTROLLER_NAME=interlock.dev/gateway-controller
INTERLOCK_GATEWAY_ADDRESSES="${INTERLOCK_GATEWAY_ADDRESSES:-127.10.0.0/24}"
# For GatewayStaticAddresses: an address a Gateway may ask for (in the pool, above those the
# suite's Gateways take first) and one it may not (outside the pool).
USABLE_ADDRESS="${CONFORMANCE_USABLE_ADDRESS:-127.10.0.254}"
UNUSABLE_ADDRESS="${CONFORMANCE_UNUSABLE_ADDRESS:-127.11.0.1}"
PYTHON="${PYTHON:-$repo/.venv/bin/python}"
INTERLOCK="$(dirname "$PYTHON")/interlock"
CLAIMED="$repo/docs/conformance/claimed-tests.txt"
CRD_CHANNEL="${CONFORMANCE_CRD_CHANNEL:-experimental}"
case "$CRD_CHANNEL" in
  standard | experimental) ;;
  *) die "CONFORMANCE_CRD_CHANNEL=$CRD_CHANNEL: expected standard or experimental" ;;
esac
GATEWAY_API_CRDS="$repo/../shared/gateway-api/$GATEWAY_API_VERSION/$CRD_CHANNEL"

# -- what CI runs: bounded to about 10 minutes ------------------------------------------------
# The suite's set-up waits for the GatewayClass (GWCMustBeAccepted) and then for the base
# Gateways and Pods (NamespacesMustBeReady); each test waits at most its own timeouts, and a test
# of something interlock does not do waits them out. CI runs the core features only (Gateway,
# HTTPRoute, ReferenceGrant: the 37 core tests of GATEWAY-HTTP) plus the features that claimed
# tests need (extended ones, and TLSRoute: GATEWAY-TLS's 9 core TLSRoute tests), with the waits
# shortened (a test that passes meets them in seconds).
CI_TIMEOUTS="GWCMustBeAccepted:60;NamespacesMustBeReady:120;GatewayMustHaveAddress:30;GatewayMustHaveCondition:30;RouteMustHaveParents:20;HTTPRouteMustHaveCondition:20;HTTPRouteMustNotHaveParents:20;GatewayStatusMustHaveListeners:20;GatewayListenersMustHaveConditions:20;LatestObservedGenerationSet:20;MaxTimeToConsistency:15;DefaultTestTimeout:30;CreateTimeout:30"
CI_SUITE_TIMEOUT=12m
# Most tests are parallel, and go test runs GOMAXPROCS of them at once by default (2 here): they
# spend their time waiting for status and answers, so more of them at once shortens the run.
PARALLEL="${CONFORMANCE_PARALLEL:-6}"
FULL_SUITE_TIMEOUT=3h

mode="${1:-}"
case "$mode" in
  full | ci) ;;
  inside) ;;
  *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

# ============================================================================================
# Outside: build (cached), create the namespace, run this script inside it, delete it.
# ============================================================================================
if [[ "$mode" != inside ]]; then
  [[ $EUID -eq 0 ]] || die "needs root: the run creates network namespaces (ip netns add)"
  command -v ip >/dev/null 2>&1 || die "ip (iproute2) is not installed"
  [[ -x "$PYTHON" ]] || die "$PYTHON not found (make dev creates the venv)"
  [[ -d "$GATEWAY_API_CRDS" ]] || die "Gateway API CRDs not found in $GATEWAY_API_CRDS"
  kube_bin="$("$repo/hack/build-real-binaries.sh" | tail -n1)"
  suite_bin="$("$repo/hack/build-conformance.sh" | tail -n1)"
  netns="ilconf-$$"
  out="$repo/build/conformance/$mode"
  rm -rf "$out" && mkdir -p "$out/logs"
  ip netns add "$netns"
  trap 'ip netns del "$netns" 2>/dev/null || true' EXIT
  log "running inside network namespace $netns (logs: $out/logs; $CRD_CHANNEL channel CRDs)"
  started=$SECONDS
  status=0
  KUBE_BIN="$kube_bin" SUITE_BIN="$suite_bin" NETNS="$netns" OUT="$out" RUN_MODE="$mode" \
    ip netns exec "$netns" "$0" inside || status=$?
  log "$mode run took $((SECONDS - started)) s (exit $status)"
  exit "$status"
fi

# ============================================================================================
# Inside the run's namespace.
# ============================================================================================
: "${KUBE_BIN:?}" "${SUITE_BIN:?}" "${NETNS:?}" "${OUT:?}" "${RUN_MODE:?}"
cd "$repo"  # python -m tests.conformance.* imports from the checkout
ip link set lo up
cluster="$OUT/cluster"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  "$repo/hack/real-cluster.sh" down "$cluster" >/dev/null 2>&1 || true
  # The Pods' namespaces, should the runner have been killed before removing them.
  for ns in $(ip netns list 2>/dev/null | awk -v p="$NETNS-" 'index($1, p) == 1 {print $1}'); do
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT

step_started=$SECONDS
INTERLOCK_CONTROLLER_MANAGER=false INTERLOCK_REAL_BIN="$KUBE_BIN" \
  INTERLOCK_GATEWAY_API_DIR="$GATEWAY_API_CRDS" "$repo/hack/real-cluster.sh" up "$cluster" 2>>"$OUT/logs/real-cluster.log" \
  || die "hack/real-cluster.sh up failed: $(tail -n 5 "$OUT/logs/real-cluster.log")"
admin="$cluster/admin.kubeconfig"
k=(kubectl --kubeconfig "$admin")

# kube-controller-manager with what Deployments, Services and Pods need (real-cluster.sh starts one
# with the namespace and garbage-collector controllers only).
"$KUBE_BIN/kube-controller-manager" --kubeconfig="$admin" \
  --controllers=namespace-controller,garbage-collector-controller,deployment-controller,replicaset-controller,endpointslice-controller,serviceaccount-controller,root-ca-certificate-publisher-controller \
  --root-ca-file="$cluster/pki/ca.crt" \
  --leader-elect=false --secure-port=0 --use-service-account-credentials=false \
  --concurrent-deployment-syncs=10 --concurrent-replicaset-syncs=10 \
  --v=1 >"$OUT/logs/kube-controller-manager.log" 2>&1 &
pids+=($!)

log_port=10250
"$PYTHON" -m tests.conformance.podrunner --kubeconfig "$admin" --echo-basic "$SUITE_BIN/echo-basic" \
  --netns-prefix "$NETNS" --log-port "$log_port" --state-dir "$OUT/pods" \
  >"$OUT/logs/podrunner.log" 2>&1 &
pids+=($!)

run_args=()
if [[ -n "${INTERLOCK_RUN_ARGS:-}" ]]; then
  read -r -a run_args <<<"$INTERLOCK_RUN_ARGS"
else
  # The Lease where the shipped Deployment keeps it (the RBAC grants leases there only). The
  # Ingress edge in this process (--edge-workers 1): the suite's Gateways are served by the
  # Gateway half's own listeners, so `auto`'s worker processes would only take memory and CPU.
  run_args=(--admin-addr 127.0.0.1:9090 --policy-addr 127.0.0.1:8090 --edge-addr 127.0.0.1:18080
    --edge-workers 1 --lease-namespace interlock-system)
  if "$INTERLOCK" run --help 2>/dev/null | grep -q -- --gateway-addresses; then
    run_args+=(--gateway-addresses "$INTERLOCK_GATEWAY_ADDRESSES")
  else
    log "interlock run has no --gateway-addresses yet: Gateways get no address from this run"
  fi
fi
"$INTERLOCK" run --kubeconfig "$cluster/controller.kubeconfig" "${run_args[@]}" \
  >"$OUT/logs/interlock.log" 2>&1 &
pids+=($!)

"${k[@]}" apply -f - >/dev/null <<YAML
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: $GATEWAY_CLASS
spec:
  controllerName: $CONTROLLER_NAME
YAML

deadline=$((SECONDS + 60))
until [[ "$("${k[@]}" get node conformance-node -o jsonpath='{.status.conditions[0].status}' 2>/dev/null)" == True ]]; do
  ((SECONDS < deadline)) || die "the pod runner registered no Node within 60 s: $(tail -n 5 "$OUT/logs/podrunner.log")"
  sleep 0.5
done
log "cluster, controller manager, pod runner and interlock started in $((SECONDS - step_started)) s"

suite_args=(
  --kubeconfig "$admin" --gateway-class "$GATEWAY_CLASS" --conformance-profiles GATEWAY-HTTP,GATEWAY-TLS
  --organization interlock --project interlock --url https://github.com/interlock-dev/interlock
  --version "$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
  --contact https://github.com/interlock-dev/interlock/issues
  --report-output "$OUT/report.yaml"
  --usable-address "$USABLE_ADDRESS" --unusable-address "$UNUSABLE_ADDRESS"
)
# The suite runs every test whose features are all supported, whatever its profile: name exactly
# the features served (report.py holds the v1.6.1 lists: GATEWAY-HTTP's, and GATEWAY-TLS's core,
# TLSRoute on Passthrough listeners), not --all-features, which would run the TLSRoute
# Terminate, GRPCRoute and UDPRoute tests too.
if [[ "$RUN_MODE" == full ]]; then
  features="$("$PYTHON" -m tests.conformance.report features --all)"
  timeout=$FULL_SUITE_TIMEOUT
else
  features="$("$PYTHON" -m tests.conformance.report features --claimed "$CLAIMED")"
  suite_args+=(--timeout-config-overrides "$CI_TIMEOUTS")
  timeout=$CI_SUITE_TIMEOUT
fi
suite_args+=(--supported-features "$features")
read -r -a more <<<"${CONFORMANCE_ARGS:-}"
suite_args+=("${more[@]}")

# CI runs these claimed tests alone, after the others: each holds, while it runs, an object that
# changes what other tests expect, which is right for it and wrong for them. ListenerSetReferenceGrant
# grants every Gateway of gateway-conformance-infra every Secret of gateway-conformance-web-backend,
# the "not permitted" case of GatewaySecretInvalidReferenceGrant and GatewayInvalidTLSBackendConfiguration
# (docs/conformance/README.md). A full run keeps the suite's own order, as published reports do.
alone=()
if [[ "$RUN_MODE" == ci && -z "${CONFORMANCE_ARGS:-}" ]]; then
  for name in ListenerSetReferenceGrant; do
    grep -q "^$name " "$CLAIMED" && alone+=("$name")
  done
fi
first_args=("${suite_args[@]}")
if ((${#alone[@]})); then
  # The base resources (namespaces, Gateways, backends) stay for the second run: deleted, their
  # namespaces would still be terminating when it applies them again.
  first_args+=(--skip-tests "$(IFS=,; echo "${alone[*]}")" --cleanup-base-resources=false)
fi
log "running the suite ($RUN_MODE): conformance.test ${first_args[*]}"
suite_started=$SECONDS
suite_status=0
(cd "$OUT" && "$SUITE_BIN/conformance.test" -test.v -test.run '^TestConformance$' \
  -test.timeout "$timeout" -test.parallel "$PARALLEL" "${first_args[@]}") >"$OUT/logs/suite.log" 2>&1 || suite_status=$?
if ((${#alone[@]})); then
  pattern="^TestConformance\$/^($(IFS='|'; echo "${alone[*]}"))\$"
  log "running alone after the others: ${alone[*]}"
  # Appended: the check reads each test's last result (SKIP in the first run, then its own).
  (cd "$OUT" && "$SUITE_BIN/conformance.test" -test.v -test.run "$pattern" \
    -test.timeout "$timeout" -test.parallel "$PARALLEL" "${suite_args[@]}" \
    --report-output "$OUT/report-alone.yaml") >>"$OUT/logs/suite.log" 2>&1 || suite_status=$?
fi
log "suite finished in $((SECONDS - suite_started)) s (exit $suite_status)"

summary_args=(--report "$OUT/report.yaml" --suite-log "$OUT/logs/suite.log" --claimed "$CLAIMED"
  --passed "$OUT/passed-tests.txt"
  --seconds "$((SECONDS - suite_started))" --mode "$RUN_MODE")
if [[ "$RUN_MODE" == full ]]; then
  # The suite's counts miss the parallel tests that failed: the published report takes each
  # test's result from the suite's log (docs/conformance/README.md, "Reading the report").
  if [[ -f "$OUT/report.yaml" ]]; then
    "$PYTHON" -m tests.conformance.report correct --suite-log "$OUT/logs/suite.log" \
      --report "$OUT/report.yaml" --out "$OUT/interlock-report.yaml" \
      --header "The Gateway API conformance suite $GATEWAY_API_VERSION (GATEWAY-HTTP, GATEWAY-TLS) against interlock.
Reproduce: sudo make conformance (hack/conformance/run.sh full; docs/conformance/README.md).
The profile's counts and test lists are taken from the suite's log, test by test: the suite
writes its report before its parallel tests run and counts them passed (README, Reading the report).
The suite's own report: build/conformance/full/report.yaml."
  fi
  "$PYTHON" -m tests.conformance.report summary "${summary_args[@]}" --out "$OUT/summary.md"
  # A run of the whole profile is published; one narrowed by CONFORMANCE_ARGS stays in $OUT.
  if [[ -z "${CONFORMANCE_ARGS:-}" ]]; then
    cp "$OUT/summary.md" "$repo/docs/conformance/summary.md"
    if [[ -f "$OUT/interlock-report.yaml" ]]; then
      cp "$OUT/interlock-report.yaml" "$repo/docs/conformance/interlock-$GATEWAY_API_VERSION-report.yaml"
    fi
  fi
else
  # On a failed claim the CI output is all there is afterwards: the check prints the suite's log
  # of each failed test; interlock's warnings and errors of the run follow.
  "$PYTHON" -m tests.conformance.report check "${summary_args[@]}" --out "$OUT/summary.md" || {
    log "interlock's log, its last 40 warnings and errors:"
    grep -E '^\S+ (WARN|ERROR) ' "$OUT/logs/interlock.log" | tail -n 40 >&2 || true
    exit 1
  }
fi
