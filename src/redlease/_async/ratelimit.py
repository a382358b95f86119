"""RateLimiter: one or more limits per subject, checked and counted by one script."""

from __future__ import annotations

import redis.asyncio

from .._core import ratelimit as core
from .._core import rates as notation
from .._core import validate
from .._core.ratelimit import RateLimit
from .._core.rates import Rate
from ..errors import RateLimitUnavailable
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["AsyncRateLimiter"]


class AsyncRateLimiter(AsyncPrimitive):
    """At most so many units per window for each subject (a user, an IP, ...), under one or
    more limits at once.

    ``RateLimiter(client, "api", rate="100/minute;5000/day")`` (the ``limits`` notation) or
    ``RateLimiter(client, "api", limit=20, window=60.0)``; ``limiter.hit("user:42")`` takes
    one unit (``cost`` more) from every limit, or from none if any refuses, and returns a
    :class:`~redlease.RateLimit`: the tightest limit's ``allowed``, ``remaining``,
    ``retry_after`` and ``reset_after`` (seconds), with every limit's answer in ``.limits``.
    ``algorithm`` is ``"fixed"``, ``"sliding"``, ``"gcra"`` or ``"token_bucket"`` (see
    :mod:`redlease._core.ratelimit` for what each lets through, and what it costs). Each call
    is one atomic script on the server's clock; refused hits are never counted. ``rates``
    holds the limits, shortest window first; ``limit`` and ``window`` are the first one's.

    A Redis failure raises :class:`~redlease.RateLimitUnavailable` (never a made-up answer):
    catch it to fail open or closed, as suits you (``redlease.web`` and ``redlease.django``
    make you choose).
    """

    _unavailable_error = RateLimitUnavailable
    _what = "rate limiter"

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        rate: str | None = None,
        limit: int | None = None,
        window: float | None = None,
        algorithm: str = "fixed",
        burst: int | tuple[int, ...] | None = None,
        prefix: str = "redlease",
    ) -> None:
        """Describe a limiter; nothing is sent to Redis until :meth:`hit`.

        :param client: your redis-py client.
        :param name: the limiter's name (str or bytes, no braces).
        :param rate: its limits, e.g. ``"10/second;1000/day"``; exclusive with ``limit`` and
            ``window``.
        :param limit: units per window (int >= 1; default 20); also GCRA's burst.
        :param window: seconds (0 < window <= 30 days; default 60).
        :param algorithm: ``"fixed"`` (the default), ``"sliding"``, ``"gcra"`` or
            ``"token_bucket"``.
        :param burst: ``"token_bucket"`` only: the bucket's size (default: the limit), one
            int for every limit or one per limit (shortest window first).
        :param prefix: the key prefix (no white space or braces).
        """
        check_client(client)
        self._client = client
        self.name = name
        self._prefix = validate.prefix(prefix)
        self._name = core.limiter_name(validate.name(name))
        self.rates: tuple[Rate, ...] = notation.rates(rate, limit, window)
        self.limit = self.rates[0].amount
        self.window = self.rates[0].window
        self.algorithm = core.algorithm(algorithm)
        self.bursts = core.bursts(burst, self.rates, self.algorithm)
        self._script = core.script(self.algorithm)
        self._limit_args = core.limit_args(self.rates, self.bursts)
        self._most = min(min(r.amount for r in self.rates), min(self.bursts))

    def __repr__(self) -> str:
        limits = ";".join(map(str, self.rates))
        return f"<{type(self).__name__} {self.name!r} {self.algorithm} {limits!r}>"

    async def hit(self, key: str | bytes, cost: int = 1) -> RateLimit:
        """Take ``cost`` units for subject ``key`` from every limit, if all allow them.

        A refused hit takes nothing from any limit. A ``cost`` above the smallest limit (or
        burst) raises ``ValueError``: it could never pass.
        """
        return await self._call(key, cost, consume=True)

    async def peek(self, key: str | bytes, cost: int = 1) -> RateLimit:
        """Whether a hit of ``cost`` would be allowed now, taking nothing (read-only).

        ``remaining`` is what is left before such a hit.
        """
        return await self._call(key, cost, consume=False)

    async def reset(self, key: str | bytes) -> bool:
        """Forget subject ``key``'s hits under every limit; True if it had any trace."""
        raw = await self._run(core.RESET, self._keys(key), [], "reset")
        return bool(int(raw))

    # -- plumbing ---------------------------------------------------------------------------
    def _keys(self, key: str | bytes) -> list[bytes]:
        subject = validate.name(key, "key")
        return core.keys(self._prefix, self._name, self.algorithm, subject, self.rates)

    async def _call(self, key: str | bytes, cost: int, *, consume: bool) -> RateLimit:
        keys = self._keys(key)
        args = [core.cost(cost, self._most), int(consume), *self._limit_args]
        raw = await self._run(self._script, keys, args, "hit" if consume else "peek")
        return core.decode_reply(raw, self.rates)[1]
