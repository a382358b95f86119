"""redlease.django on a real Django app (settings configured in-process), through Django's
test client, against a real server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import django
import pytest
import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client, override_settings
from django.urls import path

import redlease
import redlease.django
from tests.topology import RedisServer
from tests.web.conftest import Decisions

pytestmark = pytest.mark.timeout(60)

if not settings.configured:  # other test modules may have configured Django already
    settings.configure(
        DEBUG=False,
        SECRET_KEY="tests",
        ALLOWED_HOSTS=["testserver"],
        INSTALLED_APPS=[],
        DATABASES={},
        MIDDLEWARE=[],
        ROOT_URLCONF=__name__,
    )
    django.setup()

APP = {"ROOT_URLCONF": __name__, "ALLOWED_HOSTS": ["testserver"], "MIDDLEWARE": []}
"""This module's app, whatever settings another test module configured Django with."""


@redlease.django.rate_limit("3/minute", on_unavailable="deny")
def limited(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello")


@redlease.django.rate_limit("10/minute;2/hour", on_unavailable="deny", name="two")
def two_limits(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello")


@redlease.django.rate_limit(
    "1/minute", on_unavailable="deny", key=redlease.django.header("X-Key"), name="keyed"
)
def keyed(request: HttpRequest) -> HttpResponse:
    return HttpResponse("hello")


@redlease.django.rate_limit("2/minute", on_unavailable="deny", name="async")
async def limited_async(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"async": True})


def plain(request: HttpRequest) -> HttpResponse:
    return HttpResponse("plain")


urlpatterns = [
    path("limited", limited),
    path("two", two_limits),
    path("keyed", keyed),
    path("async", limited_async),
    path("plain", plain),
]


@pytest.fixture
def app(server: RedisServer, client: redis.Redis) -> Iterator[Client]:
    """Django's test client, with settings.REDLEASE pointing at the (flushed) server."""
    url = f"redis://{server.host}:{server.port}/0"
    with override_settings(**APP, REDLEASE={"url": url}):
        yield Client()


def test_the_request_past_the_limit_gets_429_with_the_headers(app: Client) -> None:
    allowed = [app.get("/limited") for _ in range(3)]
    assert [r.status_code for r in allowed] == [200, 200, 200]
    assert [r.headers["RateLimit-Remaining"] for r in allowed] == ["2", "1", "0"]
    assert allowed[0].headers["RateLimit-Limit"] == "3"
    assert allowed[0].headers["RateLimit-Policy"] == "3;w=60"
    refused = app.get("/limited")
    assert (refused.status_code, refused.content) == (429, b"Too Many Requests")
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert refused.headers["RateLimit-Reset"]


def test_a_refused_request_counts_against_no_limit(app: Client, client: redis.Redis) -> None:
    assert [app.get("/two").status_code for _ in range(4)] == [200, 200, 429, 429]
    same = redlease.RateLimiter(client, "two", rate="10/minute;2/hour")
    assert [r.remaining for r in same.peek("127.0.0.1").limits] == [8, 0]


def test_keyed_by_header_and_async_views(app: Client) -> None:
    assert app.get("/keyed", headers={"X-Key": "a"}).status_code == 200
    assert app.get("/keyed", headers={"X-Key": "b"}).status_code == 200
    assert app.get("/keyed", headers={"X-Key": "a"}).status_code == 429
    answers = [app.get("/async") for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 429]
    assert answers[0].json() == {"async": True} and answers[0].headers["RateLimit-Limit"] == "2"


def test_middleware_limits_every_request(app: Client, client: redis.Redis) -> None:
    middleware = ["redlease.django.RateLimitMiddleware"]
    url = settings.REDLEASE["url"]
    config = {"rate": "2/minute;5/hour", "on_unavailable": "deny"}
    with override_settings(MIDDLEWARE=middleware, REDLEASE={"url": url, "rate_limit": config}):
        answers = [Client().get("/plain") for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 429]
    assert answers[1].headers["RateLimit-Policy"] == "2;w=60, 5;w=3600"
    same = redlease.RateLimiter(client, "http", rate="2/minute;5/hour")
    assert [r.remaining for r in same.peek("127.0.0.1").limits] == [0, 3]


def test_shadow_mode_refuses_nothing(app: Client, client: redis.Redis) -> None:
    middleware = ["redlease.django.RateLimitMiddleware"]
    url = settings.REDLEASE["url"]
    config = {"rate": "2/minute", "on_unavailable": "deny", "mode": "shadow"}
    with override_settings(MIDDLEWARE=middleware, REDLEASE={"url": url, "rate_limit": config}):
        answers = [Client().get("/plain") for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 200]
    assert "RateLimit-Limit" not in answers[2].headers
    same = redlease.RateLimiter(client, "http", rate="2/minute")
    assert same.peek("127.0.0.1").remaining == 0  # counted as enforcing would have
    with pytest.raises(ValueError, match=r"^mode "):
        redlease.django.rate_limit("2/minute", on_unavailable="deny", mode="off")(plain)


@pytest.mark.parametrize(("choice", "status"), [("allow", 200), ("deny", 503)])
def test_redis_down_gives_the_configured_answer(
    make_server: Any,
    caplog: pytest.LogCaptureFixture,
    decisions: Decisions,
    choice: str,
    status: int,
) -> None:
    srv = make_server()
    url = f"redis://{srv.host}:{srv.port}/0?socket_timeout=0.5&socket_connect_timeout=0.5"
    srv.stop()
    caplog.set_level(logging.WARNING, logger="redlease")
    config = {"rate": "3/minute", "on_unavailable": choice}
    middleware = ["redlease.django.RateLimitMiddleware"]
    settled = {**APP, "MIDDLEWARE": middleware, "REDLEASE": {"url": url, "rate_limit": config}}
    with override_settings(**settled):
        answers = [Client().get("/plain") for _ in range(2)]
    assert [r.status_code for r in answers] == [status, status]
    assert "RateLimit-Limit" not in answers[0].headers
    events = [
        r for r in caplog.records if getattr(r, "redlease_event", "") == "ratelimit_unavailable"
    ]
    assert len(events) == 1  # the second request did not ask Redis: a back-off (DEBUG)
    assert decisions.calls == [("http", choice)] * 2


def test_options_are_checked_before_any_request() -> None:
    with pytest.raises(TypeError, match="on_unavailable"):
        redlease.django.rate_limit("1/second")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^on_unavailable must be 'allow' or 'deny'"):
        redlease.django.rate_limit("1/second", on_unavailable="open")(plain)
    with pytest.raises(ValueError, match=r"^rate must be limits"):
        redlease.django.rate_limit("1/fortnight", on_unavailable="allow")(plain)
    with pytest.raises(ValueError, match=r"^cost must be at most the limit \(2\)"):
        redlease.django.rate_limit("2/second;9/day", on_unavailable="allow", cost=3)(plain)
    with pytest.raises(ValueError, match=r"^burst applies"):
        redlease.django.rate_limit("1/second", on_unavailable="allow", burst=3)(plain)
    for config, error in (
        (None, ImproperlyConfigured),
        ({"rate": "1/second"}, TypeError),
        ({"on_unavailable": "deny"}, TypeError),
        ({"rate": "1/second", "on_unavailable": "deny", "rates": 1}, TypeError),
    ):
        settled = override_settings(REDLEASE={"url": "redis://x", "rate_limit": config})
        with settled, pytest.raises(error):
            redlease.django.RateLimitMiddleware(plain)
    with override_settings(REDLEASE={}), pytest.raises(ImproperlyConfigured, match="REDLEASE"):
        redlease.django.client()
