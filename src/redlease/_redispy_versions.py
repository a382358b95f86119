"""Drive redis-py connections the same way on every supported redis-py (>= 5.0.1), sync and asyncio.

redlease runs its scripts on connections it takes from a private pool, so it depends on a few
connection-level calls whose form moved between redis-py releases:

=========================================  ===========================  ======================
call                                       changed in                   what this module does
=========================================  ===========================  ======================
``pool.get_connection(command_name)``      5.3: name optional, and      passes a name only to
                                           deprecated (warns) if given  pools that require one
sync ``conn.read_response(timeout=...)``   8.0: added (before: no       8.0+: uses it; before:
                                           per-read timeout at all)     sets the socket timeout
asyncio ``read_response(timeout=...)``     never raises on expiry: it   ``wait_for`` around a
                                           returns ``None``, like nil   plain read; raises
default ``retry``                          6.0: 3 retries, 8.0: 10      ``Retry(NoBackoff(), 0)``
default ``socket_timeout``, connect        8.0: 5 s (before: none)      5 s in a private pool
``aclose()`` (Redis, PubSub, pool)         5.0.1 (5.0.0: ``close()``)   floor is 5.0.1
=========================================  ===========================  ======================

``AsyncConnections`` is for ``_async/``; ``scripts/unasync.py`` renames it to ``Connections``,
the sync form, for ``_sync/``. Both have the same methods. A read that runs out of time raises
:class:`redis.exceptions.TimeoutError` and leaves the connection disconnected (redis-py
disconnects on a timed-out or cancelled read); callers still :meth:`drop` a connection after any
error other than a complete error reply, before releasing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import re
import select
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, TimeoutError


def _hiredis_packer() -> Callable[[tuple[Any, ...]], Any] | None:
    """hiredis' ``pack_command``, if hiredis (redis-py's optional C parser) is installed: it
    writes a command in one call."""
    try:
        module = importlib.import_module("hiredis")
    except ImportError:  # pragma: no cover - depends on what is installed
        return None
    packer: Callable[[tuple[Any, ...]], Any] | None = getattr(module, "pack_command", None)
    return packer


_hiredis_pack = _hiredis_packer()

__all__ = [
    "REDIS_FLOOR",
    "AsyncConnections",
    "Connections",
    "check_redis_version",
    "private_kwargs",
    "redis_version_error",
]

REDIS_FLOOR = (5, 0, 1)
"""The oldest redis-py redlease supports: 5.0.1 added ``aclose()`` to asyncio clients, pub/subs
and pools (5.0.0 has only ``close()``, deprecated from 5.0.1 on), which redlease and its tests
use. Everything else older releases lack is bridged here. Keep in step with pyproject.toml."""

MIN_WAIT = 0.001
"""Shortest read timeout, in seconds: a zero socket timeout would mean non-blocking mode (an
``OSError``, not a timeout), and ``wait_for(..., 0)`` would cancel a reply already received."""

DEFAULT_SOCKET_TIMEOUT = 5.0
"""Socket and connect timeout of a private pool whose client sets none (redis-py 8's defaults).
Before redis-py 8 the default is no timeout at all: a hung server would block the connect
handshake (``CLIENT SETINFO``, ``AUTH``, ``SELECT``) and every untimed read forever."""

_COMMAND = "EVALSHA"
"""What a pool that requires a command name (redis-py < 5.3) is told; plain and blocking pools
ignore it."""


FAST_PACK = _hiredis_pack is not None
"""Whether :func:`pack_command` packs in C (hiredis is installed): faster than redis-py's
packer, which walks the arguments in Python before it calls the same function."""


def pack_command(parts: tuple[Any, ...]) -> bytes:
    """One command (``bytes``, ``str``, ``int`` or ``float`` parts) in the protocol's form, as
    redis-py writes it (a float as its ``repr``; a ``str`` as UTF-8)."""
    if _hiredis_pack is not None:
        return bytes(_hiredis_pack(parts))
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        if not isinstance(part, bytes):
            part = (repr(part) if isinstance(part, float) else str(part)).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


def socket_of(conn: Any) -> Any:
    """redis-py's socket of a connection (a private attribute: the one place we read it)."""
    return conn._sock


def _version_tuple(text: str) -> tuple[int, ...] | None:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return None
    return tuple(int(part or 0) for part in match.groups())


def redis_version_error(version: str | None = None) -> str | None:
    """Why the installed redis-py (or ``version``) cannot be used, or None when it can.

    A version that cannot be parsed (a source checkout, say) is given the benefit of the doubt.
    """
    text = str(getattr(redis, "__version__", "")) if version is None else version
    found = _version_tuple(text)
    if found is None or found >= REDIS_FLOOR:
        return None
    floor = ".".join(map(str, REDIS_FLOOR))
    return (
        f"redlease needs redis-py >= {floor}, but redis {text} is installed "
        f"(at {getattr(redis, '__file__', '?')}); upgrade it: pip install 'redis>={floor}'"
    )


def check_redis_version() -> None:
    """Raise ImportError, saying what to install, when the installed redis-py is too old."""
    error = redis_version_error()
    if error is not None:
        raise ImportError(error)


def _needs_command_name(pool_type: Any) -> bool:
    """Whether ``pool_type.get_connection`` requires a command name (redis-py < 5.3)."""
    known = _NEEDS_COMMAND_NAME.get(pool_type)
    if known is None:
        try:
            params = list(inspect.signature(pool_type.get_connection).parameters.values())
        except (TypeError, ValueError):  # pragma: no cover - an exotic pool: assume modern
            params = []
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        known = any(p.kind in positional and p.default is p.empty for p in params[1:])
        _NEEDS_COMMAND_NAME[pool_type] = known
    return known


def _reads_with_timeout(connection_type: Any) -> bool:
    """Whether sync ``read_response`` takes ``timeout=`` (redis-py >= 8.0)."""
    known = _READS_WITH_TIMEOUT.get(connection_type)
    if known is None:
        try:
            params = inspect.signature(connection_type.read_response).parameters
        except (TypeError, ValueError):  # pragma: no cover
            return False
        known = _READS_WITH_TIMEOUT[connection_type] = "timeout" in params
    return known


_NEEDS_COMMAND_NAME: dict[Any, bool] = {}
_READS_WITH_TIMEOUT: dict[Any, bool] = {}


def private_kwargs(pool: Any, retry: Any, timeout: float | None = None) -> dict[str, Any]:
    """Connection settings for a private pool like ``pool`` (see ``private_pool``), with
    ``retry`` (a no-retry policy of the pool's own library: valkey-py has its own classes)."""
    kwargs = dict(pool.connection_kwargs)
    kwargs["retry"] = retry
    for key in ("socket_timeout", "socket_connect_timeout"):
        if kwargs.get(key) is None:
            kwargs[key] = DEFAULT_SOCKET_TIMEOUT
    # Before 6.0 these make a connection build Retry(NoBackoff(), 1) when ``retry`` is None;
    # with an explicit retry they only add error classes to a zero-try policy. Drop them anyway.
    kwargs.pop("retry_on_timeout", None)
    kwargs.pop("retry_on_error", None)
    if timeout is not None:
        kwargs["socket_timeout"] = timeout
        kwargs["socket_connect_timeout"] = max(timeout, 1.0)
    return kwargs


class _Cut:
    """Closes a connection's socket under a pending read (its timer's callback)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.done = False

    def __call__(self) -> None:
        self.done = True
        writer = getattr(self._conn, "_writer", None)
        if writer is not None:
            writer.transport.abort()  # the read sees the end of the stream at once


class AsyncConnections:
    """Connection-level calls on redis-py asyncio pools and connections."""

    @staticmethod
    def no_retry() -> Any:
        """A retry policy that never retries (redis-py 6 retries 3 times, 8 ten times)."""
        return redis.asyncio.retry.Retry(NoBackoff(), 0)

    @staticmethod
    def private_pool(pool: Any, timeout: float | None = None) -> Any:
        """A pool like ``pool`` (same connection class and settings) that never retries.

        A socket or connect timeout that ``pool`` leaves unset is ``DEFAULT_SOCKET_TIMEOUT``.
        With ``timeout``, its connections answer within ``timeout`` seconds instead of the
        socket timeout, and get at least a second to connect.
        """
        kwargs = private_kwargs(pool, AsyncConnections.no_retry(), timeout)
        return redis.asyncio.ConnectionPool(connection_class=pool.connection_class, **kwargs)

    @staticmethod
    async def get(pool: Any) -> Any:
        """A connected connection from ``pool`` (give it back with :meth:`release`)."""
        if _needs_command_name(type(pool)):
            return await pool.get_connection(_COMMAND)
        return await pool.get_connection()

    @staticmethod
    async def send(conn: Any, *args: Any, check_health: bool = True) -> None:
        """Write one command (packed by redis-py, written as :meth:`write` does)."""
        await AsyncConnections.write(conn, conn.pack_command(*args), check_health)

    @staticmethod
    async def write(conn: Any, packed: list[bytes], check_health: bool) -> None:
        """Write a packed command (see :func:`pack_command`).

        redis-py wraps every write in ``asyncio.wait_for`` when the connection has a socket
        timeout, as every private pool's has: a task per write, and on Python 3.10-3.11 a
        cancellation that comes as the write ends is swallowed. So a connected socket gets
        the bytes directly (the transport buffers them; every command's reply is read before
        more than a few are written); only a due health check goes through redis-py's write.
        A broken socket shows on the read that follows.
        """
        if not conn.is_connected:
            await conn.connect()  # the handshake, bounded without wait_for (handshake())
        if check_health and conn.health_check_interval:
            await conn.send_packed_command(packed, check_health=True)
            return
        conn._writer.writelines(packed)

    @staticmethod
    async def read(conn: Any, timeout: float | None) -> Any:
        """The next reply, within ``timeout`` seconds (``None``: the socket timeout).

        Raises :class:`redis.exceptions.TimeoutError` when it does not come in time; never
        returns ``None`` for a missing reply (``read_response(timeout=...)`` would). In time,
        the connection is cut (closed under the read, which then fails and redis-py
        disconnects it), so a timeout never cancels the caller's task: a cancellation that
        comes as the reply arrives is never mistaken for the timeout, nor swallowed, as
        ``asyncio.wait_for`` does on Python 3.10 and 3.11 when both happen at once.
        """
        if timeout is None:
            return await conn.read_response()
        cut = _Cut(conn)
        timer = asyncio.get_running_loop().call_later(max(timeout, MIN_WAIT), cut)
        try:
            reply = await conn.read_response()
        except ConnectionError as exc:
            if cut.done:
                raise TimeoutError(f"no reply within {timeout:.3f} s") from exc
            raise
        finally:
            timer.cancel()
        if cut.done:  # cut as the reply came: the reply stands, the connection does not
            await conn.disconnect(nowait=True)
        return reply

    @staticmethod
    async def drop(conn: Any) -> None:
        """Disconnect at once, without waiting for the server (it may be hung)."""
        await conn.disconnect(nowait=True)

    @staticmethod
    def forget(conns: list[Any]) -> None:
        """At garbage collection of their keeper: nothing to do for asyncio connections,
        whose close needs the event loop (``redlease.asyncio.close()`` closes them)."""
        conns.clear()

    @staticmethod
    def connected(conn: Any) -> bool:
        """Whether ``conn`` is connected (its socket open)."""
        return bool(conn.is_connected)

    @staticmethod
    async def stale(conn: Any) -> bool:
        """Whether a kept idle connection cannot be used as it is: closed by the server (or
        left with data). An idle connection has nothing to read, so a socket that is readable
        (data, or the server's close) is stale; redis-py 5's ``can_read_destructive`` misses a
        close the event loop has not seen yet."""
        if not conn.is_connected:
            return True
        reader, writer = getattr(conn, "_reader", None), getattr(conn, "_writer", None)
        if reader is not None and reader.at_eof():
            return True
        sock = None if writer is None else writer.get_extra_info("socket")
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):  # closed under us
            return True
        return bool(readable)

    @staticmethod
    async def release(pool: Any, conn: Any) -> None:
        """Give ``conn`` back to ``pool`` (after :meth:`drop` if its state is unknown)."""
        await pool.release(conn)

    @staticmethod
    async def handshake(conn: Any, timeout: float | None, inner: Any = None) -> None:
        """A new connection's handshake (AUTH/HELLO, SELECT, CLIENT SETINFO; ``inner``, the
        pool's own ``redis_connect_func``, in its place if set), within ``timeout`` seconds
        in all instead of the connection's socket timeout per reply.

        The socket timeout is lifted meanwhile (redis-py would write through ``wait_for``)
        and the connection is cut in time, as :meth:`read` does."""
        saved = conn.socket_timeout
        conn.socket_timeout = None
        cut = _Cut(conn)
        loop = asyncio.get_running_loop()
        timer = None if timeout is None else loop.call_later(max(timeout, MIN_WAIT), cut)
        try:
            if inner is None:
                await conn.on_connect()
            else:
                result = inner(conn)
                if inspect.isawaitable(result):
                    await result
        except ConnectionError as exc:
            if cut.done:
                raise TimeoutError(f"no handshake within {timeout:.3f} s") from exc
            raise
        finally:
            conn.socket_timeout = saved
            if timer is not None:
                timer.cancel()
        if cut.done:  # cut as it ended: the connection is closed
            raise TimeoutError(f"no handshake within {timeout:.3f} s")


class Connections:
    """Connection-level calls on redis-py (sync) pools and connections."""

    @staticmethod
    def no_retry() -> Any:
        """A retry policy that never retries (redis-py 6 retries 3 times, 8 ten times)."""
        return redis.retry.Retry(NoBackoff(), 0)

    @staticmethod
    def private_pool(pool: Any, timeout: float | None = None) -> Any:
        """A pool like ``pool`` (same connection class and settings) that never retries.

        A socket or connect timeout that ``pool`` leaves unset is ``DEFAULT_SOCKET_TIMEOUT``.
        With ``timeout``, its connections answer within ``timeout`` seconds instead of the
        socket timeout, and get at least a second to connect.
        """
        kwargs = private_kwargs(pool, Connections.no_retry(), timeout)
        return redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)

    @staticmethod
    def get(pool: Any) -> Any:
        """A connected connection from ``pool`` (give it back with :meth:`release`)."""
        if _needs_command_name(type(pool)):
            return pool.get_connection(_COMMAND)
        return pool.get_connection()

    @staticmethod
    def send(conn: Any, *args: Any, check_health: bool = True) -> None:
        """Write one command."""
        conn.send_command(*args, check_health=check_health)

    @staticmethod
    def write(conn: Any, packed: list[bytes], check_health: bool) -> None:
        """Write a packed command (see :func:`pack_command`): one ``sendall``."""
        conn.send_packed_command(packed, check_health=check_health)

    @staticmethod
    def read(conn: Any, timeout: float | None) -> Any:
        """The next reply, within ``timeout`` seconds (``None``: the socket timeout).

        Raises :class:`redis.exceptions.TimeoutError` when it does not come in time, and
        redis-py disconnects the connection. Before redis-py 8 there is no per-read timeout:
        the socket's own timeout is set for this read and put back after it. The bound is
        per socket read, as in redis-py 8: a reply that trickles in may take longer.
        """
        if timeout is None:
            return conn.read_response()
        timeout = max(timeout, MIN_WAIT)
        sock = socket_of(conn)
        if sock is None:  # redis-py 8 would fail with an AttributeError from its parser
            raise ConnectionError("connection closed before its reply was read")
        if _reads_with_timeout(type(conn)):
            return conn.read_response(timeout=timeout)
        sock.settimeout(timeout)
        try:
            return conn.read_response()
        finally:
            if socket_of(conn) is sock:  # still connected: back to the client's socket timeout
                sock.settimeout(conn.socket_timeout)

    @staticmethod
    def drop(conn: Any) -> None:
        """Disconnect at once (closing a socket does not wait for the server)."""
        conn.disconnect()

    @staticmethod
    def forget(conns: list[Any]) -> None:
        """At garbage collection of their keeper: close the kept connections now, before the
        collector finalizes their sockets in arbitrary order (a ``ResourceWarning``)."""
        while conns:
            with contextlib.suppress(Exception):  # best effort, during garbage collection
                conns.pop().disconnect()

    @staticmethod
    def connected(conn: Any) -> bool:
        """Whether ``conn`` is connected (its socket open)."""
        return socket_of(conn) is not None

    @staticmethod
    def stale(conn: Any) -> bool:
        """Whether a kept idle connection cannot be used as it is: closed by the server (or
        left with data). An idle connection has nothing to read, so a socket that is readable
        (data, or the server's close) is stale: one ``select`` call, where redis-py's
        ``can_read`` costs a non-blocking read, two ``settimeout`` calls and an exception."""
        sock = socket_of(conn)
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except Exception:  # any library's error (valkey-py's are not redis-py's): unusable
            return True
        return bool(readable)

    @staticmethod
    def release(pool: Any, conn: Any) -> None:
        """Give ``conn`` back to ``pool`` (after :meth:`drop` if its state is unknown)."""
        pool.release(conn)

    @staticmethod
    def handshake(conn: Any, timeout: float | None, inner: Any = None) -> None:
        """A new connection's handshake (AUTH/HELLO, SELECT, CLIENT SETINFO; ``inner``, the
        pool's own ``redis_connect_func``, in its place if set) with each reply within
        ``timeout`` seconds instead of the connection's socket timeout."""
        sock = socket_of(conn)
        if not hasattr(sock, "settimeout"):  # fakeredis' in-process socket: nothing to bound
            timeout = conn.socket_timeout
        else:
            sock.settimeout(timeout)  # the sync connection reads with its socket's timeout
        try:
            if inner is None:
                conn.on_connect()
            else:
                inner(conn)
        finally:
            if socket_of(conn) is sock and timeout != conn.socket_timeout:
                sock.settimeout(conn.socket_timeout)
