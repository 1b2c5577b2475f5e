"""``taskscale crd``: print the TaskScaler CustomResourceDefinition.

The wheel carries the CRD (a copy of deploy/crd/taskscaler.yaml kept current
by charts/taskscale/sync-crd.sh), so a cluster without Helm can be prepared
with ``taskscale crd | kubectl apply -f -``.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from typing import Any


def crd_text() -> str:
    """The CRD manifest shipped in the package."""
    return (resources.files("taskscale") / "controller" / "crd.yaml").read_text(encoding="utf-8")


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "crd", help="print the TaskScaler CRD (taskscale crd | kubectl apply -f -)"
    )
    p.set_defaults(func=_print)


def _print(args: argparse.Namespace) -> int:
    sys.stdout.write(crd_text())
    return 0
