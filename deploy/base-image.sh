#!/usr/bin/env bash
# Make a local stand-in for the official python:3.11-slim image, for machines
# that can reach a Debian mirror and PyPI but no container registry.
#
# Why: deploy/Dockerfile takes its base as a build argument (default
# python:3.11-slim). Where that image can't be pulled, a Debian bookworm
# root filesystem made with debootstrap (python3.11 + venv + CA certificates)
# and `docker import`ed serves the same purpose: both have `python3` 3.11 on
# PATH and a working `python3 -m venv`.
#
# The root filesystem is cached as a tarball keyed by suite, mirror and
# package list, so a warm machine only re-imports it (or does nothing when the
# image is already loaded).
#
# Usage: bash deploy/base-image.sh [--refresh] [--print-tag]
#   --refresh    rebuild the cached tarball even if it exists
#   --print-tag  print only the image tag on stdout (logs go to stderr)
# Environment:
#   TASKSCALE_CACHE_DIR    cache root (default ${XDG_CACHE_HOME:-~/.cache}/taskscale)
#   TASKSCALE_BASE_IMAGE   tag to produce (default taskscale-base:bookworm)
#   TASKSCALE_DEB_MIRROR   Debian mirror (default: the first deb.debian.org-style
#                          URI in /etc/apt/sources.list*, else http://deb.debian.org/debian)
#   DOCKER                 docker client (default /usr/bin/docker if present)
set -euo pipefail

refresh=0 print_tag=0
for arg in "$@"; do
  case "$arg" in
    --refresh) refresh=1 ;;
    --print-tag) print_tag=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "base-image.sh: unknown argument: $arg (try --help)" >&2; exit 2 ;;
  esac
done

log() { echo "base-image.sh: $*" >&2; }
die() { echo "base-image.sh: ERROR: $*" >&2; exit 1; }

suite=bookworm
packages=python3,python3-venv,ca-certificates
tag="${TASKSCALE_BASE_IMAGE:-taskscale-base:$suite}"
cache="${TASKSCALE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/taskscale}/images"
docker_cli="${DOCKER:-}"
if [ -z "$docker_cli" ]; then
  if [ -x /usr/bin/docker ]; then docker_cli=/usr/bin/docker; else docker_cli=docker; fi
fi

mirror="${TASKSCALE_DEB_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | head -n1 | tr -d ' ' || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

key="$(printf '%s\n' "$suite" "$mirror" "$packages" minbase | sha256sum | cut -c1-12)"
tarball="$cache/taskscale-base-$suite-$key.tar"
label="io.taskscale.base-key=$key"

"$docker_cli" info >/dev/null 2>&1 || die "cannot reach the Docker engine with $docker_cli (is dockerd running?)"

have_image() {
  [ "$("$docker_cli" image inspect --format '{{index .Config.Labels "io.taskscale.base-key"}}' "$tag" 2>/dev/null)" = "$key" ]
}

if [ "$refresh" = 0 ] && have_image; then
  log "$tag is loaded and current (key $key)"
  [ "$print_tag" = 1 ] && echo "$tag"
  exit 0
fi

if [ "$refresh" = 1 ] || [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
  [ "$(id -u)" = 0 ] || die "debootstrap needs root"
  mkdir -p "$cache"
  root="$(mktemp -d "$cache/.rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  t0=$SECONDS
  log "debootstrap $suite from $mirror (packages: $packages)"
  debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >&2 \
    || die "debootstrap failed (see above)"
  # Slim the tree the way the official slim images do: no apt lists, caches
  # or docs; keep copyright files.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/usr/share/doc/*/changelog* "$root"/usr/share/man "$root"/usr/share/info "$root"/tmp/* \
    "$root"/var/log/*.log "$root"/var/log/apt
  "$root/usr/bin/python3" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || die "the $suite root filesystem has no python3.11"
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
  mv -f "$tarball.tmp" "$tarball"
  rm -rf "$root"; trap - EXIT
  log "root filesystem cached as $tarball in $((SECONDS - t0)) s"
fi

t0=$SECONDS
"$docker_cli" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  --change "LABEL $label" \
  "$tarball" "$tag" >/dev/null
log "imported $tag in $((SECONDS - t0)) s"
[ "$print_tag" = 1 ] && echo "$tag"
exit 0
