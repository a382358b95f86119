"""The tests' server: :class:`redlease.server.RedisServer` (the demo's) with what the tests
need on top: faults (kill, restart, pause, resume), persistence, TLS, Sentinel mode and the
``DEBUG`` command (``enable-debug-command local`` on servers that know the setting).

The topologies (:mod:`tests.topology`) are built out of these servers::

    with RedisServer(appendonly=True, appendfsync="always") as server:
        server.kill()        # SIGKILL: no flush; the data directory is kept
        server.start()       # recovers what the append-only file holds, on the same port
        server.pause()       # SIGSTOP: connects succeed, nothing answers
        server.resume()
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from redlease import server as base
from redlease.server import HOST

__all__ = ["RedisServer", "TLSFiles", "binary_version"]

_TLS_RESERVED = frozenset({"tls-port", "tls-cert-file", "tls-key-file", "tls-ca-cert-file"})


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for a TLS-only server: a CA, a server pair and a client pair signed by it.

    :func:`tests.topology.make_tls_files` generates a set. The server certificate is
    valid for ``127.0.0.1``, so clients can keep hostname checking on.
    """

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_config(self) -> dict[str, str]:
        """The redis.conf lines that make a server require a client certificate from our CA."""
        return {
            "tls-cert-file": str(self.server_cert),
            "tls-key-file": str(self.server_key),
            "tls-ca-cert-file": str(self.ca_cert),
            "tls-auth-clients": "yes",
        }

    def client_kwargs(self) -> dict[str, Any]:
        """``redis.Redis`` keyword arguments for a TLS connection with the client certificate."""
        return {
            "ssl": True,
            "ssl_ca_certs": str(self.ca_cert),
            "ssl_certfile": str(self.client_cert),
            "ssl_keyfile": str(self.client_key),
        }


_BANNER = re.compile(r"\b(Redis|Valkey) server v=(\d+)\.(\d+)\.(\d+)")
_VALKEY_AS_REDIS = (7, 2, 4)  # the Redis every valkey release forked from, and speaks
_SINCE_7_0 = frozenset({"enable-debug-command"})  # settings a 6.2 server refuses


@functools.lru_cache(maxsize=16)
def binary_version(binary: str) -> tuple[tuple[int, int, int] | None, str]:
    """``(the Redis version it speaks, a description)`` of a server ``binary``, from its
    ``--version`` banner (a valkey-server speaks Redis 7.2); ``(None, why)`` if unknown.
    Read once per binary."""
    try:
        banner = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{binary}: --version failed: {exc}"
    found = _BANNER.search(banner)
    if found is None:
        return None, f"{binary}: {banner!r}"
    numbers = (int(found[2]), int(found[3]), int(found[4]))
    version = _VALKEY_AS_REDIS if found[1] == "Valkey" else numbers
    return version, f"{binary} ({found[1]} {'.'.join(map(str, numbers))})"


class RedisServer(base.RedisServer):
    """A server of the tests: ``kill()`` keeps the data directory (as a crash leaves its
    files), so a later ``start()``/``restart()`` recovers whatever the append-only file holds.

    ``tls=`` makes it listen with TLS only (``port`` is then the TLS port, and the plain port
    is closed); ``sentinel=True`` runs it as a Sentinel (``config`` holds the ``sentinel ...``
    lines).
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        port: int | None = None,
        appendonly: bool = False,
        appendfsync: Literal["always", "everysec", "no"] = "everysec",
        config: Mapping[str, str] | None = None,
        tls: TLSFiles | None = None,
        sentinel: bool = False,
    ) -> None:
        """Configure (not start) a server; ``config`` lines are written verbatim."""
        reserved = _TLS_RESERVED.intersection(config or {}) if tls else ()
        if reserved:
            raise ValueError(f"RedisServer manages these settings itself: {sorted(reserved)}")
        settings = {
            "appendonly": "yes" if appendonly else "no",
            "appendfsync": appendfsync,
            "enable-debug-command": "local",
        }
        super().__init__(binary=binary, port=port, config={**settings, **(config or {})})
        self._tls = tls
        self._sentinel = sentinel
        self._paused = False

    def kill(self) -> None:
        """SIGKILL the server: no persistence flush. The data directory is kept."""
        self._halt(signal.SIGKILL)

    def restart(self, *, empty: bool = False) -> RedisServer:
        """Stop and start again on the same port; ``empty=True`` deletes the data first."""
        self._halt(signal.SIGTERM)
        if empty and self.data_dir is not None:
            for entry in self.data_dir.iterdir():
                if entry.is_dir():
                    shutil.rmtree(entry)
                elif entry.name != "server.log":
                    entry.unlink()
        self._start(keep_port=True)
        return self

    def pause(self) -> None:
        """SIGSTOP: the server hangs, but TCP connects still succeed (kernel backlog)."""
        pid = self._signal(signal.SIGSTOP)
        self._paused = True
        if hasattr(os, "waitid"):  # missing on macOS before Python 3.13
            # Signals are asynchronous: block until it has stopped (or died), without reaping.
            os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)

    def resume(self) -> None:
        """SIGCONT a paused server (harmless if running and not paused)."""
        self._signal(signal.SIGCONT)
        self._paused = False

    @property
    def paused(self) -> bool:
        """True between pause() and resume()."""
        return self._paused and self.running

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT`` (``rediss://`` for a TLS server)."""
        return f"{'rediss' if self._tls else 'redis'}://{HOST}:{self.port}"

    @property
    def tls(self) -> TLSFiles | None:
        """The TLS files the server was configured with, or None (plain TCP)."""
        return self._tls

    # -- the base's hooks ------------------------------------------------------------------

    def _state(self) -> str:
        return "paused" if self.paused else super()._state()

    def _client_kwargs(self) -> dict[str, Any]:
        """For a TLS server: the client certificate and CA (``client()``'s kwargs win)."""
        return self._tls.client_kwargs() if self._tls else {}

    def _config(self, binary: str, port: int) -> dict[str, str]:
        settings = super()._config(binary, port)
        version = binary_version(binary)[0]
        if version is not None and version < (7, 0):  # DEBUG needs no permission before 7.0
            settings = {k: v for k, v in settings.items() if k not in _SINCE_7_0}
        if self._tls:
            settings.update(self._tls.server_config(), port="0", **{"tls-port": str(port)})
        return settings

    def _command(self, binary: str, conf: Path) -> list[str]:
        return [*super()._command(binary, conf), *(["--sentinel"] if self._sentinel else [])]

    def _spawn(self, binary: str, port: int) -> None:
        super()._spawn(binary, port)
        self._paused = False

    def _halt(self, sig: signal.Signals) -> None:
        self._paused = False
        super()._halt(sig)

    def _signal(self, sig: signal.Signals) -> int:
        pid = self.pid
        if pid is None:
            raise RuntimeError(f"{self!r} is not running")
        os.kill(pid, sig)
        return pid
