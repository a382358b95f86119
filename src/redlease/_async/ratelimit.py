"""RateLimiter: fixed window or GCRA, one script and one key per subject."""

from __future__ import annotations

from typing import Any

import redis.asyncio
from redis.exceptions import RedisError

from .._core import ratelimit as core
from .._core import validate
from .._core.ratelimit import RateLimit
from .._core.scripts import Script
from ..errors import RateLimitUnavailable
from .client import check_client
from .runtime import runtime_for

__all__ = ["AsyncRateLimiter"]


class AsyncRateLimiter:
    """At most ``limit`` units per ``window`` seconds for each subject (a user, an IP, ...).

    ``RateLimiter(client, "api", limit=20, window=60.0)``; ``limiter.hit("user:42")`` takes one
    unit (``cost`` more) and returns a :class:`~redlease.RateLimit`: ``allowed``, ``remaining``,
    ``retry_after`` and ``reset_after`` (seconds). ``algorithm="fixed"`` is a window that starts
    at the subject's first hit; ``"gcra"`` allows a burst of ``limit`` and then spreads the
    rate evenly (see :mod:`redlease._core.ratelimit` for both, and how they compare with the
    ``limits`` package). Each call is one atomic script; refused hits are never counted.

    A Redis failure raises :class:`~redlease.RateLimitUnavailable` (never a made-up answer):
    catch it to fail open or closed, as suits you.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        limit: int = 20,
        window: float = 60.0,
        algorithm: str = "fixed",
        prefix: str = "redlease",
    ) -> None:
        """Describe a limiter; nothing is sent to Redis until :meth:`hit`.

        :param client: your redis-py client.
        :param name: the limiter's name (str or bytes, no braces).
        :param limit: units per window (int >= 1); also GCRA's burst.
        :param window: seconds (0 < window <= 30 days).
        :param algorithm: ``"fixed"`` (the default) or ``"gcra"``.
        :param prefix: the key prefix (no white space or braces).
        """
        check_client(client)
        self._client = client
        self.name = name
        self._prefix = validate.prefix(prefix)
        self._name = core.limiter_name(validate.name(name))
        self.limit = core.limit(limit)
        self._window_ms = validate.ttl_ms(window, "window")
        self.window = self._window_ms / 1000
        self.algorithm = core.algorithm(algorithm)
        self._script = core.GCRA if self.algorithm == "gcra" else core.FIXED

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.name!r} {self.algorithm} "
            f"limit={self.limit} window={self.window}>"
        )

    async def hit(self, key: str | bytes, cost: int = 1) -> RateLimit:
        """Take ``cost`` units (1 <= cost <= limit) for subject ``key`` if they are allowed.

        A refused hit takes nothing. A ``cost`` above the limit raises ``ValueError``: it
        could never pass.
        """
        return await self._call(key, cost, consume=True)

    async def peek(self, key: str | bytes, cost: int = 1) -> RateLimit:
        """Whether a hit of ``cost`` would be allowed now, taking nothing (read-only).

        ``remaining`` is what is left before such a hit.
        """
        return await self._call(key, cost, consume=False)

    async def reset(self, key: str | bytes) -> bool:
        """Forget subject ``key``'s hits; True if it had any trace."""
        raw = await self._run(core.RESET, self._key(key), [], "reset")
        return bool(int(raw))

    # -- plumbing ---------------------------------------------------------------------------
    def _key(self, key: str | bytes) -> bytes:
        return core.key(self._prefix, self._name, self.algorithm, validate.name(key, "key"))

    async def _call(self, key: str | bytes, cost: int, *, consume: bool) -> RateLimit:
        subject = self._key(key)
        args = [self.limit, self._window_ms, core.cost(cost, self.limit), int(consume)]
        raw = await self._run(self._script, subject, args, "hit" if consume else "peek")
        return core.decode(raw, self.limit)

    async def _run(self, script: Script, key: bytes, args: list[Any], action: str) -> Any:
        try:
            return await runtime_for(self._client).backend.run(script, [key], args)
        except RedisError as exc:
            raise RateLimitUnavailable(
                f"could not {action} rate limiter {self.name!r}: Redis failed: {exc}",
                name=self.name,
            ) from exc
