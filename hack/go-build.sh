# What hack/build-real-binaries.sh and hack/build-idp.sh share (sourced by both, not run): the
# cache folder outside the checkout, log/die lines named after the script, the check that Go is
# installed, and the scratch module folder both build in (removed on exit, static binaries,
# modules resolved from the proxy).

CACHE="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
_script="$(basename "$0" .sh)"

log() { printf '%s: %s %s\n' "$_script" "$(date -u +%T)" "$*" >&2; }
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

# go_build_from MODULE VERSION PACKAGE OUTPUT [go build flags...]: build PACKAGE of MODULE at
# VERSION from a scratch module that requires it (its go.mod's versions are what is resolved),
# into OUTPUT (written whole or not at all). Call go_scratch first.
go_build_from() {
  local module=$1 version=$2 package=$3 output=$4
  shift 4
  mkdir -p "$work/module" && cd "$work/module"
  printf 'module interlock.dev/%s\n\ngo 1.26\n' "$(basename "$output")" >go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$package" >tools.go
  log "resolving $module@$version"
  go get "$module@$version" >/dev/null 2>"$work/get.log" || { cat "$work/get.log" >&2; die "go get $module@$version failed"; }
  go mod tidy -e >/dev/null 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; die "go mod tidy failed in $work/module"; }
  log "building $package"
  go build -trimpath "$@" -o "$output.tmp" "$package" || die "go build $package failed"
  mv "$output.tmp" "$output"
}
