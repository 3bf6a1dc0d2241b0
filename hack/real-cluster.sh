#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for tests and for trying interlock without kind:
# etcd, kube-apiserver (secure port, RBAC, static tokens, service-account keys, the default
# admission plugins) and kube-controller-manager (namespace finalization, garbage collection),
# each a plain process with its data under DIR.
#
#   hack/real-cluster.sh up DIR        start, install the CRDs and RBAC, write the kubeconfigs
#   hack/real-cluster.sh down DIR      stop every process it started; nothing is left behind
#   hack/real-cluster.sh restart DIR   restart kube-apiserver alone (same port, same data)
#   hack/real-cluster.sh env DIR       print the cluster's facts as KEY=VALUE lines
#
# `up` writes DIR/admin.kubeconfig (cluster-admin) and DIR/controller.kubeconfig: the identity
# system:serviceaccount:interlock-system:interlock, bound to exactly what manifests/rbac.yaml
# grants, so the real RBAC refuses any call the manifests do not allow.
#
# Env: INTERLOCK_GATEWAY_API_DIR   the Gateway API CRDs of one channel (default: the standard
#                                  ../shared/gateway-api/v1.6.1/standard beside the checkout;
#                                  hack/conformance/run.sh gives the experimental one)
#      INTERLOCK_REAL_BIN          a directory holding etcd, kube-apiserver, kube-controller-manager
#                                  (default: built and cached by hack/build-real-binaries.sh)
#      INTERLOCK_WATCH_CACHE       false: kube-apiserver serves watches from etcd (so an etcd
#                                  compaction is seen as 410 Gone); default true
#      INTERLOCK_CONTROLLER_MANAGER  false: no kube-controller-manager; default true
#      INTERLOCK_CLUSTER_OWNER     a process id: once `up` succeeded, a watcher brings the cluster
#                                  down when that process is gone, however it ended (the tests
#                                  pass their own pid, so a killed pytest leaves nothing running)
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf 'real-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pid_alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

stop_pid() {  # stop_pid NAME PIDFILE: TERM, wait up to 10 s, then KILL
  local name=$1 file=$2 pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do pid_alive "$pid" || break; sleep 0.1; done
    if pid_alive "$pid"; then log "$name ($pid) did not stop on TERM; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    for _ in $(seq 50); do pid_alive "$pid" || break; sleep 0.1; done
  fi
  rm -f "$file"
}

load_env() { [[ -f "$1/cluster.env" ]] || die "$1/cluster.env not found: no cluster was started in $1 (run: $0 up $1)"; # shellcheck disable=SC1091
  source "$1/cluster.env"; }

start_apiserver() {  # reads DIR and the cluster.env variables
  local dir=$1 watch_cache=${WATCH_CACHE:-true}
  # shellcheck disable=SC2086
  setsid "$BIN/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
    --client-ca-file="$dir/pki/ca.crt" \
    --token-auth-file="$dir/tokens.csv" \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \
    --api-audiences=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/16 \
    --allow-privileged=true --profiling=false \
    --endpoint-reconciler-type=none \
    --watch-cache="$watch_cache" \
    --cert-dir="$dir/pki" \
    --v=1 >>"$dir/logs/kube-apiserver.log" 2>&1 &
  echo $! >"$dir/pids/kube-apiserver"
}

wait_ready() {  # wait_ready DIR SECONDS
  local dir=$1 within=$2 deadline=$((SECONDS + $2))
  until curl -fsS --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
      "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1; do
    pid_alive "$(cat "$dir/pids/kube-apiserver" 2>/dev/null)" \
      || die "kube-apiserver exited; last lines of $dir/logs/kube-apiserver.log:
$(tail -n 20 "$dir/logs/kube-apiserver.log")"
    ((SECONDS < deadline)) || die "kube-apiserver not ready on https://127.0.0.1:$APISERVER_PORT/readyz within ${within}s; see $dir/logs/kube-apiserver.log"
    sleep 0.2
  done
}

