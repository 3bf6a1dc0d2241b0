#!/usr/bin/env bash
# Runs the given hack/ build scripts one after another, printing each one's time, wall and CPU
# (user + sys, its children's included: what a quiet machine would take, whatever the load): CI
# (.ci/run) runs it in the background, so that the tools build while the steps that need none of
# them run. Stops at the first failure (the failing script's own log says why).
#
# Usage: hack/build-tools.sh build-real-binaries build-idp ...   # script names without .sh
# Env:   what the scripts honour (INTERLOCK_CACHE, ...)
set -euo pipefail
cd "$(dirname "$0")"

for name in "$@"; do
  printf 'ci: %s started at %s\n' "$name" "$(date -u +%T)"
  TIMEFORMAT="ci: $name (background) took %0R s (CPU: user %0U s + sys %0S s)"
  time "./$name.sh" >/dev/null
done
