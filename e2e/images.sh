#!/usr/bin/env bash
# Build the taskscale worker and controller images for the e2e suite (or for
# a local cluster), plus example-redis (Debian's redis-server, for the chart's
# example Redis where redis:7.2 can't be pulled), and optionally save them as
# archives for `ctr import` or `kind load image-archive`.
#
# Usage: bash e2e/images.sh [--tag TAG] [--save DIR]
# Environment:
#   BASE_IMAGE   base image (default: python:3.11-slim if it is already
#                present locally, else the debootstrap base of
#                deploy/base-image.sh, made on first use)
#   CA_BUNDLE    CA bundle handed to pip as a build secret
#                (default /etc/ssl/certs/ca-certificates.crt if present)
#   DOCKER       docker client (default /usr/bin/docker: it has BuildKit)
# stdout: one line per image, "target=image:tag"; timings go to stderr.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag=e2e save_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --save) save_dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "images.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
docker_cli="${DOCKER:-}"
if [ -z "$docker_cli" ]; then
  if [ -x /usr/bin/docker ]; then docker_cli=/usr/bin/docker; else docker_cli=docker; fi
fi
export DOCKER="$docker_cli" DOCKER_BUILDKIT=1
"$docker_cli" info >/dev/null 2>&1 || { echo "images.sh: Docker engine unreachable (start dockerd)" >&2; exit 1; }

base="${BASE_IMAGE:-}"
if [ -z "$base" ]; then
  if "$docker_cli" image inspect python:3.11-slim >/dev/null 2>&1; then
    base=python:3.11-slim
  else
    t0=$SECONDS
    base="$(bash "$repo/deploy/base-image.sh" --print-tag)"
    echo "images.sh: base $base ready in $((SECONDS - t0)) s" >&2
  fi
fi
# The version the images are labelled with (org.opencontainers.image.version).
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml" | head -1)"
secret=()
ca="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
[ -s "$ca" ] && secret=(--secret "id=cacert,src=$ca")

for target in worker controller example-redis; do
  image="taskscale-$target:$tag"
  t0=$SECONDS
  "$docker_cli" build -q -f "$repo/deploy/Dockerfile" --target "$target" \
    --build-arg "BASE_IMAGE=$base" --build-arg "VERSION=$version" "${secret[@]}" \
    -t "$image" "$repo" >/dev/null
  size="$("$docker_cli" image inspect --format '{{.Size}}' "$image")"
  echo "images.sh: $image built in $((SECONDS - t0)) s, $((size / 1000000)) MB" >&2
  if [ -n "$save_dir" ]; then
    mkdir -p "$save_dir"
    "$docker_cli" save -o "$save_dir/taskscale-$target.tar" "$image"
  fi
  echo "$target=$image"
done
