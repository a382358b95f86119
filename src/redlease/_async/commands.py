"""A backend's own commands on one of its connections, through its connection API only
(:class:`Connected`, as the Cluster adapter uses it):

* :func:`run_acknowledged`: a script followed by ``WAIT`` (or ``WAITAOF``), pipelined on ONE
  connection: ``WAIT`` counts the writes of the connection it is sent on, so on any other it
  would acknowledge nothing of the script's;
* :func:`run_id`: which server this is, as its ``INFO server`` says.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from redis.exceptions import NoScriptError, ResponseError

from .._core.kept import forget_frames
from .._core.scripts import Script
from .._redispy_versions import AsyncConnections

__all__ = ["Connected", "info_field", "run_acknowledged", "run_id"]


class Connected(Protocol):
    """What these commands ask of a backend: one connection, used directly."""

    @property
    def socket_timeout(self) -> float | None: ...

    async def checkout(self) -> Any: ...

    async def read(self, conn: Any, since: float, timeout: float | None) -> Any: ...

    async def checkin(self, conn: Any) -> None: ...

    async def discard(self, conn: Any) -> None: ...

    def translated(self) -> AbstractContextManager[None]: ...


async def run_acknowledged(
    server: Connected,
    script: Script,
    keys: Sequence[bytes],
    args: Sequence[Any],
    wait: Sequence[Any],
    wait_timeout: float,
) -> tuple[Any, Any]:
    """EVALSHA ``script`` on ``server`` (EVAL if it lost it), then ``wait``, on one connection.

    Returns ``(script reply, wait reply)``; the wait reply is the ``ResponseError`` the
    server answered instead (e.g. a server with no WAITAOF), for the caller to judge, since
    the script did run. The script's reply comes within the socket timeout, the wait's
    within ``wait_timeout`` more. Raises redis-py's exceptions.
    """
    conn = await server.checkout()
    try:
        with server.translated():
            reply, acked = await _script_then_wait(
                server, conn, ("EVALSHA", script.sha), keys, args, wait, wait_timeout
            )
            if isinstance(reply, NoScriptError):  # the wait ran for nothing: both again
                reply, acked = await _script_then_wait(
                    server, conn, ("EVAL", script.source), keys, args, wait, wait_timeout
                )
    except BaseException:
        await server.discard(conn)
        raise
    await server.checkin(conn)
    if isinstance(reply, ResponseError):
        raise reply
    return reply, acked


async def _script_then_wait(
    server: Connected,
    conn: Any,
    call: tuple[str, str],
    keys: Sequence[bytes],
    args: Sequence[Any],
    wait: Sequence[Any],
    wait_timeout: float,
) -> tuple[Any, Any]:
    """Both replies (an error reply as its exception), the connection left in sync."""
    await conn.send_packed_command(
        conn.pack_commands([(*call, len(keys), *keys, *args), tuple(wait)])
    )
    sent = time.monotonic()
    limit = server.socket_timeout
    replies: list[Any] = []
    for extra in (0.0, wait_timeout):
        try:
            replies.append(await server.read(conn, sent, None if limit is None else limit + extra))
        except ResponseError as exc:  # kept in a local of a frame its traceback passed:
            forget_frames(exc)  # without it, a cycle holds the caller's frames
            replies.append(exc)
    return replies[0], replies[1]


async def run_id(server: Connected, timeout: float | None) -> str:
    """The server's ``run_id``, as its ``INFO server`` says (the reply within ``timeout``
    seconds; ``None``: the socket timeout). Raises redis-py's exceptions."""
    conn = await server.checkout()
    try:
        with server.translated():
            await AsyncConnections.send(conn, "INFO", "server")
            info = await AsyncConnections.read(conn, timeout)
    except BaseException:
        await server.discard(conn)
        raise
    await server.checkin(conn)
    return info_field(info, "run_id")


def info_field(info: bytes | str, field: str) -> str:
    """The value of ``field`` in an INFO reply ("" when absent)."""
    text = info.decode() if isinstance(info, bytes) else info
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return ""
