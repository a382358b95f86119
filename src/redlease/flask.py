"""Rate limits for Flask: an app-wide limit, per-view limits and exemptions
(``redlease[flask]``).

::

    import redis, redlease.flask
    client = redis.Redis(socket_timeout=0.5, socket_connect_timeout=0.5)
    limits = redlease.flask.RateLimit(app, client, rate="100/minute", on_unavailable="allow")

    @app.get("/search")
    @limits.limit("10/second")          # this view's own limit, on top of the app's
    def search(): ...

    @app.get("/health")
    @limits.exempt                       # not counted by the app-wide limit
    def health(): ...

As Flask-Limiter's ``Limiter``, ``limit`` and ``exempt``, with redlease's limiter: each
request is one :meth:`redlease.RateLimiter.hit` per limit for its subject (by default the
client's address, ``request.remote_addr``; ``key=`` any function of the ``flask.Request``,
which may return ``None`` to exempt it). A refused request gets 429 with ``Retry-After`` and
the ``RateLimit-*`` headers, which allowed responses carry too (a view's own limit, the
tighter, wins over the app's); ``on_unavailable`` and ``backoff`` as in :mod:`redlease.wsgi`;
``mode="shadow"`` refuses nothing. ``rate=None`` sets no app-wide limit (views' only).
Async views are checked in the thread Flask runs them from.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import flask

from ._core import breaker as breakers
from ._core import ratelimit_http as http
from ._request_limit import RequestLimit, given_client, key_or

__all__ = ["Key", "RateLimit", "client_address"]

Key = Callable[[flask.Request], str | bytes | None]
"""A request's subject: a function of the ``flask.Request``; ``None`` exempts the request."""

_EXEMPT = "_redlease_exempt"
_FIELDS = "_redlease_fields"


def client_address(request: flask.Request) -> str:
    """The client's IP address (``request.remote_addr``), or ``"unknown"``. Behind a proxy it
    is the proxy's: key on a header the proxy sets (or use werkzeug's ``ProxyFix``)."""
    return str(request.remote_addr or "unknown")


def _refusal(verdict: http.Verdict) -> flask.Response:
    response = flask.Response(verdict.body, status=verdict.status, mimetype="text/plain")
    response.headers.extend(verdict.headers)
    return response


def _add_fields(response: flask.Response, fields: tuple[tuple[str, str], ...]) -> None:
    for name, value in fields:
        response.headers.setdefault(name, value)  # a view's own (tighter) limit wins


class RateLimit:
    """Rate limits of one Flask app on ``client`` (a redis-py client): ``rate`` app-wide (or
    ``None``), and per view with :meth:`limit`; :meth:`exempt` takes a view out of the
    app-wide limit. The other options are the app-wide limit's, and the views' defaults."""

    def __init__(
        self,
        app: flask.Flask | None = None,
        client: Any = None,
        *,
        rate: str | None = None,
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
        self.key = key_or(client_address, key, "the request")
        self._defaults: dict[str, Any] = {
            "on_unavailable": http.on_unavailable(on_unavailable),
            **given_client(client, backoff),
            "algorithm": algorithm,
            "prefix": prefix,
            "mode": mode,
        }
        self.app_limit = None
        if rate is not None:
            self.app_limit = RequestLimit(rate, name, cost=cost, burst=burst, **self._defaults)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: flask.Flask) -> None:
        """Check every request of ``app`` against the app-wide limit (if any)."""
        app.before_request(self._before)
        app.after_request(self._after)

    def _before(self) -> flask.Response | None:
        if self.app_limit is None:
            return None
        view = flask.current_app.view_functions.get(flask.request.endpoint or "")
        if view is None or getattr(view, _EXEMPT, False):
            return None
        verdict = self.app_limit(self.key(flask.request))
        if verdict.status is not None:
            return _refusal(verdict)
        setattr(flask.g, _FIELDS, verdict.headers)
        return None

    def _after(self, response: flask.Response) -> flask.Response:
        _add_fields(response, getattr(flask.g, _FIELDS, ()))
        return response

    def exempt(self, view: Callable[..., Any]) -> Callable[..., Any]:
        """Take ``view`` out of the app-wide limit (its own :meth:`limit` still applies)."""
        setattr(view, _EXEMPT, True)
        return view

    def limit(
        self,
        rate: str,
        *,
        key: Key | None = None,
        name: str | None = None,
        cost: int = 1,
        burst: int | tuple[int, ...] | None = None,
        **options: Any,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorate a view (sync or async) with its own ``rate``, counted under ``name``
        (default: the view's dotted name; give one name to views that share a budget).
        ``options`` override the app's ``on_unavailable``, ``algorithm``, ``prefix``,
        ``mode``."""
        unknown = set(options) - {"on_unavailable", "algorithm", "prefix", "mode"}
        if unknown:
            raise TypeError(f"limit() got unexpected options: {sorted(unknown)}")
        subject_of = key_or(self.key, key, "the request")
        settings = {**self._defaults, **options}
        RequestLimit(rate, name or "view", cost=cost, burst=burst, **settings)  # bad: fail now

        def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
            label = name or f"view:{view.__module__}.{view.__qualname__}"
            check = RequestLimit(rate, label, cost=cost, burst=burst, **settings)
            if inspect.iscoroutinefunction(view):

                @functools.wraps(view)
                async def limited_async(*args: Any, **kwargs: Any) -> Any:
                    verdict = check(subject_of(flask.request))
                    if verdict.status is not None:
                        return _refusal(verdict)
                    response = flask.make_response(await view(*args, **kwargs))
                    _add_fields(response, verdict.headers)
                    return response

                return limited_async

            @functools.wraps(view)
            def limited(*args: Any, **kwargs: Any) -> Any:
                verdict = check(subject_of(flask.request))
                if verdict.status is not None:
                    return _refusal(verdict)
                response = flask.make_response(view(*args, **kwargs))
                _add_fields(response, verdict.headers)
                return response

            return limited

        return decorate
