#!/usr/bin/env bash
# Create the peer-benchmark virtualenv OUTSIDE the repository, so the peers
# (RQ, arq, dramatiq, Celery, saq) and the profiler never enter taskscale's
# own dependency set. taskscale itself is installed editable from this
# checkout, so the benchmark always measures the code in the working tree.
#
#   bash bench/setup_peers.sh            # create or update, prints the venv path
#   BENCH_VENV=/some/dir bash bench/setup_peers.sh
#
# Idempotent: a stamp file skips pip when the pins below have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${BENCH_VENV:-$HOME/.cache/taskscale/bench-venv}
PY=${PYTHON:-python3}

# Pinned peers: the versions docs/benchmarks.md reports. Change them here only.
# (arq caps redis-py below 6, which in turn picks these celery/kombu/rq.)
PINS=(
  "rq==3.0.0"
  "arq==0.28.0"
  "dramatiq[redis]==2.2.1"
  "celery[redis]==5.6.3"
  "kombu==5.6.2"
  "saq==0.26.4"
  "redis[hiredis]==5.3.1"
  "hiredis==3.5.0"
  "py-spy==0.4.3"
)

if [[ ! -x $VENV/bin/python ]]; then
  echo "setup_peers: creating $VENV" >&2
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
stamp=$VENV/.bench-peers
want=$(printf '%s\n' "${PINS[@]}" | cat - pyproject.toml | sha256sum | cut -c1-16)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "setup_peers: installing peers into $VENV" >&2
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e . "${PINS[@]}"
  echo "$want" > "$stamp"
fi
echo "$VENV"
