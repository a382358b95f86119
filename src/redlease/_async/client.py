"""The narrow interface to Redis: check the client's kind, and run a script once.

redlease does not send its scripts through your client's command path: redis-py 8 retries a
failed call several times with backoff (seconds against a dead server), and a lock must fail
within the caller's timeout plus one socket timeout. It uses a small pool of its own, built
from your client's connection class and settings (host, TLS, auth, Sentinel, timeouts) with
client-side retries turned off, and runs each script with one EVALSHA on one connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, ResponseError

from .._core import validate
from .._core.scripts import Script
from .._synchronization import AsyncReads

__all__ = ["check_client", "private_pool", "run_script"]

EXPECTED = redis.asyncio.Redis


def check_client(client: Any, arg: str = "client") -> None:
    """Refuse a client of the wrong kind (a sync client here, or anything else)."""
    validate.client_kind(client, EXPECTED, arg)


def private_pool(client: redis.asyncio.Redis, timeout: float | None = None) -> Any:
    """A pool like ``client``'s whose connections never retry on their own.

    With ``timeout``, its connections answer within ``timeout`` seconds (Redlock's
    per-server deadline) instead of the client's socket timeout; a new connection gets at
    least a second to connect, so that a loaded but healthy server is not taken for a dead one.
    """
    pool: Any = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs["retry"] = redis.asyncio.retry.Retry(NoBackoff(), 0)
    if timeout is not None:
        kwargs["socket_timeout"] = timeout
        kwargs["socket_connect_timeout"] = max(timeout, 1.0)
    return redis.asyncio.ConnectionPool(connection_class=pool.connection_class, **kwargs)


async def run_script(
    pool: Any,
    script: Script,
    keys: Sequence[bytes],
    args: Sequence[Any],
    timeout: float | None = None,
) -> Any:
    """EVALSHA ``script`` once; if the server lost its script cache (NOSCRIPT), EVAL it.

    ``timeout`` bounds each reply (default: the pool's socket timeout); connecting has the
    pool's own timeouts. Raises redis-py's exceptions. A connection whose reply may still be
    on its way (timeout, cancellation) is closed, never handed to the next caller.
    """
    conn = await pool.get_connection()
    try:
        try:
            await conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
            return await AsyncReads.reply(conn, timeout)
        except NoScriptError:
            await conn.send_command("EVAL", script.source, len(keys), *keys, *args)
            return await AsyncReads.reply(conn, timeout)
    except ResponseError:
        raise  # a complete error reply: the connection is in sync
    except BaseException:
        await conn.disconnect()
        raise
    finally:
        await pool.release(conn)