write_kubeconfig() {  # write_kubeconfig FILE USER TOKEN
  local ca
  ca="$(base64 -w0 <"$DIR/pki/ca.crt")"
  cat >"$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: real
    cluster:
      server: https://127.0.0.1:$APISERVER_PORT
      certificate-authority-data: $ca
users:
  - name: $2
    user:
      token: $3
contexts:
  - name: $2@real
    context: {cluster: real, user: $2}
current-context: $2@real
KUBECONFIG
  chmod 600 "$1"
}

up() {
  DIR="$(mkdir -p "$1" && cd "$1" && pwd)"
  if [[ -f "$DIR/pids/kube-apiserver" ]] && pid_alive "$(cat "$DIR/pids/kube-apiserver")"; then
    die "a cluster is already running in $DIR (run: $0 down $DIR)"
  fi
  local started=$SECONDS
  BIN="${INTERLOCK_REAL_BIN:-}"
  if [[ -z "$BIN" ]]; then BIN="$("$repo/hack/build-real-binaries.sh" | tail -n1)"; fi
  for b in etcd kube-apiserver kube-controller-manager; do
    [[ -x "$BIN/$b" ]] || die "$BIN/$b is missing (build it: hack/build-real-binaries.sh)"
  done
  command -v kubectl >/dev/null 2>&1 || die "kubectl is not installed"
  command -v openssl >/dev/null 2>&1 || die "openssl is not installed"
  local gateway="${INTERLOCK_GATEWAY_API_DIR:-$repo/../shared/gateway-api/v1.6.1/standard}"
  [[ -d "$gateway" ]] || die "Gateway API CRDs not found in $gateway (set INTERLOCK_GATEWAY_API_DIR to the release's standard/ or experimental/ folder)"

  mkdir -p "$DIR/pki" "$DIR/logs" "$DIR/pids" "$DIR/etcd"
  (
    cd "$DIR/pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=interlock-test-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1\n' >san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile san.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "openssl failed to make the certificates in $DIR/pki"

  ADMIN_TOKEN="$(openssl rand -hex 24)"
  CONTROLLER_TOKEN="$(openssl rand -hex 24)"
  {
    echo "$ADMIN_TOKEN,admin,admin-uid,system:masters"
    echo "$CONTROLLER_TOKEN,system:serviceaccount:interlock-system:interlock,controller-uid,\"system:serviceaccounts,system:serviceaccounts:interlock-system,system:authenticated\""
  } >"$DIR/tokens.csv"
  chmod 600 "$DIR/tokens.csv"
  ETCD_PORT="$(free_port)"; ETCD_PEER_PORT="$(free_port)"; APISERVER_PORT="$(free_port)"
  WATCH_CACHE="${INTERLOCK_WATCH_CACHE:-true}"
  cat >"$DIR/cluster.env" <<ENV
BIN=$BIN
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
ETCD_URL=http://127.0.0.1:$ETCD_PORT
WATCH_CACHE=$WATCH_CACHE
ADMIN_TOKEN=$ADMIN_TOKEN
CONTROLLER_TOKEN=$CONTROLLER_TOKEN
ENV
  chmod 600 "$DIR/cluster.env"

  setsid "$BIN/etcd" --name interlock-test --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "interlock-test=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn >>"$DIR/logs/etcd.log" 2>&1 &
  echo $! >"$DIR/pids/etcd"
  local deadline=$((SECONDS + 30))
  until curl -fsS "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1; do
    pid_alive "$(cat "$DIR/pids/etcd")" || die "etcd exited; last lines of $DIR/logs/etcd.log:
$(tail -n 20 "$DIR/logs/etcd.log")"
    ((SECONDS < deadline)) || die "etcd not healthy on 127.0.0.1:$ETCD_PORT within 30s; see $DIR/logs/etcd.log"
    sleep 0.1
  done

  start_apiserver "$DIR"
  wait_ready "$DIR" 90
  write_kubeconfig "$DIR/admin.kubeconfig" admin "$ADMIN_TOKEN"
  write_kubeconfig "$DIR/controller.kubeconfig" interlock "$CONTROLLER_TOKEN"

  if [[ "${INTERLOCK_CONTROLLER_MANAGER:-true}" != false ]]; then
    setsid "$BIN/kube-controller-manager" --kubeconfig="$DIR/admin.kubeconfig" \
      --controllers=namespace-controller,garbage-collector-controller \
      --leader-elect=false --secure-port=0 --use-service-account-credentials=false \
      --v=1 >>"$DIR/logs/kube-controller-manager.log" 2>&1 &
    echo $! >"$DIR/pids/kube-controller-manager"
  fi

  local k=(kubectl --kubeconfig "$DIR/admin.kubeconfig")
  "${k[@]}" apply --server-side --force-conflicts -f "$gateway" >"$DIR/logs/install.log" 2>&1 \
    || die "kubectl apply --server-side -f $gateway failed: $(tail -n 5 "$DIR/logs/install.log")"
  "${k[@]}" apply --server-side --force-conflicts -f "$repo/manifests/crds/" \
    -f "$repo/manifests/namespace.yaml" -f "$repo/manifests/serviceaccount.yaml" -f "$repo/manifests/rbac.yaml" \
    >>"$DIR/logs/install.log" 2>&1 \
    || die "kubectl apply of manifests/crds, namespace, serviceaccount and rbac failed: $(tail -n 5 "$DIR/logs/install.log")"
  "${k[@]}" wait --for condition=established --timeout=60s crd --all >>"$DIR/logs/install.log" 2>&1 \
    || die "CRDs not established within 60s: $(tail -n 5 "$DIR/logs/install.log")"
  # The controller identity can do what the RBAC grants, as soon as the cache has it.
  deadline=$((SECONDS + 30))
  until [[ "$(kubectl --kubeconfig "$DIR/controller.kubeconfig" auth can-i watch httproutes.gateway.networking.k8s.io -A 2>/dev/null)" == yes ]]; do
    ((SECONDS < deadline)) || die "the controller identity was not granted manifests/rbac.yaml within 30s"
    sleep 0.2
  done
  if [[ -n "${INTERLOCK_CLUSTER_OWNER:-}" ]]; then watch_owner "$INTERLOCK_CLUSTER_OWNER" "$DIR"; fi
  log "up in $((SECONDS - started)) s: https://127.0.0.1:$APISERVER_PORT (kubeconfigs in $DIR)"
}

watch_owner() {  # watch_owner PID DIR: `down DIR` once PID is gone (checked every 2 s)
  pid_alive "$1" || die "INTERLOCK_CLUSTER_OWNER=$1: no such process"
  # Its own session, so the owner's terminal or process group ending does not take it along;
  # it execs `down`, which then knows its own pid is the watcher's and does not stop itself.
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 2; done; exec "$2" down "$3"' \
    watch "$1" "$repo/hack/real-cluster.sh" "$2" >>"$2/logs/owner-watch.log" 2>&1 </dev/null &
  echo $! >"$2/pids/owner-watch"
}

down() {
  local dir=$1
  [[ -d "$dir/pids" ]] || { log "nothing running in $dir"; return 0; }
  if [[ -f "$dir/pids/owner-watch" && "$(cat "$dir/pids/owner-watch")" != "$$" ]]; then
    stop_pid owner-watch "$dir/pids/owner-watch"
  fi
  rm -f "$dir/pids/owner-watch"
  stop_pid kube-controller-manager "$dir/pids/kube-controller-manager"
  stop_pid kube-apiserver "$dir/pids/kube-apiserver"
  stop_pid etcd "$dir/pids/etcd"
  log "down: $dir"
}

restart() {
  DIR="$(cd "$1" && pwd)"
  load_env "$DIR"
  stop_pid kube-apiserver "$DIR/pids/kube-apiserver"
  start_apiserver "$DIR"
  wait_ready "$DIR" 90
  log "kube-apiserver restarted on port $APISERVER_PORT"
}

[[ $# -eq 2 ]] || usage
case "$1" in
  up) up "$2" ;;
  down) down "$2" ;;
  restart) restart "$2" ;;
  env) load_env "$2"; cat "$2/cluster.env" ;;
  *) usage ;;
esac
