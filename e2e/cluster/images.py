"""OCI images for the local node, made without a registry.

The pod sandbox image is the static ``pause`` program packed into an OCI
archive here; our own images arrive as archives too (``docker save``) and are
imported into the node's containerd under the names the kubelet asks for.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any


def normalize_image_name(name: str) -> str:
    """The fully qualified reference the kubelet asks the runtime for.

    ``worker:1`` is ``docker.io/library/worker:1`` to the kubelet, and
    containerd finds an image only under that exact name.
    """
    first, _, rest = name.partition("/")
    if not rest:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


def _blob(layout: tarfile.TarFile, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    layout.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


def write_oci_image(
    files: dict[str, Path],
    *,
    name: str,
    entrypoint: list[str],
    out: Path,
    user: str | None = None,
) -> Path:
    """Write a one-layer OCI image archive (``ctr images import`` reads it).

    ``files`` maps paths inside the image to host files (copied with mode).
    """
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        for inside, host in files.items():
            info = tar.gettarinfo(str(host), arcname=inside.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with host.open("rb") as fh:
                tar.addfile(info, fh)
    layer_tar = layer.getvalue()
    layer_gz = gzip.compress(layer_tar, mtime=0)
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, **({"User": user} if user else {})},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    with tarfile.open(out, mode="w") as layout:
        config_desc = _blob(layout, json.dumps(image_config).encode())
        layer_desc = _blob(layout, layer_gz)
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer_desc}],
        }
        manifest_desc = _blob(layout, json.dumps(manifest).encode())
        tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
        index = {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    **manifest_desc,
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": normalize_image_name(name),
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
        for member, payload in (
            ("oci-layout", {"imageLayoutVersion": "1.0.0"}),
            ("index.json", index),
        ):
            data = json.dumps(payload).encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            layout.addfile(info, io.BytesIO(data))
    return out
