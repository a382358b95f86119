"""RateLimiter: one or more limits per subject, checked and counted by one script;
``acquire`` and ``throttle`` wait until a hit passes (see :mod:`redlease._core.throttle`)."""

from __future__ import annotations

import functools
import random
import time
from types import TracebackType
from typing import ParamSpec, TypeVar

import redis.asyncio

from .. import _observe
from .._core import ratelimit as core
from .._core import rates as notation
from .._core import throttle as reserving
from .._core import validate
from .._core.ratelimit import RateLimit
from .._core.rates import Rate
from .._synchronization import AsyncBackground, AsyncEvent, AsyncFunction, AsyncShield
from ..errors import RateLimitExceeded, RateLimitUnavailable
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["AsyncRateLimiter", "AsyncThrottle"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


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

    ``acquire(key)`` waits until a hit passes and counts it; ``throttle(key)`` does so
    around a block or each call of a function. ``mode="shadow"`` refuses nothing: a hit
    the limits refuse passes, and is logged and counted by the metrics instead.

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
        mode: str = "enforce",
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
        :param mode: ``"enforce"`` (the default) or ``"shadow"``: count and report what
            would be refused, refuse nothing (``acquire`` then never waits).
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
        self.mode = reserving.mode(mode)
        self._reserves = reserving.reserves(self.algorithm, self.rates)

    def __repr__(self) -> str:
        limits = ";".join(map(str, self.rates))
        return f"<{type(self).__name__} {self.name!r} {self.algorithm} {limits!r}>"

    async def hit(self, key: str | bytes, cost: int = 1) -> RateLimit:
        """Take ``cost`` units for subject ``key`` from every limit, if all allow them.

        A refused hit takes nothing from any limit. A ``cost`` above the smallest limit (or
        burst) raises ``ValueError``: it could never pass. In ``mode="shadow"`` a refused hit
        comes back allowed, with ``shadowed=True``, and is logged and counted instead.
        """
        result = await self._call(key, cost, consume=True)
        if result.allowed or self.mode == "enforce":
            return result
        refusing = next(r for r in result.limits if not r.allowed)
        refused_by = str(Rate(window=refusing.window, amount=refusing.limit))
        subject = key if isinstance(key, str) else key.decode(errors="replace")
        _observe.rate_limit_shadowed(str(self.name), subject, cost, result.retry_after, refused_by)
        return reserving.shadowed(result)

    async def acquire(
        self, key: str | bytes, cost: int = 1, *, timeout: float | None = None
    ) -> RateLimit:
        """Wait until a hit of ``cost`` for ``key`` passes, and count it; its answer.

        With one ``"gcra"`` or ``"token_bucket"`` limit the waiter reserves its instant in
        one script call and sleeps until then, sending nothing: waiters pass in the order
        they reserved, never together. Otherwise it hits, and when refused sleeps
        ``retry_after`` (plus up to 20% jitter) and hits again: less exact.

        :param timeout: seconds it may wait (``None``: as long as it takes; ``0``: a hit
            that raises instead of returning ``allowed=False``). A wait known to be longer
            raises :class:`~redlease.RateLimitExceeded` at once, taking nothing.

        Cancelled (asyncio) or interrupted while it sleeps, it gives its reservation back,
        unless a later one was made on top of it (the slot is then spent). In ``mode="shadow"``
        it is :meth:`hit`: it never waits.
        """
        limit = validate.timeout(timeout)
        units = core.cost(cost, self._most)
        if self.mode == "shadow":
            return await self.hit(key, units)
        began = time.monotonic()
        try:
            if self._reserves:
                result = await self._reserve(key, units, limit)
            else:
                result = await self._retry(key, units, limit)
        except RateLimitExceeded:
            _observe.not_acquired("ratelimit", str(self.name), time.monotonic() - began)
            raise
        _observe.acquired("ratelimit", str(self.name), time.monotonic() - began)
        return result

    def throttle(
        self,
        key: str | bytes | reserving.Key,
        *,
        cost: int = 1,
        timeout: float | None = None,
    ) -> AsyncThrottle:
        """Wait through :meth:`acquire` before a block or each call of a function.

        ``async with limiter.throttle("partner-api"):`` or, as a decorator,
        ``@limiter.throttle(key=lambda user, *a, **k: f"user:{user}")``: ``key`` is a
        subject, or a function of the call's arguments that returns one (decorator only).
        An asyncio limiter decorates coroutine functions, a sync one plain functions.
        """
        return AsyncThrottle(self, key, cost, timeout)

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

    async def _reserve(self, key: str | bytes, cost: int, timeout: float | None) -> RateLimit:
        """acquire with one gcra / token_bucket limit: reserve, then sleep once."""
        keys, rate, burst = self._keys(key), self.rates[0], self.bursts[0]
        args = reserving.reserve_args(cost=cost, rate=rate, burst=burst, bound=timeout)
        raw = await self._run(reserving.reserve_script(self.algorithm), keys, args, "acquire")
        got = reserving.decode_reservation(raw)
        if not got.reserved:
            raise self._exceeded(key, timeout, got.wait)
        if got.wait > 0:
            try:
                await AsyncEvent().wait(got.wait)
            except BaseException:
                undo = reserving.unreserve_args(stamp=got.stamp, cost=cost, rate=rate, burst=burst)
                run = self._runtime().backend.run
                AsyncShield.background(lambda left: run(reserving.UNRESERVE, keys, undo, left))
                raise
        return reserving.admitted(got, rate)

    async def _retry(self, key: str | bytes, cost: int, timeout: float | None) -> RateLimit:
        """acquire otherwise: hit, and sleep ``retry_after`` with jitter while refused."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            result = await self._call(key, cost, consume=True)
            if result.allowed:
                return result
            left = None if deadline is None else deadline - time.monotonic()
            slept = reserving.pause(result.retry_after, left, random.random())
            if slept is None:
                raise self._exceeded(key, timeout, result.retry_after)
            await AsyncEvent().wait(slept)

    def _exceeded(self, key: str | bytes, timeout: float | None, wait: float) -> RateLimitExceeded:
        return RateLimitExceeded(
            f"rate limiter {self.name!r}: {key!r} cannot pass within the timeout "
            f"({timeout} s): it would wait {wait:.3f} s",
            name=self.name,
            retry_after=wait,
            timeout=timeout,
        )

    async def _call(self, key: str | bytes, cost: int, *, consume: bool) -> RateLimit:
        keys = self._keys(key)
        args = [core.cost(cost, self._most), int(consume), *self._limit_args]
        raw = await self._run(self._script, keys, args, "hit" if consume else "peek")
        return core.decode_reply(raw, self.rates)[1]


class AsyncThrottle:
    """What ``limiter.throttle()`` returns: a context manager and a decorator
    that wait through ``limiter.acquire()``."""

    def __init__(
        self,
        limiter: AsyncRateLimiter,
        key: str | bytes | reserving.Key,
        cost: int,
        timeout: float | None,
    ) -> None:
        if isinstance(key, (str, bytes)):
            validate.name(key, "key")
        elif not callable(key):
            raise TypeError(
                f"key must be a str, bytes or a function of the call's arguments, "
                f"got {type(key).__name__}"
            )
        self.limiter = limiter
        self.key = key
        self.cost = core.cost(cost, min(*(r.amount for r in limiter.rates), *limiter.bursts))
        self.timeout = validate.timeout(timeout)

    async def __aenter__(self) -> RateLimit:
        if not isinstance(self.key, (str, bytes)):
            raise TypeError(
                "throttle(key=<function>) needs the call's arguments: use it as a decorator, "
                "or give the subject"
            )
        return await self.limiter.acquire(self.key, self.cost, timeout=self.timeout)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Nothing to give back: the hit was counted when the block began."""

    def __call__(self, func: AsyncFunction[_P, _R]) -> AsyncFunction[_P, _R]:
        """Decorate ``func``: each call first waits through ``acquire`` for its subject."""
        validate.decorated(func, "RateLimiter.throttle", coroutine=AsyncBackground.ASYNC)

        @functools.wraps(func)
        async def throttled(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            subject = reserving.subject(self.key, args, kwargs)
            await self.limiter.acquire(subject, self.cost, timeout=self.timeout)
            return await func(*args, **kwargs)

        return throttled
