#!/usr/bin/env bash
# Build the pinned Kubernetes control plane, etcd and helm from the Go module
# proxy, once, into a cache outside the repo.
#
# Why: tests need a real API server, but these machines can pull neither
# images nor release binaries; the Go module proxy is reachable. A warm cache
# makes this script a no-op (binaries + matching stamp file => skip).
#
# Usage: bash e2e/cluster/build.sh [--with-node] [--check] [--print-env]
#   (default)    etcd, kube-apiserver, kube-controller-manager, kubectl, helm
#   --with-node  also kube-scheduler, kubelet, kube-proxy and the pod sandbox
#                program `pause` (for a real node)
#   --check      build nothing; exit 0 if everything asked for is current, 1 if not
#   --print-env  log nothing; stdout always carries only KEY=VALUE lines (paths)
# Environment:
#   TASKSCALE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/taskscale)
#   GO                   Go toolchain (default /usr/local/go/bin/go, else `go`)
#   TASKSCALE_BUILD_JOBS go build -p (default: number of cores, at most 2)
#   TASKSCALE_KUBELET_CGO 1 builds the kubelet with cgo as official builds do;
#                        default 0: it then reuses the other binaries' compiled
#                        packages (cgo recompiles everything above net: +12 min)
set -euo pipefail

# Everything is inside main so that bash parses the whole script before
# running it: editing this file during a long build cannot derail that build.
main() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  # shellcheck source=versions.env
  . "$here/versions.env"

  with_node=0 check_only=0 quiet=0
  for arg in "$@"; do
    case "$arg" in
      --with-node) with_node=1 ;;
      --check) check_only=1 ;;
      --print-env) quiet=1 ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "build.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
  done

  cache="${TASKSCALE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/taskscale}"
  kube_bin="$cache/kube/$KUBE_VERSION/bin"
  etcd_bin="$cache/etcd/$ETCD_VERSION/bin"
  helm_bin="$cache/helm/$HELM_VERSION/bin"

  log() { [ "$quiet" = 1 ] || echo "build.sh: $*" >&2; }
  die() { echo "build.sh: ERROR: $*" >&2; exit 1; }

  kube_control=(kube-apiserver kube-controller-manager kubectl)
  kube_node=(kube-scheduler kubelet kube-proxy)
  kube_wanted=("${kube_control[@]}")
  [ "$with_node" = 1 ] && kube_wanted+=("${kube_node[@]}")

  # Go build flags. A change to any of them, to versions.env or to a wrapper
  # module changes the fingerprint and so triggers a rebuild.
  kube_pkg=k8s.io/component-base/version
  client_pkg=k8s.io/client-go/pkg/version
  kube_minor="${KUBE_VERSION#v1.}"; kube_minor="${kube_minor%%.*}"
  kube_ldflags="-s -w"
  for p in "$kube_pkg" "$client_pkg"; do
    kube_ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$kube_minor"
    kube_ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  helm_ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  etcd_ldflags="-s -w"
  build_tags="notest"

  fingerprint() {  # $1: wrapper module dir or "-"; rest: extra strings
    local dir="$1"; shift
    local f
    {
      cat "$here/versions.env"
      for f in go.mod go.sum main.go; do
        if [ -f "$dir/$f" ]; then cat "$dir/$f"; fi
      done
      printf '%s\n' "$@" "$build_tags"
    } | sha256sum | cut -d' ' -f1
  }
  kube_fp="$(fingerprint "$here/gomod/kube" "$kube_ldflags")"
  kubelet_cgo="${TASKSCALE_KUBELET_CGO:-0}"
  kubelet_fp="$(fingerprint "$here/gomod/kube" "$kube_ldflags" "cgo=$kubelet_cgo")"
  fp_of() { if [ "$1" = kubelet ]; then echo "$kubelet_fp"; else echo "$kube_fp"; fi; }
  etcd_fp="$(fingerprint "$here/gomod/etcd" "$etcd_ldflags")"
  pause_fp="$(fingerprint "$here/gomod/pause" "$etcd_ldflags")"
  helm_fp="$(fingerprint - "$helm_ldflags")"

  is_current() {  # $1: bin dir, $2: name, $3: fingerprint
    [ -x "$1/$2" ] && [ -f "$1/.stamp-$2" ] && [ "$(cat "$1/.stamp-$2")" = "$3" ]
  }

  missing=()
  for b in "${kube_wanted[@]}"; do
    is_current "$kube_bin" "$b" "$(fp_of "$b")" || missing+=("kube:$b")
  done
  if [ "$with_node" = 1 ]; then is_current "$kube_bin" pause "$pause_fp" || missing+=(pause); fi
  is_current "$etcd_bin" etcd "$etcd_fp" || missing+=(etcd)
  is_current "$helm_bin" helm "$helm_fp" || missing+=(helm)

  print_env() {
    echo "TASKSCALE_KUBE_VERSION=$KUBE_VERSION"
    echo "TASKSCALE_KUBE_BIN_DIR=$kube_bin"
    echo "TASKSCALE_ETCD_BIN=$etcd_bin/etcd"
    echo "TASKSCALE_HELM_BIN=$helm_bin/helm"
  }

  if [ "$check_only" = 1 ]; then
    if [ "${#missing[@]}" -eq 0 ]; then print_env; exit 0; fi
    log "not built yet or out of date: ${missing[*]}"
    exit 1
  fi

  if [ "${#missing[@]}" -eq 0 ]; then
    log "up to date (cache $cache), nothing to build"
    print_env
    exit 0
  fi

  # --- cold path ----------------------------------------------------------------
  GO="${GO:-}"
  if [ -z "$GO" ]; then
    if [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; else GO="$(command -v go || true)"; fi
  fi
  [ -n "$GO" ] && [ -x "$GO" ] || die "no Go toolchain found (set GO=/path/to/go; Go >= 1.24 needed)"
  go_minor="$("$GO" env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
  [ -n "$go_minor" ] && [ "$go_minor" -ge 24 ] || die "$GO is $("$GO" env GOVERSION); Kubernetes $KUBE_VERSION needs Go >= 1.24"

  mkdir -p "$cache" "$kube_bin" "$etcd_bin" "$helm_bin"
  # One build at a time per cache (two test sessions may start at once).
  exec 9>"$cache/.build.lock"
  if ! flock -n 9; then
    log "another build is running in this cache; waiting for it"
    flock 9
  fi

  export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}"
  export GOCACHE="${GOCACHE:-$cache/go/build}"
  export GOFLAGS="-trimpath -buildvcs=false -modcacherw -mod=readonly"
  export GOTOOLCHAIN=local GOWORK=off
  jobs="${TASKSCALE_BUILD_JOBS:-$(( $(nproc) < 2 ? $(nproc) : 2 ))}"

  stage="$(mktemp -d "$cache/.stage.XXXXXX")"
  trap 'rm -rf "$stage"' EXIT
  start=$SECONDS
  log "building with $("$GO" env GOVERSION), -p $jobs, into $cache (a cold build takes a long while)"

  install_bin() {  # $1: staged file, $2: bin dir, $3: fingerprint
    local name; name="$(basename "$1")"
    mv -f "$1" "$2/$name"
    echo "$3" > "$2/.stamp-$name"
  }

  nocgo=() cgo=()
  for b in "${kube_wanted[@]}"; do
    # Re-checked under the lock: another process may have just built it.
    is_current "$kube_bin" "$b" "$(fp_of "$b")" && continue
    if [ "$b" = kubelet ] && [ "$kubelet_cgo" = 1 ]; then cgo+=("$b"); else nocgo+=("$b"); fi
  done
  build_kube() {  # $1: CGO_ENABLED; rest: binaries
    local cgo_on="$1"; shift
    [ "$#" -gt 0 ] || return 0
    local pkgs=() b t0=$SECONDS
    for b in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    log "kubernetes $KUBE_VERSION: $* (CGO_ENABLED=$cgo_on)"
    (cd "$here/gomod/kube" && CGO_ENABLED="$cgo_on" "$GO" build -p "$jobs" -tags "$build_tags" \
        -ldflags "$kube_ldflags" -o "$stage/" "${pkgs[@]}") || die "go build of $* failed"
    for b in "$@"; do install_bin "$stage/$b" "$kube_bin" "$(fp_of "$b")"; done
    log "  done in $((SECONDS - t0)) s"
  }
  build_kube 0 "${nocgo[@]}"
  if [ "${#cgo[@]}" -gt 0 ]; then
    command -v "${CC:-gcc}" >/dev/null || die "TASKSCALE_KUBELET_CGO=1 needs a C compiler (gcc)"
    build_kube 1 "${cgo[@]}"
  fi

  if ! is_current "$etcd_bin" etcd "$etcd_fp"; then
    t0=$SECONDS
    log "etcd $ETCD_VERSION"
    (cd "$here/gomod/etcd" && CGO_ENABLED=0 "$GO" build -p "$jobs" -ldflags "$etcd_ldflags" -o "$stage/etcd" .) \
      || die "go build of etcd failed"
    install_bin "$stage/etcd" "$etcd_bin" "$etcd_fp"
    log "  done in $((SECONDS - t0)) s"
  fi

  if [ "$with_node" = 1 ] && ! is_current "$kube_bin" pause "$pause_fp"; then
    log "pause (pod sandbox)"
    (cd "$here/gomod/pause" && CGO_ENABLED=0 "$GO" build -ldflags "$etcd_ldflags" -o "$stage/pause" .) \
      || die "go build of pause failed"
    install_bin "$stage/pause" "$kube_bin" "$pause_fp"
  fi

  if ! is_current "$helm_bin" helm "$helm_fp"; then
    t0=$SECONDS
    log "helm $HELM_VERSION"
    # helm has no replace directives, so `go install pkg@version` works; its
    # go.sum is checked against the Go checksum database.
    (cd "$stage" && GOFLAGS="-trimpath -buildvcs=false -modcacherw" GOBIN="$stage" CGO_ENABLED=0 \
        "$GO" install -p "$jobs" -ldflags "$helm_ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") \
      || die "go install of helm failed"
    install_bin "$stage/helm" "$helm_bin" "$helm_fp"
    log "  done in $((SECONDS - t0)) s"
  fi

  log "all built in $((SECONDS - start)) s"
  print_env
}

main "$@"
