"""Rate limits for ASGI apps: a middleware and a FastAPI dependency (``redlease[web]``).

::

    import redis.asyncio, redlease.web
    client = redis.asyncio.Redis()
    app.add_middleware(redlease.web.RateLimitMiddleware, client=client,
                       rate="100/minute;5000/day", on_unavailable="allow")

    @app.get("/search", dependencies=[Depends(
        redlease.web.rate_limit(client, "10/second", on_unavailable="deny"))])
    async def search(): ...

Each request is one :meth:`redlease.asyncio.RateLimiter.hit` for its subject (by default the
client's address; ``key=redlease.web.header("X-API-Key")`` or any function of the
``Request``, which may return ``None`` to exempt the request). A refused request gets 429 with
``Retry-After`` and the ``RateLimit-*`` headers (draft-ietf-httpapi-ratelimit-headers-06, see
:mod:`redlease._core.ratelimit_http`), which allowed responses carry too.

A FastAPI route that returns a ``Response`` itself (``JSONResponse``, ``StreamingResponse``...)
gets none of the headers a dependency set (FastAPI applies them only to what it builds, and a
dependency cannot reach the response): add :class:`RateLimitHeaders` (or
:class:`RateLimitMiddleware`, which does the same) and such responses carry them too.

``on_unavailable`` has no default: when Redis cannot be reached, ``"allow"`` lets requests
through and ``"deny"`` answers 503. Each such decision is logged (``redlease_event``
``"ratelimit_unavailable"``) and counted by the metrics observer
(:meth:`redlease.metrics.Observer.rate_limit_unavailable`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import _observe
from ._core import ratelimit as core
from ._core import ratelimit_http as http
from .asyncio import RateLimit, RateLimiter, RateLimitUnavailable

__all__ = [
    "Key",
    "RateLimitHeaders",
    "RateLimitMiddleware",
    "client_address",
    "header",
    "rate_limit",
]

Subject = str | bytes | None
Key = Callable[[Request], Subject | Awaitable[Subject]]
"""A request's subject: a function of the ``Request``, sync or async; ``None`` exempts it."""

_FIELDS = "redlease.ratelimit_fields"
"""The scope key under which the dependency leaves its fields for a middleware to add."""


def client_address(request: Request) -> str:
    """The client's IP address (``request.client.host``), or ``"unknown"`` when the server
    gives none. Behind a proxy it is the proxy's: key on a header the proxy sets instead."""
    return request.client.host if request.client is not None else "unknown"


