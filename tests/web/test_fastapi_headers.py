"""The FastAPI dependency's ``RateLimit-*`` fields on a route that returns a ``Response``
itself: FastAPI drops them there; :class:`redlease.web.RateLimitHeaders` (or the limiting
middleware) puts them back. A real FastAPI app through httpx's ASGI transport, a real server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

import redlease.web

pytestmark = pytest.mark.timeout(60)
FIELDS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy")


def routes(client: redis.asyncio.Redis, app: FastAPI) -> FastAPI:
    """Routes limited to 3/minute each by the dependency, answering in every way."""
    limit = Depends(redlease.web.rate_limit(client, "3/minute", on_unavailable="deny"))

    @app.get("/model", dependencies=[limit])
    async def model() -> dict[str, str]:
        return {"built": "by FastAPI"}

    @app.get("/json", dependencies=[limit])
    async def json() -> JSONResponse:
        return JSONResponse({"built": "by the route"})

    @app.get("/plain", dependencies=[limit])
    def plain() -> PlainTextResponse:  # a sync route: run in a worker thread
        return PlainTextResponse("hello")

    @app.get("/stream", dependencies=[limit])
    async def stream() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"a"
            yield b"b"

        return StreamingResponse(chunks())

    @app.get("/own", dependencies=[limit])
    async def own() -> PlainTextResponse:
        return PlainTextResponse("mine", headers={"RateLimit-Limit": "1"})

    return app


async def get_all(app: FastAPI, path: str, times: int) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        return [await http.get(path) for _ in range(times)]


@pytest.mark.parametrize("path", ["/model", "/json", "/plain", "/stream"])
async def test_every_response_the_dependency_admits_carries_the_fields(
    async_client: redis.asyncio.Redis, path: str
) -> None:
    app = FastAPI()
    app.add_middleware(redlease.web.RateLimitHeaders)
    answers = await get_all(routes(async_client, app), path, 4)
    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert [r.headers.get("RateLimit-Remaining") for r in answers] == ["2", "1", "0", "0"]
    assert all(field in answers[0].headers for field in FIELDS)
    assert answers[0].headers["RateLimit-Policy"] == "3;w=60"


@pytest.mark.parametrize("path", ["/json", "/plain", "/stream"])
async def test_twin_without_the_middleware_a_returned_response_has_none(
    async_client: redis.asyncio.Redis, path: str
) -> None:
    """FastAPI's own limit, which the docs name: the check above catches it."""
    answers = await get_all(routes(async_client, FastAPI()), path, 2)
    assert [r.status_code for r in answers] == [200, 200]
    assert not any(field in answers[0].headers for field in FIELDS)
    model = await get_all(routes(async_client, FastAPI()), "/model", 1)
    assert model[0].headers["RateLimit-Remaining"] == "2"  # what FastAPI builds has them


async def test_the_routes_own_fields_win_and_so_does_its_limit_over_the_middlewares(
    async_client: redis.asyncio.Redis,
) -> None:
    app = FastAPI()
    app.add_middleware(
        redlease.web.RateLimitMiddleware, client=async_client, rate="100/minute",
        on_unavailable="deny",
    )  # fmt: skip
    app = routes(async_client, app)
    own, json = (await get_all(app, "/own", 1))[0], (await get_all(app, "/json", 1))[0]
    assert own.headers["RateLimit-Limit"] == "1"  # set by the route itself
    assert own.headers["RateLimit-Remaining"] == "2"  # the dependency's, not the middleware's
    assert (json.headers["RateLimit-Limit"], json.headers["RateLimit-Remaining"]) == ("3", "2")
    assert json.headers.get_list("RateLimit-Limit") == ["3"]  # once, not once per layer


async def test_exempt_and_unlimited_routes_get_no_fields(
    async_client: redis.asyncio.Redis,
) -> None:
    app = FastAPI()
    app.add_middleware(redlease.web.RateLimitHeaders)
    exempt = Depends(redlease.web.rate_limit(async_client, "1/minute", on_unavailable="deny",
                                             key=lambda request: None))  # fmt: skip

    @app.get("/free")
    async def free() -> JSONResponse:
        return JSONResponse({})

    @app.get("/exempt", dependencies=[exempt])
    async def exempted() -> JSONResponse:
        return JSONResponse({})

    for path in ("/free", "/exempt"):
        answers = await get_all(app, path, 2)
        assert [r.status_code for r in answers] == [200, 200]
        assert not any(field in answers[1].headers for field in FIELDS)
