"""The names the e2e suite installs the chart under, and what its examples serve."""

from __future__ import annotations

import ipaddress

from e2e.cluster.localcluster import SERVICE_CIDR

RELEASE = "tse2e"
WORKER = f"{RELEASE}-taskscale-example-worker"
TYPES = ("sleep", "noop", "fail")  # fail: retries and dead letters (test_scheduler.py)

# The example Redis Service's fixed ClusterIP on the local cluster (no cluster
# DNS there): in the static band of SERVICE_CIDR, which dynamic allocation avoids.
LOCAL_REDIS_CLUSTER_IP = str(ipaddress.ip_network(SERVICE_CIDR).network_address + 10)
