"""Rate limits for any WSGI app: a middleware (no extra needed).

::

    import redis, redlease.wsgi
    client = redis.Redis(socket_timeout=0.5, socket_connect_timeout=0.5)
    app = redlease.wsgi.RateLimitMiddleware(app, client, rate="100/minute;5000/day",
                                            on_unavailable="allow")

Each request is one :meth:`redlease.RateLimiter.hit` for its subject (by default the client's
address, ``REMOTE_ADDR``; ``key=redlease.wsgi.header("X-API-Key")`` or any function of the
WSGI ``environ``, which may return ``None`` to exempt the request). A refused request gets 429
with ``Retry-After`` and the ``RateLimit-*`` headers (draft-ietf-httpapi-ratelimit-headers-06),
which allowed responses carry too, as :mod:`redlease.web` and :mod:`redlease.django` answer.
``on_unavailable`` has no default: while Redis cannot be reached, ``"allow"`` lets requests
through and ``"deny"`` answers 503; after a failure, Redis is not asked again for ``backoff``
seconds (default 2), so a hung server costs one timeout per back-off, not one per request
(give the client short timeouts). ``mode="shadow"`` refuses nothing and sends no fields; it
logs and counts what it would refuse. Flask: :mod:`redlease.flask` adds per-view limits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._core import breaker as breakers
from ._core import ratelimit_http as http
from ._request_limit import RequestLimit, given_client, key_or

__all__ = ["Environ", "Key", "RateLimitMiddleware", "client_address", "header", "respond"]

Environ = dict[str, Any]
Key = Callable[[Environ], str | bytes | None]
"""A request's subject: a function of the WSGI ``environ``; ``None`` exempts the request."""
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]


def client_address(environ: Environ) -> str:
    """The client's IP address (``REMOTE_ADDR``), or ``"unknown"``. Behind a proxy it is the
    proxy's: key on a header the proxy sets instead."""
    return str(environ.get("REMOTE_ADDR") or "unknown")


def header(name: str, *, default: Key = client_address) -> Key:
    """Key on request header ``name`` (e.g. ``"X-API-Key"``); requests without it are keyed
    by ``default`` (the client's address)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    field = "HTTP_" + name.upper().replace("-", "_")

    def by_header(environ: Environ) -> str | bytes | None:
        value = environ.get(field)
        return default(environ) if value is None else str(value)

    return by_header


def respond(verdict: http.Verdict, start_response: StartResponse) -> list[bytes]:
    """Answer a refused request: ``verdict``'s status, fields and plain-text body."""
    body = verdict.body.encode()
    reason = {http.TOO_MANY: "Too Many Requests", http.UNAVAILABLE: "Service Unavailable"}
    fields = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    start_response(f"{verdict.status} {reason.get(verdict.status or 0, '')}", [
        *fields, *verdict.headers
    ])  # fmt: skip
    return [body]


class RateLimitMiddleware:
    """WSGI middleware: every request to ``app`` counts against ``rate`` (the ``limits``
    notation, e.g. ``"100/minute;5000/day"``) on ``client`` (a redis-py client).

    Options as :class:`redlease.RateLimiter`'s (``algorithm``, ``burst``, ``prefix``,
    ``mode``), plus ``key`` (the subject; default :func:`client_address`), ``name`` (the
    limiter's, default ``"http"``), ``cost`` (units per request) and ``backoff``.
    """

    def __init__(
        self,
        app: App,
        client: Any,
        *,
        rate: str,
        on_unavailable: str,
        key: Key | None = None,
        name: str = "http",
        cost: int = 1,
        algorithm: str = "fixed",
        burst: int | tuple[int, ...] | None = None,
        prefix: str = "redlease",
        mode: str = "enforce",
        backoff: float = breakers.BACKOFF,
    ) -> None:
        self.app, self.key = app, key_or(client_address, key, "the environ")
        self.limit = RequestLimit(
            rate, name, on_unavailable=on_unavailable, cost=cost, algorithm=algorithm,
            burst=burst, prefix=prefix, mode=mode, **given_client(client, backoff),
        )  # fmt: skip

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        verdict = self.limit(self.key(environ))
        if verdict.status is not None:
            return respond(verdict, start_response)
        if not verdict.headers:
            return self.app(environ, start_response)

        def with_fields(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            present = {name.lower() for name, _ in headers}
            extra = [(n, v) for n, v in verdict.headers if n.lower() not in present]
            return start_response(status, [*headers, *extra], *exc)  # the app's own win

        return self.app(environ, with_fields)
