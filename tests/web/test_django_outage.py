"""redlease.django with Redis hung (SIGSTOP): the client made from settings times out soon,
and after a failure the helpers stop asking Redis for a back-off, so an outage costs a
request microseconds, not a timeout per limiter. A real Django app, a real paused server."""

from __future__ import annotations

import logging
import time
from typing import Any

import django
import pytest
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings
from django.urls import clear_url_caches, path

import redlease.django
from tests.topology import RedisServer
from tests.web.conftest import Decisions

pytestmark = pytest.mark.timeout(90)

if not settings.configured:  # other test modules may have configured Django already
    settings.configure(
        DEBUG=False, SECRET_KEY="tests", ALLOWED_HOSTS=["testserver"], INSTALLED_APPS=[],
        DATABASES={}, MIDDLEWARE=[], ROOT_URLCONF=__name__,
    )  # fmt: skip
    django.setup()

urlpatterns: list[Any] = []
MIDDLEWARE = ["redlease.django.RateLimitMiddleware"]
EVENT = "ratelimit_unavailable"
FAST = 0.5
"""A request that asks no Redis takes microseconds; one that waits a 1 s timeout, seconds."""


def serve(choice: str) -> None:
    """This module's URLs: one view behind the decorator (made anew: its limiter binds to the
    client of the settings it first meets), the middleware in front."""

    @redlease.django.rate_limit("10/minute", on_unavailable=choice, name="view")
    def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse("hello")

    urlpatterns[:] = [path("view", view)]
    clear_url_caches()


@pytest.mark.parametrize(("choice", "status"), [("allow", 200), ("deny", 503)])
def test_a_hung_redis_costs_one_timeout_per_backoff_not_one_per_request(
    make_server: Any, decisions: Decisions, caplog: pytest.LogCaptureFixture, choice: str,
    status: int,
) -> None:  # fmt: skip
    answers, _ = hung_requests(make_server, choice, backoff=30.0, requests=4)
    assert [s for s, _ in answers] == [status] * 4
    first, *rest = (seconds for _, seconds in answers)
    assert first >= 0.9  # the failure itself: one socket timeout (the middleware's)
    assert all(seconds < FAST for seconds in rest), rest  # then no Redis until the back-off
    # Every decision is counted (middleware and view, each request); only the real failure
    # is a WARNING, the skipped ones are DEBUG.
    assert decisions.calls.count(("http", choice)) == 4
    assert decisions.calls.count(("view", choice)) == (4 if choice == "allow" else 0)
    events = [r for r in caplog.records if getattr(r, "redlease_event", "") == EVENT]
    assert [r.levelno for r in events] == [logging.WARNING]


def test_twin_without_the_backoff_each_request_waits_for_redis(
    make_server: Any, decisions: Decisions
) -> None:
    answers, _ = hung_requests(make_server, "allow", backoff=0, requests=2)
    assert [s for s, _ in answers] == [200, 200]
    rest = [seconds for _, seconds in answers[1:]]
    assert not all(seconds < FAST for seconds in rest), rest  # the check above catches it
    assert all(seconds >= 1.8 for _, seconds in answers)  # two limiters, a timeout each


def test_after_the_backoff_one_request_asks_redis_again(make_server: Any) -> None:
    srv: RedisServer = make_server()
    serve("allow")
    url = f"redis://{srv.host}:{srv.port}/0"
    config = {"url": url, "socket_timeout": 0.5, "backoff": 1.0,
              "rate_limit": {"rate": "100/minute", "on_unavailable": "allow"}}  # fmt: skip
    with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=MIDDLEWARE, REDLEASE=config):
        app = Client()
        assert "RateLimit-Limit" in app.get("/view").headers
        srv.pause()
        try:
            assert "RateLimit-Limit" not in app.get("/view").headers  # failed: back-off
        finally:
            srv.resume()
        assert "RateLimit-Limit" not in app.get("/view").headers  # Redis is back, not asked
        time.sleep(1.2)
        recovered = app.get("/view")
    assert recovered.headers["RateLimit-Remaining"] == "8"  # the view's: counted again
    assert recovered.headers["RateLimit-Policy"] == "10;w=60"


def hung_requests(
    make_server: Any, choice: str, *, backoff: float, requests: int
) -> tuple[list[tuple[int, float]], RedisServer]:
    """``requests`` requests (timed) to a view behind middleware + decorator, ``choice`` for
    both, with Redis paused after the client connected; socket timeout 1 s."""
    srv: RedisServer = make_server()
    serve(choice)
    url = f"redis://{srv.host}:{srv.port}/0"
    config = {"url": url, "socket_timeout": 1.0, "backoff": backoff,
              "rate_limit": {"rate": "100/minute", "on_unavailable": choice}}  # fmt: skip
    with override_settings(ROOT_URLCONF=__name__, MIDDLEWARE=MIDDLEWARE, REDLEASE=config):
        redlease.django.client().ping()  # connected: a hang, not a refusal
        srv.pause()
        try:
            return timed(Client(), requests), srv
        finally:
            srv.resume()


def timed(app: Client, requests: int) -> list[tuple[int, float]]:
    """``requests`` GETs of ``/view``: their (status, seconds)."""
    answers = []
    for _ in range(requests):
        started = time.monotonic()
        status = app.get("/view").status_code
        answers.append((status, time.monotonic() - started))
    return answers


def test_the_client_from_settings_has_short_timeouts_unless_told(server: RedisServer) -> None:
    url = f"redis://{server.host}:{server.port}/0"

    def made(**options: Any) -> dict[str, Any]:
        with override_settings(REDLEASE={"url": url, **options}):
            kwargs = redlease.django.client().connection_pool.connection_kwargs
        return {k: kwargs[k] for k in ("socket_timeout", "socket_connect_timeout")}

    default = redlease.django.TIMEOUT
    assert made() == {"socket_timeout": default, "socket_connect_timeout": default}
    assert made(socket_timeout=2, socket_connect_timeout=None) == {
        "socket_timeout": 2.0,
        "socket_connect_timeout": None,
    }
    with override_settings(REDLEASE={"url": url + "?socket_timeout=3"}):  # the URL wins
        assert redlease.django.client().connection_pool.connection_kwargs["socket_timeout"] == 3
    for option, value, error in (
        ("socket_timeout", "1", TypeError),
        ("socket_timeout", 0, ValueError),
        ("socket_connect_timeout", -1, ValueError),
    ):
        with pytest.raises(error, match=rf'^REDLEASE\["{option}"\] must be'):
            made(**{option: value})


def test_a_bad_backoff_is_refused_naming_the_setting(make_server: Any) -> None:
    srv: RedisServer = make_server()
    serve("allow")
    config = {"url": f"redis://{srv.host}:{srv.port}/1", "backoff": -1}
    settled = override_settings(ROOT_URLCONF=__name__, REDLEASE=config)
    with settled, pytest.raises(ValueError, match=r'^REDLEASE\["backoff"\] must be >= 0'):
        Client().get("/view")
