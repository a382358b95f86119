"""The narrow interface to Redis: check the client's kind, run a script by EVALSHA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio
from redis.exceptions import NoScriptError

from .._core.scripts import Script

__all__ = ["check_client", "run_script"]

EXPECTED = redis.asyncio.Redis


def check_client(client: Any, arg: str = "client") -> None:
    """Refuse a client of the wrong kind (a sync client here, or anything else)."""
    if not isinstance(client, EXPECTED):
        kind = f"{type(client).__module__}.{type(client).__qualname__}"
        raise TypeError(
            f"{arg} must be a {EXPECTED.__module__}.{EXPECTED.__qualname__}, got {kind} "
            "(redis.Redis clients go with redlease, redis.asyncio.Redis with redlease.asyncio)"
        )


async def run_script(
    client: redis.asyncio.Redis, script: Script, keys: Sequence[bytes], args: Sequence[Any]
) -> Any:
    """EVALSHA ``script``; if the server lost its script cache (NOSCRIPT), EVAL it once."""
    redis_: Any = client  # redis-py's sync and asyncio stubs differ; the calls do not
    try:
        return await redis_.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return await redis_.eval(script.source, len(keys), *keys, *args)
