"""A throw-away certificate authority and kubeconfigs for the local cluster (openssl)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from e2e.cluster.processes import ClusterError

# --- certificates -------------------------------------------------------------

_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = {usage}
authorityKeyIdentifier = keyid
{sans}
"""


class Pki:
    """A throw-away CA and the certificates of one cluster, made with openssl."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_cert = self.dir / "ca.crt"
        self.ca_key = self.dir / "ca.key"
        openssl = shutil.which("openssl")
        if openssl is None:
            raise ClusterError("openssl not found (Debian package openssl)")
        self._openssl = openssl

    def _run(self, *args: str) -> None:
        result = subprocess.run([self._openssl, *args], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ClusterError(f"openssl {args[0]} failed: {result.stderr.strip()}")

    def _config(self, name: str, usage: str = "clientAuth", sans: Sequence[str] = ()) -> Path:
        path = self.dir / f"{name}.cnf"
        san_line = f"subjectAltName = {', '.join(sans)}" if sans else ""
        path.write_text(_OPENSSL_CONFIG.format(usage=usage, sans=san_line))
        return path

    def key(self, name: str) -> Path:
        """A new P-256 private key (PKCS#8 PEM)."""
        path = self.dir / f"{name}.key"
        self._run(
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)
        )
        path.chmod(0o600)
        return path

    def public_key(self, name: str) -> Path:
        """The public half of ``<name>.key``, as ``<name>.pub``."""
        path = self.dir / f"{name}.pub"
        self._run("pkey", "-in", str(self.dir / f"{name}.key"), "-pubout", "-out", str(path))
        return path

    def make_ca(self, common_name: str = "taskscale-local-ca") -> None:
        self.key("ca")
        self._run(
            "req",
            "-x509",
            "-new",
            "-key",
            str(self.ca_key),
            "-subj",
            f"/CN={common_name}",
            "-days",
            "365",
            "-config",
            str(self._config("ca")),
            "-extensions",
            "ca",
            "-out",
            str(self.ca_cert),
        )

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        sans: Sequence[str] = (),
        server: bool = False,
    ) -> tuple[Path, Path]:
        """A key and a certificate signed by the CA; returns (cert, key)."""
        key = self.key(name)
        csr = self.dir / f"{name}.csr"
        cert = self.dir / f"{name}.crt"
        subject = "".join(f"/O={org}" for org in organizations) + f"/CN={common_name}"
        usage = "serverAuth, clientAuth" if server else "clientAuth"
        config = self._config(name, usage, sans)
        self._run(
            "req",
            "-new",
            "-key",
            str(key),
            "-subj",
            subject,
            "-config",
            str(config),
            "-out",
            str(csr),
        )
        self._run(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(self.ca_cert),
            "-CAkey",
            str(self.ca_key),
            "-set_serial",
            str(int.from_bytes(os.urandom(8), "big")),
            "-days",
            "365",
            "-extfile",
            str(config),
            "-extensions",
            "leaf",
            "-out",
            str(cert),
        )
        return cert, key


def write_kubeconfig(
    path: Path, *, server: str, ca_cert: Path, client_cert: Path, client_key: Path, user: str
) -> Path:
    """A self-contained kubeconfig (credentials embedded; JSON is valid YAML)."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client_cert),
                    "client-key-data": b64(client_key),
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
        "preferences": {},
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path
