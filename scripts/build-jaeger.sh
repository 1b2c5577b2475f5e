#!/usr/bin/env bash
# Build the pinned Jaeger (the tracing backend tests/tracing/ sends spans to:
# an OTLP receiver and a query API on loopback) from the Go module proxy,
# once, into a cache outside the repo -- as e2e/cluster/build.sh does for the
# Kubernetes binaries (same cache root, same Go module and build caches).
#
# Why from source: these machines pull neither images nor release binaries;
# the Go module proxy is reachable.  A warm cache makes this a no-op.
# Jaeger's go.mod has replace directives, so `go install pkg@version` refuses
# it: the module is downloaded and built as the main module, with its own
# go.mod and go.sum (checked against the Go checksum database).
#
# Usage: bash scripts/build-jaeger.sh [--check] [--print-path]
# Environment: TASKSCALE_CACHE_DIR (default ${XDG_CACHE_HOME:-~/.cache}/taskscale),
#   GO (default /usr/local/go/bin/go, else `go`), TASKSCALE_BUILD_JOBS (go build -p).
set -euo pipefail

main() {
  JAEGER_VERSION=v1.76.0  # the Go module's version (Jaeger v2's cmd/jaeger)
  check_only=0 print_path=0
  for arg in "$@"; do
    case "$arg" in
      --check) check_only=1 ;;
      --print-path) print_path=1 ;;
      *) echo "build-jaeger.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
  done
  cache="${TASKSCALE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/taskscale}"
  bin="$cache/jaeger/$JAEGER_VERSION/bin"
  ldflags="-s -w"
  fp="$(printf '%s\n' "$JAEGER_VERSION" "$ldflags" | sha256sum | cut -d' ' -f1)"
  current() { [ -x "$bin/jaeger" ] && [ "$(cat "$bin/.stamp-jaeger" 2>/dev/null)" = "$fp" ]; }
  if [ "$print_path" = 1 ]; then echo "$bin/jaeger"; exit 0; fi
  if current; then [ "$check_only" = 1 ] || echo "build-jaeger.sh: jaeger $JAEGER_VERSION up to date" >&2; exit 0; fi
  [ "$check_only" = 0 ] || exit 1

  GO="${GO:-}"
  if [ -z "$GO" ]; then
    if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else GO="$(command -v go || true)"; fi
  fi
  [ -n "$GO" ] && [ -x "$GO" ] || { echo "build-jaeger.sh: no Go toolchain (set GO=)" >&2; exit 1; }
  mkdir -p "$cache" "$bin"
  exec 9>"$cache/.build-jaeger.lock"
  flock 9
  if current; then exit 0; fi  # another process built it meanwhile
  export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}"
  export GOCACHE="${GOCACHE:-$cache/go/build}"
  export GOFLAGS="-trimpath -buildvcs=false -modcacherw -mod=readonly"
  export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
  jobs="${TASKSCALE_BUILD_JOBS:-$(( $(nproc) < 2 ? $(nproc) : 2 ))}"
  start=$SECONDS
  echo "build-jaeger.sh: building jaeger $JAEGER_VERSION (a cold build takes several minutes)" >&2
  "$GO" mod download github.com/jaegertracing/jaeger@"$JAEGER_VERSION"
  src="$GOMODCACHE/github.com/jaegertracing/jaeger@$JAEGER_VERSION"
  stage="$(mktemp -d "$cache/.stage.XXXXXX")"
  trap 'rm -rf "$stage"' EXIT
  (cd "$src" && "$GO" build -p "$jobs" -ldflags "$ldflags" -o "$stage/jaeger" ./cmd/jaeger)
  mv -f "$stage/jaeger" "$bin/jaeger"
  echo "$fp" > "$bin/.stamp-jaeger"
  echo "build-jaeger.sh: built in $((SECONDS - start)) s" >&2
}

main "$@"
