# What hack/build-real-binaries.sh and hack/build-idp.sh share (sourced by both, not run): the
# cache folder outside the checkout, log/die lines named after the script, the check that Go is
# installed, and the scratch module folder both build in (removed on exit, static binaries,
# modules resolved from the proxy).

CACHE="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
_script="$(basename "$0" .sh)"

log() { printf '%s: %s\n' "$_script" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# require_go WHAT: stop unless go is on PATH; WHAT says what it is needed to build.
require_go() {
  command -v go >/dev/null 2>&1 || die "go is not installed (needed to build $1; the product itself is Python)"
}

# go_scratch: a scratch folder in $work, removed on exit, and the build environment.
go_scratch() {
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  export GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod"
  export CGO_ENABLED=0
}
