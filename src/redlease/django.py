"""Rate limits for Django: a view decorator and a middleware (``redlease[django]``).

::

    # settings.py
    REDLEASE = {
        "url": "redis://localhost:6379/0",
        "rate_limit": {"rate": "100/minute;5000/day", "on_unavailable": "allow"},  # middleware
    }
    MIDDLEWARE = [..., "redlease.django.RateLimitMiddleware"]

    # views.py
    @redlease.django.rate_limit("10/second", on_unavailable="deny")
    def search(request): ...

Each request is one :meth:`redlease.RateLimiter.hit` for its subject (by default the client's
address, ``REMOTE_ADDR``; ``key=redlease.django.header("X-API-Key")`` or any function of the
``HttpRequest``, which may return ``None`` to exempt it). A refused request gets 429 with
``Retry-After`` and the ``RateLimit-*`` headers (draft-ietf-httpapi-ratelimit-headers-06),
which allowed responses carry too. ``on_unavailable`` has no default: while Redis cannot be
reached, ``"allow"`` lets requests through and ``"deny"`` answers 503; each decision is logged
(``redlease_event`` ``"ratelimit_unavailable"``) and counted by the metrics observer.

The client is ``client=`` if given, else one ``redis.Redis.from_url(settings.REDLEASE["url"])``
per process (:func:`client`). Async views are checked in a worker thread (asgiref).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from . import _observe
from ._core import ratelimit as core
from ._core import ratelimit_http as http
from ._core import rates as notation
from ._sync.ratelimit import RateLimiter
from ._synchronization import ProcessLock
from .errors import RateLimitUnavailable

__all__ = ["Key", "RateLimitMiddleware", "client", "client_address", "header", "rate_limit"]

Key = Callable[[HttpRequest], str | bytes | None]
"""A request's subject: a function of the ``HttpRequest``; ``None`` exempts the request."""

_clients: dict[str, redis.Redis] = {}
_clients_guard = ProcessLock()


def client() -> redis.Redis:
    """The client of ``settings.REDLEASE["url"]``, made on first use and kept per URL."""
    config = getattr(settings, "REDLEASE", None)
    if not isinstance(config, dict) or not isinstance(config.get("url"), str):
        raise ImproperlyConfigured(
            'redlease needs settings.REDLEASE = {"url": "redis://..."} (or pass client=)'
        )
    url: str = config["url"]
    with _clients_guard:
        made = _clients.get(url)
        if made is None:
            made = _clients[url] = redis.Redis.from_url(url)
    return made


