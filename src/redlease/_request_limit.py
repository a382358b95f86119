"""A rate limit applied to requests of a sync web framework (Django, Flask, plain WSGI): a
request's subject in, an HTTP verdict out, with a per-client circuit breaker.

The frameworks' modules only find the subject and the client and turn the verdict into their
response; what to answer (``_core/ratelimit_http.py``) and when to stop asking a failing
Redis (``_core/breaker.py``) are decided here, once.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from . import _observe
from ._core import breaker as breakers
from ._core import ratelimit as core
from ._core import ratelimit_http as http
from ._core import rates as notation
from ._core import throttle
from ._sync.ratelimit import RateLimiter
from ._synchronization import ProcessLock
from .errors import RateLimitUnavailable

__all__ = ["RequestLimit", "breaker_of", "given_client", "key_or"]

K = TypeVar("K", bound=Callable[..., Any])

_breakers: weakref.WeakKeyDictionary[Any, breakers.Breaker] = weakref.WeakKeyDictionary()
_guard = ProcessLock()


def breaker_of(client: Any, backoff: float) -> breakers.Breaker:
    """The breaker of ``client``: one per client, so that a request behind an app-wide limit
    and a view's own pays one timeout per back-off, not one per limiter."""
    with _guard:
        found = _breakers.get(client)
        if found is None:
            found = _breakers[client] = breakers.Breaker(backoff)
    return found


def key_or(default: K, key: Any, of: str) -> K:
    """The subject of a request: ``key`` once checked to be a function (of ``of``: "the
    request", "the environ"), or ``default`` when it is None."""
    if key is None:
        return default
    if not callable(key):
        raise TypeError(f"key must be a function of {of}, got {type(key).__name__}")
    return key  # type: ignore[no-any-return]


def given_client(client: Any, backoff: Any) -> dict[str, Callable[[], Any]]:
    """``client_of`` and ``backoff_of`` of limits on a client given when the app is set up
    (Flask, WSGI; Django finds its own from settings), both checked now."""
    if client is None:
        raise TypeError("client must be a redis-py client (redis.Redis), got None")
    seconds = breakers.backoff(backoff)
    return {"client_of": lambda: client, "backoff_of": lambda: seconds}


class RequestLimit:
    """One limiter, made on first use (``client_of()`` is called then): a subject in, a
    verdict out. Bad options fail here, when the app is set up, not at the first request."""

    def __init__(
        self,
        rate: Any,
        name: str,
        *,
        on_unavailable: Any,
        client_of: Callable[[], Any],
        backoff_of: Callable[[], float],
        cost: Any = 1,
        algorithm: Any = "fixed",
        burst: Any = None,
        prefix: str = "redlease",
        mode: Any = "enforce",
    ) -> None:
        rates = notation.parse(rate)
        sizes = core.bursts(burst, rates, core.algorithm(algorithm))
        throttle.mode(mode)
        self.cost = core.cost(cost, min(*(r.amount for r in rates), *sizes))
        self.choice = http.on_unavailable(on_unavailable)
        self.rate, self.name = rate, name
        self._options = {"algorithm": algorithm, "burst": burst, "prefix": prefix, "mode": mode}
        self._client_of, self._backoff_of = client_of, backoff_of
        self._limiter: RateLimiter | None = None
        self._breaker = breakers.Breaker(0)  # replaced by the client's on first use

    def limiter(self) -> RateLimiter:
        """The limiter, made (with its client's breaker) on first use."""
        if self._limiter is None:
            conn = self._client_of()
            self._breaker = breaker_of(conn, self._backoff_of())
            self._limiter = RateLimiter(conn, self.name, rate=self.rate, **self._options)
        return self._limiter

    def __call__(self, subject: str | bytes | None) -> http.Verdict:
        """The verdict on a request of ``subject`` (``None``: exempt, let through)."""
        if subject is None:
            return http.Verdict(None, ())
        limiter, breaker = self.limiter(), self._breaker
        with _guard:  # one trial per back-off, whatever the threads
            asks = breaker.allows(time.monotonic())
        if not asks:
            skipped = RateLimitUnavailable(
                f"not asked: Redis failed, back-off for {breaker.backoff:g} s"
            )
            _observe.rate_limit_unavailable(str(limiter.name), self.choice, skipped, logging.DEBUG)
            return http.outage(self.choice)
        try:
            result = limiter.hit(subject, self.cost)
        except RateLimitUnavailable as exc:
            breaker.failed(time.monotonic())
            _observe.rate_limit_unavailable(str(limiter.name), self.choice, exc)
            return http.outage(self.choice)
        breaker.succeeded()
        return http.verdict(result, shadow=limiter.mode == "shadow")
