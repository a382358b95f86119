"""redlease.web on real apps: Starlette with the middleware, FastAPI with the dependency,
driven through httpx's ASGI transport against a real server (and a Cluster)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio
from fastapi import Depends, FastAPI
from redis.backoff import NoBackoff
from redis.retry import Retry
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import redlease.asyncio
import redlease.web
from tests.topology import RedisClusterServers
from tests.web.conftest import Decisions

pytestmark = pytest.mark.timeout(60)
FIELDS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy")


async def hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def starlette_app(client: Any, **options: Any) -> Starlette:
    app = Starlette(routes=[Route("/", hello)])
    app.add_middleware(redlease.web.RateLimitMiddleware, client=client, **options)
    return app


def fastapi_app(client: Any, **options: Any) -> FastAPI:
    app = FastAPI()
    limit = redlease.web.rate_limit(client, **options)

    @app.get("/a", dependencies=[Depends(limit)])
    async def a() -> dict[str, str]:
        return {"route": "a"}

    @app.get("/items/{item}")
    async def item(item: str, answer: Any = Depends(limit)) -> dict[str, Any]:  # noqa: B008
        return {"item": item, "remaining": answer.remaining if answer else None}

    return app


async def get(app: Any, path: str = "/", **kwargs: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        return await http.get(path, **kwargs)


@pytest.fixture
async def down_client(make_server: Any) -> AsyncIterator[redis.asyncio.Redis]:
    """A client of a server that is then stopped: no retries, short timeouts."""
    srv = make_server()
    client = redis.asyncio.Redis(
        host=srv.host, port=srv.port, socket_timeout=0.5, socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )  # fmt: skip
    await client.ping()
    srv.stop()
    yield client
    await client.aclose()


# -- Starlette, the middleware --------------------------------------------------------------
async def test_the_request_past_the_limit_gets_429_with_the_headers(
    async_client: redis.asyncio.Redis,
) -> None:
    app = starlette_app(async_client, rate="3/minute", on_unavailable="deny")
    allowed = [await get(app) for _ in range(3)]
    assert [r.status_code for r in allowed] == [200, 200, 200]
    assert [r.headers["RateLimit-Remaining"] for r in allowed] == ["2", "1", "0"]
    assert all(r.headers["RateLimit-Limit"] == "3" for r in allowed)
    assert allowed[0].headers["RateLimit-Policy"] == "3;w=60"
    assert allowed[0].headers["RateLimit-Reset"] == "60"
    assert "Retry-After" not in allowed[0].headers
    refused = await get(app)
    assert (refused.status_code, refused.text) == (429, "Too Many Requests")
    assert all(field in refused.headers for field in FIELDS)
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["RateLimit-Remaining"] == "0"


async def test_a_refused_request_counts_against_no_limit(
    async_client: redis.asyncio.Redis,
) -> None:
    app = starlette_app(async_client, rate="10/minute;2/hour", on_unavailable="deny")
    assert [(await get(app)).status_code for _ in range(4)] == [200, 200, 429, 429]
    refused = await get(app)
    assert (refused.headers["RateLimit-Limit"], refused.headers["RateLimit-Policy"]) == (
        "2",
        "10;w=60, 2;w=3600",
    )
    same = redlease.asyncio.RateLimiter(async_client, "http", rate="10/minute;2/hour")
    minute, hour = (await same.peek("127.0.0.1")).limits
    assert (minute.remaining, hour.remaining) == (8, 0)  # the three refusals took nothing


async def test_keys_by_header_or_function_and_none_exempts(
    async_client: redis.asyncio.Redis,
) -> None:
    by_header = starlette_app(
        async_client, rate="1/minute", on_unavailable="deny", key=redlease.web.header("X-Key")
    )
    assert (await get(by_header, headers={"X-Key": "a"})).status_code == 200
    assert (await get(by_header, headers={"X-Key": "b"})).status_code == 200
    assert (await get(by_header, headers={"X-Key": "a"})).status_code == 429
    assert (await get(by_header)).status_code == 200  # no header: the client's address

    async def user(request: Request) -> str | None:
        return request.query_params.get("user")  # anonymous requests are not limited

    by_user = starlette_app(
        async_client, rate="1/minute", on_unavailable="deny", key=user, name="users"
    )
    assert [(await get(by_user, "/?user=u")).status_code for _ in range(2)] == [200, 429]
    anonymous = [await get(by_user) for _ in range(3)]
    assert [r.status_code for r in anonymous] == [200] * 3
    assert "RateLimit-Limit" not in anonymous[0].headers


@pytest.mark.parametrize(("choice", "status"), [("allow", 200), ("deny", 503)])
async def test_redis_down_gives_the_configured_answer_logged_and_counted(
    down_client: redis.asyncio.Redis,
    caplog: pytest.LogCaptureFixture,
    decisions: Decisions,
    choice: str,
    status: int,
) -> None:
    caplog.set_level(logging.WARNING, logger="redlease")
    app = starlette_app(down_client, rate="3/minute", on_unavailable=choice)
    responses = [await get(app) for _ in range(2)]
    assert [r.status_code for r in responses] == [status, status]
    assert "RateLimit-Limit" not in responses[0].headers
    if choice == "allow":
        assert responses[0].text == "hello"
    logged = [
        r for r in caplog.records if getattr(r, "redlease_event", "") == "ratelimit_unavailable"
    ]
    assert len(logged) == 2 and logged[0].redlease_decision == choice  # type: ignore[attr-defined]
    assert decisions.calls == [("http", choice)] * 2


async def test_a_hung_server_times_out_into_the_configured_answer(
    make_server: Any, decisions: Decisions
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(
        host=srv.host, port=srv.port, socket_timeout=0.3, retry=Retry(NoBackoff(), 0)
    )
    await client.ping()
    srv.pause()
    try:
        deny = starlette_app(client, rate="3/minute", on_unavailable="deny")
        allow = starlette_app(client, rate="3/minute", on_unavailable="allow", name="open")
        assert (await get(deny)).status_code == 503
        assert (await get(allow)).text == "hello"
    finally:
        srv.resume()
        await client.aclose()
    assert decisions.calls == [("http", "deny"), ("open", "allow")]


async def test_on_unavailable_must_be_chosen(async_client: redis.asyncio.Redis) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not reached")

    with pytest.raises(TypeError, match="on_unavailable"):
        redlease.web.RateLimitMiddleware(app, client=async_client, rate="1/second")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="on_unavailable"):
        redlease.web.rate_limit(async_client, "1/second")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^on_unavailable must be 'allow' or 'deny'"):
        redlease.web.rate_limit(async_client, "1/second", on_unavailable="open")
    with pytest.raises(ValueError, match=r"^rate must be limits"):
        redlease.web.rate_limit(async_client, "1/fortnight", on_unavailable="allow")
    with pytest.raises(ValueError, match=r"^cost must be at most the limit \(1\)"):
        redlease.web.rate_limit(async_client, "1/second", on_unavailable="allow", cost=2)
    with pytest.raises(TypeError, match=r"^key must be a function"):
        redlease.web.rate_limit(async_client, "1/second", on_unavailable="allow", key="ip")  # type: ignore[arg-type]


# -- FastAPI, the dependency ----------------------------------------------------------------
async def test_fastapi_dependency_limits_each_route_on_its_own(
    async_client: redis.asyncio.Redis,
) -> None:
    app = fastapi_app(async_client, rate="2/minute", on_unavailable="deny")
    ok = [await get(app, "/a") for _ in range(2)]
    assert [r.status_code for r in ok] == [200, 200]
    assert ok[1].headers["RateLimit-Remaining"] == "0"
    refused = await get(app, "/a")
    assert refused.status_code == 429
    assert refused.json() == {"detail": "Too Many Requests"}
    assert int(refused.headers["Retry-After"]) > 0 and refused.headers["RateLimit-Limit"] == "2"
    # Another route has its own budget, shared by its path parameters.
    other = [await get(app, f"/items/{i}") for i in range(3)]
    assert [r.status_code for r in other] == [200, 200, 429]
    assert other[0].json() == {"item": "0", "remaining": 1}


async def test_fastapi_dependency_with_redis_down(
    down_client: redis.asyncio.Redis, decisions: Decisions
) -> None:
    deny = fastapi_app(down_client, rate="2/minute", on_unavailable="deny")
    assert (await get(deny, "/a")).status_code == 503
    allow = fastapi_app(down_client, rate="2/minute", on_unavailable="allow", name="shared")
    answer = await get(allow, "/items/x")
    assert (answer.status_code, answer.json()) == (200, {"item": "x", "remaining": None})
    assert decisions.calls == [("route:/a", "deny"), ("shared", "allow")]


# -- Redis Cluster --------------------------------------------------------------------------
async def test_middleware_on_a_cluster_with_two_limits(cluster: RedisClusterServers) -> None:
    client = cluster.async_client()
    try:
        app = starlette_app(client, rate="10/minute;2/hour", on_unavailable="deny")
        assert [(await get(app)).status_code for _ in range(3)] == [200, 200, 429]
        same = redlease.asyncio.RateLimiter(client, "http", rate="10/minute;2/hour")
        assert [r.remaining for r in (await same.peek("127.0.0.1")).limits] == [8, 0]
    finally:
        await client.aclose()


# -- shadow mode ----------------------------------------------------------------------------
async def test_shadow_mode_refuses_nothing_and_logs_what_it_would_refuse(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="redlease")
    app = starlette_app(async_client, rate="2/minute", on_unavailable="deny", mode="shadow")
    answers = [await get(app) for _ in range(4)]
    assert [r.status_code for r in answers] == [200, 200, 200, 200]
    assert not any(field in r.headers for r in answers for field in FIELDS)
    events = [getattr(r, "redlease_event", "") for r in caplog.records]
    assert events.count("ratelimit_shadow") == 2
    api = fastapi_app(async_client, rate="1/minute", on_unavailable="deny", mode="shadow")
    assert [(await get(api, "/a")).status_code for _ in range(3)] == [200, 200, 200]
    enforcing = starlette_app(async_client, rate="2/minute", on_unavailable="deny", name="e")
    assert [(await get(enforcing)).status_code for _ in range(3)] == [200, 200, 429]  # twin
    with pytest.raises(ValueError, match=r"^mode "):
        redlease.web.RateLimitMiddleware(
            hello, client=async_client, rate="2/minute", on_unavailable="deny", mode="off"
        )
