#!/usr/bin/env bash
# Builds the OpenID Connect provider the identity tests run against, from its Go module at a
# pinned release, into a cache outside the checkout keyed by version (like
# hack/build-real-binaries.sh): a fresh clone on the same machine reuses it, a second run is a
# no-op.
#
# Dex (github.com/dexidp/dex) does not resolve as a module on the Go proxy (its tags carry no /v2
# module path, so `go list -m -versions` offers only v2.13.0+incompatible), so this builds the
# example OpenID provider that ships with zitadel's oidc module (example/server): discovery, JWKS
# (a new signing key id on each start, which is what the key-rotation test uses), the
# authorization-code flow with PKCE, refresh tokens, userinfo, a username/password login form,
# static clients ("web" with secret "secret") and static users from a JSON file (USERS_FILE).
# Its environment: PORT, REDIRECT_URI (comma-separated), USERS_FILE. The issuer is
# http://localhost:$PORT/.
#
# Usage: hack/build-idp.sh        # prints the binary's path on its last line
# Env:   INTERLOCK_CACHE (default ~/.cache/interlock), ZITADEL_OIDC_VERSION
set -euo pipefail

# shellcheck source=hack/go-build.sh
source "$(dirname "$0")/go-build.sh"

ZITADEL_OIDC_VERSION="${ZITADEL_OIDC_VERSION:-v3.52.0}"
BIN="$CACHE/bin/zitadel-oidc-$ZITADEL_OIDC_VERSION"

require_go "the test OpenID provider"

if [[ -x "$BIN/oidc-example-server" ]]; then
  log "cached: $BIN/oidc-example-server"
  echo "$BIN/oidc-example-server"
  exit 0
fi

mkdir -p "$BIN"
go_scratch
start=$SECONDS

cd "$work"
printf 'module interlock.dev/testidp\n\ngo 1.26\n' >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/zitadel/oidc/v3/example/server"
GO
log "resolving github.com/zitadel/oidc/v3@$ZITADEL_OIDC_VERSION"
go get "github.com/zitadel/oidc/v3@$ZITADEL_OIDC_VERSION" >/dev/null 2>"$work/get.log" || { cat "$work/get.log" >&2; die "go get github.com/zitadel/oidc/v3@$ZITADEL_OIDC_VERSION failed"; }
go mod tidy -e >/dev/null 2>"$work/tidy.log" || { cat "$work/tidy.log" >&2; die "go mod tidy failed in $work"; }
log "building the example OpenID provider"
go build -trimpath -ldflags "-s -w" -o "$BIN/oidc-example-server.tmp" github.com/zitadel/oidc/v3/example/server \
  || die "go build github.com/zitadel/oidc/v3/example/server failed"
mv "$BIN/oidc-example-server.tmp" "$BIN/oidc-example-server"

log "built in $((SECONDS - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"
echo "$BIN/oidc-example-server"