def client_address(request: HttpRequest) -> str:
    """The client's IP address (``REMOTE_ADDR``), or ``"unknown"``. Behind a proxy it is the
    proxy's: key on a header the proxy sets instead."""
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def header(name: str, *, default: Key = client_address) -> Key:
    """Key on request header ``name`` (e.g. ``"X-API-Key"``); requests without it are keyed
    by ``default`` (the client's address)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")

    def by_header(request: HttpRequest) -> str | bytes | None:
        value = request.headers.get(name)
        return default(request) if value is None else value

    return by_header


class _Check:
    """One limiter, made on first use (settings are read then): a request in, a verdict out."""

    def __init__(self, rate: Any, name: str, options: dict[str, Any]) -> None:
        # Bad input fails here, not at the first request (the client is made then).
        rates = notation.parse(rate)
        sizes = core.bursts(options["burst"], rates, core.algorithm(options["algorithm"]))
        self.cost = core.cost(options.pop("cost"), min(*(r.amount for r in rates), *sizes))
        self.choice = http.on_unavailable(options.pop("on_unavailable"))
        key = options.pop("key")
        if isinstance(key, str):
            key = import_string(key)
        if key is not None and not callable(key):
            raise TypeError(f"key must be a function of the request, got {type(key).__name__}")
        self.key: Key = client_address if key is None else key
        self.client = options.pop("client")
        self.rate, self.name, self.options = rate, name, options
        self._limiter: RateLimiter | None = None

    def limiter(self) -> RateLimiter:
        if self._limiter is None:
            conn = client() if self.client is None else self.client
            self._limiter = RateLimiter(conn, self.name, rate=self.rate, **self.options)
        return self._limiter

    def __call__(self, request: HttpRequest) -> http.Verdict:
        subject = self.key(request)
        if subject is None:
            return http.Verdict(None, ())
        limiter = self.limiter()
        try:
            return http.verdict(limiter.hit(subject, self.cost))
        except RateLimitUnavailable as exc:
            _observe.rate_limit_unavailable(str(limiter.name), self.choice, exc)
            return http.outage(self.choice)


def _refusal(verdict: http.Verdict) -> HttpResponse:
    response = HttpResponse(verdict.body, status=verdict.status, content_type="text/plain")
    for field, value in verdict.headers:
        response[field] = value
    return response


def _add_headers(response: HttpResponse, verdict: http.Verdict) -> HttpResponse:
    for field, value in verdict.headers:
        response.headers.setdefault(field, value)  # a view's own (tighter) limit wins
    return response


def rate_limit(
    rate: str,
    *,
    on_unavailable: str,
    key: Key | str | None = None,
    name: str | None = None,
    client: redis.Redis | None = None,
    algorithm: str = "fixed",
    burst: int | tuple[int, ...] | None = None,
    cost: int = 1,
    prefix: str = "redlease",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a view (sync or async) with ``rate``, e.g. ``"10/second;1000/day"``.

    :param on_unavailable: ``"allow"`` or ``"deny"`` (503) while Redis cannot answer.
    :param key: the subject of a request (default :func:`client_address`), or its dotted
        path.
    :param name: the limiter's name (default: the view's dotted name, so each view counts on
        its own); give one name to views that share a budget.
    :param client: a redis-py client (default :func:`client`, from settings).
    :param algorithm: as :class:`redlease.RateLimiter`'s (also ``burst``, ``prefix``).
    :param cost: units each request takes.
    """
    options: dict[str, Any] = {"on_unavailable": on_unavailable, "key": key, "cost": cost}
    options["client"] = client
    options.update(algorithm=algorithm, burst=burst, prefix=prefix)

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        label = name or f"view:{view.__module__}.{view.__qualname__}"
        check = _Check(rate, label, dict(options))
        if inspect.iscoroutinefunction(view):

            @functools.wraps(view)
            async def limited_async(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                verdict = await sync_to_async(check)(request)
                if verdict.status is not None:
                    return _refusal(verdict)
                return _add_headers(await view(request, *args, **kwargs), verdict)

            return limited_async

        @functools.wraps(view)
        def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            verdict = check(request)
            if verdict.status is not None:
                return _refusal(verdict)
            return _add_headers(view(request, *args, **kwargs), verdict)

        return limited

    return decorate


class RateLimitMiddleware:
    """Django middleware: every request counts against ``settings.REDLEASE["rate_limit"]``.

    That dict takes the options of :func:`rate_limit` (``rate`` and ``on_unavailable``
    required; ``key`` a function or its dotted path; ``name`` default ``"http"``).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        """Read the options from settings (Django makes one middleware per process)."""
        self.get_response = get_response
        config = getattr(settings, "REDLEASE", {}).get("rate_limit")
        if not isinstance(config, dict):
            raise ImproperlyConfigured(
                'RateLimitMiddleware needs settings.REDLEASE["rate_limit"] = '
                '{"rate": "100/minute", "on_unavailable": "allow" or "deny"}'
            )
        parameters = inspect.signature(rate_limit).parameters
        unknown = set(config) - set(parameters)
        if unknown:
            raise TypeError(f'REDLEASE["rate_limit"] has unknown options: {sorted(unknown)}')
        for required in ("rate", "on_unavailable"):
            if required not in config:
                raise TypeError(f'REDLEASE["rate_limit"] needs {required!r}, with no default')
        defaults = {p.name: p.default for p in parameters.values() if p.default is not p.empty}
        options = {**defaults, **config}
        rate, label = options.pop("rate"), options.pop("name") or "http"
        self._check = _Check(rate, label, options)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        verdict = self._check(request)
        if verdict.status is not None:
            return _refusal(verdict)
        return _add_headers(self.get_response(request), verdict)
