#!/usr/bin/env bash
# `make e2e`: the chart checks, then the end-to-end suite on a real cluster.
#
#   bash e2e/run.sh [extra pytest args]
#
# Cluster: $KUBECONFIG with TASKSCALE_TEST_USE_KUBECONFIG=1 (kind: also set
# TASKSCALE_E2E_KIND=<cluster name>, see deploy/kind/cluster.yaml), else the
# local cluster of e2e/cluster: with a node (pods really run) as root, host
# processes otherwise (TASKSCALE_E2E_NODE=0 forces that, =1 requires the node).
# Needs the Docker engine (images); started here if we are root and it isn't.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
[ -x "$py" ] || { echo "e2e: no .venv; run make setup" >&2; exit 1; }

docker_cli=/usr/bin/docker; [ -x "$docker_cli" ] || docker_cli=docker
if ! "$docker_cli" info >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null; then
    echo "e2e: starting dockerd (log /tmp/taskscale-dockerd.log)" >&2
    setsid dockerd >/tmp/taskscale-dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 60); do "$docker_cli" info >/dev/null 2>&1 && break; sleep 1; done
  fi
  "$docker_cli" info >/dev/null 2>&1 || { echo "e2e: the Docker engine is not reachable" >&2; exit 1; }
fi

t0=$SECONDS
echo "e2e: chart checks (helm lint, schema, dry runs, RBAC)" >&2
.venv/bin/pytest -q -p no:cacheprovider tests/chart
t1=$SECONDS
echo "e2e: images" >&2
bash e2e/images.sh --tag e2e >/dev/null
t2=$SECONDS
echo "e2e: scenarios" >&2
.venv/bin/pytest -p no:cacheprovider --with-e2e --timeout=1800 -v -s e2e "$@"
if [ "$(id -u)" = 0 ] && [ "${TASKSCALE_TEST_USE_KUBECONFIG:-0}" != 1 ]; then
  echo "e2e: the local node runs real pods (tests/kube/test_local_node.py, test_job_mode_node.py, test_drain_node.py)" >&2
  .venv/bin/pytest -p no:cacheprovider --with-e2e -v -s tests/kube/test_local_node.py \
    tests/kube/test_job_mode_node.py tests/kube/test_drain_node.py
fi
t3=$SECONDS
echo "e2e: chart checks $((t1 - t0)) s, images $((t2 - t1)) s, scenarios $((t3 - t2)) s" >&2
