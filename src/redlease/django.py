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
per process (:func:`client`), with short timeouts: ``REDLEASE["socket_timeout"]`` and
``REDLEASE["socket_connect_timeout"]`` (default 0.5 s each; ``None``: none; the URL's own
``?socket_timeout=`` wins). After Redis failed, the helpers stop asking it for
``REDLEASE["backoff"]`` seconds (default 2; ``0``: never stop), per client: each request then
gets its ``on_unavailable`` answer at once instead of waiting a timeout per limiter, and one
request a back-off tries Redis again. Async views are checked in a worker thread (asgiref).
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

from ._core import breaker as breakers
from ._core import ratelimit_http as http
from ._request_limit import RequestLimit, key_or
from ._synchronization import ProcessLock

__all__ = [
    "TIMEOUT",
    "Key",
    "RateLimitMiddleware",
    "client",
    "client_address",
    "header",
    "rate_limit",
]

Key = Callable[[HttpRequest], str | bytes | None]
"""A request's subject: a function of the ``HttpRequest``; ``None`` exempts the request."""

TIMEOUT = 0.5
"""Default ``socket_timeout`` and ``socket_connect_timeout`` of the client made from settings."""

_TIMEOUTS = ("socket_timeout", "socket_connect_timeout")
_clients: dict[tuple[Any, ...], redis.Redis] = {}
_clients_guard = ProcessLock()


def _settings() -> dict[str, Any]:
    config = getattr(settings, "REDLEASE", None)
    return config if isinstance(config, dict) else {}


def _timeout(config: dict[str, Any], option: str) -> float | None:
    value = config.get(option, TIMEOUT)
    if value is None:
        return None
    arg = f'REDLEASE["{option}"]'
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a number of seconds or None, got {type(value).__name__}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{arg} must be > 0 seconds (or None: no timeout), got {value!r}")
    return float(value)


def client() -> redis.Redis:
    """The client of ``settings.REDLEASE["url"]``, made on first use and kept per URL and
    timeouts (``REDLEASE["socket_timeout"]``, ``["socket_connect_timeout"]``: default
    :data:`TIMEOUT`)."""
    config = _settings()
    if not isinstance(config.get("url"), str):
        raise ImproperlyConfigured(
            'redlease needs settings.REDLEASE = {"url": "redis://..."} (or pass client=)'
        )
    url: str = config["url"]
    options = {name: _timeout(config, name) for name in _TIMEOUTS}
    key = (url, *options.values())
    with _clients_guard:
        made = _clients.get(key)
        if made is None:  # the URL's own query options win over these (redis-py's rule)
            made = _clients[key] = redis.Redis.from_url(url, **options)
    return made


def _backoff() -> float:
    """``REDLEASE["backoff"]``: seconds without Redis after a failure (default 2)."""
    given = _settings().get("backoff", breakers.BACKOFF)
    return breakers.backoff(given, 'REDLEASE["backoff"]')


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
    """One view's (or the middleware's) limit: a request in, a verdict out."""

    def __init__(self, rate: Any, name: str, options: dict[str, Any]) -> None:
        key = options.pop("key")
        if isinstance(key, str):
            key = import_string(key)
        self.key: Key = key_or(client_address, key, "the request")
        conn = options.pop("client")
        self.limit = RequestLimit(
            rate,
            name,
            client_of=client if conn is None else (lambda: conn),
            backoff_of=_backoff,
            **options,
        )

    def __call__(self, request: HttpRequest) -> http.Verdict:
        return self.limit(self.key(request))


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
    mode: str = "enforce",
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
    :param mode: ``"shadow"``: refuse nothing, send no fields; log and count what would
        have been refused (``"enforce"``, the default: refuse it).
    """
    options: dict[str, Any] = {"on_unavailable": on_unavailable, "key": key, "cost": cost}
    options["client"] = client
    options.update(algorithm=algorithm, burst=burst, prefix=prefix, mode=mode)

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
