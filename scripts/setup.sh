#!/usr/bin/env bash
# Install everything taskscale's tests and demo need on a fresh Debian
# bookworm machine, and skip whatever is already there (a warm machine takes
# seconds). Idempotent; safe to run before every test run.
set -euo pipefail
cd "$(dirname "$0")/.."

# TASKSCALE_SETUP_DEMO=1: only what `make demo` needs -- redis-server, and the
# package with the extras the demo uses (dashboard, demo); no browser, no
# prometheus, no Kubernetes build, no test tools (implies TASKSCALE_SETUP_KUBE=0).
# TASKSCALE_SETUP_KUBE=0: skip the Kubernetes build (the demo needs none of it).
# TASKSCALE_SETUP_E2E=1: also what the end-to-end suite needs: the Docker
# engine (images), containerd + runc + CNI plugins (the local kubelet),
# debootstrap (the base image), busybox-static (the node test's image) and
# the node binaries (kubelet, scheduler, kube-proxy).
# chromium + chromium-driver: the dashboard's browser tests (Selenium drives
# the system browser; nothing is downloaded at test time).
# prometheus: its promtool checks the alert rules (tests/chart/test_alerts.py,
# part of `make test`); e2e scenario 3 runs its server.
DEMO=${TASKSCALE_SETUP_DEMO:-0}
KUBE=${TASKSCALE_SETUP_KUBE:-1}
if [[ $DEMO == 1 ]]; then KUBE=0; fi
if [[ $DEMO == 1 ]]; then
  APT_PACKAGES=(redis-server)
  EXTRAS="dashboard,demo"
else
  APT_PACKAGES=(redis-server chromium chromium-driver prometheus)
  EXTRAS="controller,dashboard,demo,dev"
fi
if [[ $KUBE == 1 ]]; then
  APT_PACKAGES+=(openssl)
fi
if [[ "${TASKSCALE_SETUP_E2E:-0}" == 1 ]]; then
  APT_PACKAGES+=(docker.io containerd runc containernetworking-plugins iptables
                 debootstrap busybox-static)
fi
# TASKSCALE_SETUP_PLAN=1: print what would be installed, install nothing (a test reads it).
if [[ "${TASKSCALE_SETUP_PLAN:-0}" == 1 ]]; then
  echo "apt: ${APT_PACKAGES[*]}"
  echo "extras: $EXTRAS"
  echo "kube: $KUBE"
  exit 0
fi
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
sudo_cmd=""; [[ $(id -u) == 0 ]] || sudo_cmd="sudo"
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  # prometheus without its Recommends: prometheus-node-exporter would be one
  # more daemon listening on every interface (:9100).
  plain=() lean=()
  for pkg in "${missing[@]}"; do
    if [[ $pkg == prometheus ]]; then lean+=("$pkg"); else plain+=("$pkg"); fi
  done
  if ((${#plain[@]})); then
    $sudo_cmd apt-get install -y -qq "${plain[@]}" >/dev/null
  fi
  if ((${#lean[@]})); then
    $sudo_cmd apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null
  fi
fi
# The Debian package starts a system redis on 6379; the tests start their own.
# Its prometheus package starts a server listening on every interface (:9090)
# where an init system runs services; the tests start their own on loopback,
# so a server this script installed is stopped and disabled at once.
if [[ " ${missing[*]} " == *" prometheus "* ]]; then
  if [[ -d /run/systemd/system ]]; then
    $sudo_cmd systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  elif [[ -x /etc/init.d/prometheus ]]; then
    $sudo_cmd invoke-rc.d prometheus stop >/dev/null 2>&1 || true
    $sudo_cmd update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
  echo "setup: prometheus installed for promtool; its system service is stopped and disabled"
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# The stamp records which pyproject.toml and which extras were installed: the
# full set serves the demo too; the demo's set is topped up by a later `make test`.
stamp=.venv/.taskscale-deps
want=$(sha256sum < pyproject.toml | cut -c1-16)
have=$(cat "$stamp" 2>/dev/null || true)
full="$want controller,dashboard,demo,dev"
if [[ $have != "$want $EXTRAS" && $have != "$full" ]]; then
  echo "setup: installing Python packages into .venv ($EXTRAS)"
  if [[ $DEMO != 1 ]]; then
    .venv/bin/pip install -q --upgrade pip
  fi
  .venv/bin/pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
  echo "$want $EXTRAS" > "$stamp"
fi

# The TypeScript client (clients/typescript) its tests run: Debian's nodejs
# and npm only where node is missing; the package's locked npm dependencies
# (npm ci, cache under ~/.cache/taskscale/npm), then the Lua scripts exported
# into it (`taskscale scripts export`: never a hand copy) and the tsc build.
# Each step is skipped while its stamp (the lockfile; the sources and
# scripts) is unchanged.
# Not for the demo (TASKSCALE_SETUP_DEMO=1), which runs no TypeScript.
if [[ $DEMO != 1 ]]; then
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing nodejs npm (apt)"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq nodejs npm >/dev/null
  fi
  ts=clients/typescript
  deps_stamp=$ts/node_modules/.taskscale-lock
  want=$(sha256sum "$ts/package-lock.json" | cut -c1-16)
  if [[ ! -f $deps_stamp || $(cat "$deps_stamp") != "$want" ]]; then
    echo "setup: npm ci in $ts"
    (cd "$ts" && npm ci --cache "$HOME/.cache/taskscale/npm" --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$want" > "$deps_stamp"
  fi
  build_stamp=$ts/dist/.taskscale-build
  want=$(cat "$ts/package-lock.json" "$ts/tsconfig.json" "$ts"/src/*.ts taskscale/scripts/*.lua \
    taskscale/scripts/lib/*.lua taskscale/contract.py taskscale/luascripts.py | sha256sum | cut -c1-16)
  if [[ ! -f $build_stamp || $(cat "$build_stamp") != "$want" || ! -f $ts/lua/manifest.json ]]; then
    echo "setup: building $ts (scripts export, tsc)"
    rm -rf "$ts/lua"
    .venv/bin/taskscale scripts export "$ts/lua" >/dev/null
    (cd "$ts" && node node_modules/typescript/bin/tsc -p tsconfig.json)
    echo "$want" > "$build_stamp"
  fi
fi

# Jaeger, the tracing backend tests/tracing/ sends spans to: built once from
# its Go module into ~/.cache/taskscale/jaeger/<version> (a no-op when warm).
# TASKSCALE_SETUP_JAEGER=0 skips it (those tests then skip); the demo needs none.
if [[ $DEMO != 1 && "${TASKSCALE_SETUP_JAEGER:-1}" == 1 ]]; then
  bash scripts/build-jaeger.sh
fi

if [[ $KUBE == 1 ]]; then
  if [[ "${TASKSCALE_SETUP_E2E:-0}" == 1 ]]; then
    bash e2e/cluster/build.sh --with-node
  else
    bash e2e/cluster/build.sh
  fi
fi
echo "setup: ok"