def header(name: str, *, default: Key = client_address) -> Key:
    """Key on request header ``name`` (e.g. ``"X-API-Key"``); requests without it are keyed
    by ``default`` (the client's address)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")

    def by_header(request: Request) -> Subject | Awaitable[Subject]:
        value = request.headers.get(name)
        return default(request) if value is None else value

    return by_header


class _Check:
    """One limiter and its options: a request in, a verdict (and the answer) out."""

    def __init__(self, limiter: RateLimiter, key: Key | None, choice: str, cost: int) -> None:
        if key is not None and not callable(key):
            raise TypeError(f"key must be a function of the request, got {type(key).__name__}")
        self.limiter = limiter
        self.key: Key = client_address if key is None else key
        self.choice = http.on_unavailable(choice)
        most = min(*(rate.amount for rate in limiter.rates), *limiter.bursts)
        self.cost = core.cost(cost, most)  # checked now, not at the first request

    async def __call__(self, request: Request) -> tuple[http.Verdict, RateLimit | None]:
        subject = self.key(request)
        if inspect.isawaitable(subject):
            subject = await subject
        if subject is None:
            return http.Verdict(None, ()), None
        try:
            result = await self.limiter.hit(subject, self.cost)
        except RateLimitUnavailable as exc:
            _observe.rate_limit_unavailable(str(self.limiter.name), self.choice, exc)
            return http.outage(self.choice), None
        return http.verdict(result, shadow=self.limiter.mode == "shadow"), result


def _limiter(client: Any, name: str, rate: str, options: dict[str, Any]) -> RateLimiter:
    return RateLimiter(client, name, rate=rate, **options)


def _adding_fields(scope: Scope, send: Send, own: tuple[tuple[str, str], ...]) -> Send:
    """``send``, adding to the response the fields a route's dependency left in ``scope``,
    then ``own``, each only where the response has no such field (the tighter one wins)."""

    async def send_with_fields(message: Message) -> None:
        if message["type"] == "http.response.start":
            fields = MutableHeaders(scope=message)
            for field, value in (*scope.get(_FIELDS, {}).items(), *own):
                fields.setdefault(field, value)
        await send(message)

    return send_with_fields


class RateLimitHeaders:
    """ASGI middleware that limits nothing: it adds the ``RateLimit-*`` fields a
    :func:`rate_limit` dependency decided to the response, where the route's response lacks
    them, as when a FastAPI route returns a ``Response`` itself.

    ``app.add_middleware(RateLimitHeaders)``; :class:`RateLimitMiddleware` does the same.
    """

    def __init__(self, app: ASGIApp) -> None:
        """Wrap ``app``."""
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _adding_fields(scope, send, ()))


class RateLimitMiddleware:
    """ASGI middleware: every HTTP request of the app counts against ``rate`` for its subject.

    ``app.add_middleware(RateLimitMiddleware, client=..., rate="100/minute",
    on_unavailable="allow")``; WebSocket and lifespan events pass untouched.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        client: redis.asyncio.Redis,
        rate: str,
        on_unavailable: str,
        key: Key | None = None,
        name: str = "http",
        algorithm: str = "fixed",
        burst: int | tuple[int, ...] | None = None,
        cost: int = 1,
        prefix: str = "redlease",
        mode: str = "enforce",
    ) -> None:
        """Wrap ``app``.

        :param client: a ``redis.asyncio`` client (or Cluster client).
        :param rate: the limits, e.g. ``"100/minute;5000/day"``.
        :param on_unavailable: ``"allow"`` or ``"deny"`` (503) while Redis cannot answer.
        :param key: the subject of a request (default :func:`client_address`).
        :param name: the limiter's name (its keys' prefix): one per set of limits.
        :param algorithm: as :class:`redlease.asyncio.RateLimiter`'s (also ``burst``,
            ``prefix``).
        :param cost: units each request takes.
        :param mode: ``"shadow"``: refuse nothing, send no fields; log and count what
            would have been refused (``"enforce"``, the default: refuse it).
        """
        self.app = app
        options = {"algorithm": algorithm, "burst": burst, "prefix": prefix, "mode": mode}
        self._check = _Check(_limiter(client, name, rate, options), key, on_unavailable, cost)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verdict, _ = await self._check(Request(scope))
        if verdict.status is not None:
            response = PlainTextResponse(verdict.body, verdict.status, dict(verdict.headers))
            await response(scope, receive, send)
            return
        # A route's own (tighter) limit wins: its response's fields, or its dependency's.
        await self.app(scope, receive, _adding_fields(scope, send, verdict.headers))


def rate_limit(
    client: redis.asyncio.Redis,
    rate: str,
    *,
    on_unavailable: str,
    key: Key | None = None,
    name: str | None = None,
    algorithm: str = "fixed",
    burst: int | tuple[int, ...] | None = None,
    cost: int = 1,
    prefix: str = "redlease",
    mode: str = "enforce",
) -> Callable[[Request, Response], Awaitable[RateLimit | None]]:
    """A FastAPI dependency: ``Depends(rate_limit(client, "10/second", on_unavailable=...))``.

    A refused request raises ``HTTPException(429)`` with the headers; an allowed one gets
    them on its response (on a ``Response`` the route returns itself, only with
    :class:`RateLimitHeaders` or :class:`RateLimitMiddleware` installed), and the
    dependency's value is the :class:`~redlease.RateLimit`
    (``None`` when exempt or unavailable). Without ``name``, each route counts on its own
    (the limiter is named after the route's path template); give ``name`` to share one
    budget between the routes that use it. Other parameters as :class:`RateLimitMiddleware`.
    """
    options = {"algorithm": algorithm, "burst": burst, "prefix": prefix, "mode": mode}
    first = _Check(_limiter(client, name or "route", rate, options), key, on_unavailable, cost)
    checks: dict[str, _Check] = {}

    def check_for(request: Request) -> _Check:
        if name is not None:
            return first
        route = getattr(request.scope.get("route"), "path", None) or "?"
        label = "route:" + route.replace("{", "<").replace("}", ">")
        found = checks.get(label)
        if found is None:  # one per route: as many as the app has routes
            limiter = _limiter(client, label, rate, options)
            found = checks[label] = _Check(limiter, first.key, first.choice, cost)
        return found

    async def dependency(request: Request, response: Response) -> RateLimit | None:
        verdict, result = await check_for(request)(request)
        if verdict.status is not None:
            raise HTTPException(verdict.status, verdict.body, dict(verdict.headers))
        for field, value in verdict.headers:
            response.headers[field] = value
        if verdict.headers:  # for RateLimitHeaders, should the route return its own Response
            request.scope.setdefault(_FIELDS, {}).update(verdict.headers)
        return result

    return dependency
