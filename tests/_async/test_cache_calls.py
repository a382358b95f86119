"""redlease.cached: one key per call, methods, keys no two functions share, values as they were
(asyncio; tests/_sync/test_cache_calls.py is generated, and covers plain functions and methods).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core import calls as calls_core

pytestmark = pytest.mark.timeout(60)


# -- one key per call -----------------------------------------------------------------------
@pytest.mark.parametrize("arguments", ["bound", "as spelled"])
async def test_every_spelling_of_a_call_is_one_value_and_invalidate_takes_any(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch, arguments: str
) -> None:
    if arguments == "as spelled":  # the twin: arguments hashed as given (as they were before)
        monkeypatch.setattr(
            calls_core, "bind", lambda sig, args, kwargs: {"args": args, "kwargs": kwargs}
        )
    calls: list[tuple[str, str]] = []

    @redlease.cached(async_client, ttl=30, name="page")
    async def page(slug: str, lang: str = "en") -> str:
        calls.append((slug, lang))
        return f"{slug} in {lang} #{len(calls)}"

    async def spellings() -> set[str]:
        return {
            await page("home"),
            await page(slug="home"),
            await page("home", "en"),
            await page("home", lang="en"),
            await page(lang="en", slug="home"),
        }

    if arguments == "as spelled":
        assert len(await spellings()) == 5  # five computations, five values
        return
    assert await spellings() == {"home in en #1"}
    assert await page("home", "fr") == "home in fr #2"  # another call: another value
    for args, kwargs in [(("home",), {}), ((), {"slug": "home"}), (("home",), {"lang": "en"})]:
        assert await page.invalidate(*args, **kwargs) is True  # the one value, however named
        assert await page.invalidate("home") is False
        assert len(await spellings()) == 1  # computed again, once
    assert len(calls) == 5
    assert await page("home", "fr") == "home in fr #2"  # untouched


# -- methods --------------------------------------------------------------------------------
class Repository:
    """A store whose values depend on its ``region`` (so ``key=`` names it) or not."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.calls: list[str] = []

    async def lookups(self, item: str) -> str:
        self.calls.append(item)
        return f"{item}@{self.region}"


def repository_class(client: redis.asyncio.Redis) -> type[Any]:
    class Repo(Repository):
        @redlease.cached(client, ttl=30, name="repo.shared")
        async def shared(self, item: str, full: bool = False) -> str:
            return await self.lookups(item)

        @redlease.cached(client, ttl=30, key=lambda self, item: f"repo:{self.region}:{item}")
        async def regional(self, item: str) -> str:
            return await self.lookups(item)

    return Repo


async def test_a_method_is_cached_without_key_its_instance_left_out(
    async_client: redis.asyncio.Redis,
) -> None:
    repo_class = repository_class(async_client)
    eu, us = repo_class("eu"), repo_class("us")
    assert await eu.shared("a") == "a@eu"
    assert await eu.shared(item="a", full=False) == "a@eu"
    assert await us.shared("a") == "a@eu"  # the instance is no part of the default key
    assert await repo_class.shared(us, "a") == "a@eu"  # read through the class: the same
    assert (
        eu.shared.key_for("a") == us.shared.key_for(item="a") == repo_class.shared.key_for(eu, "a")
    )
    assert eu.calls == ["a"] and us.calls == []
    assert await us.shared.invalidate(item="a") is True
    assert await us.shared("a") == "a@us"
    assert eu.shared.__name__ == "shared"
    assert "bound" in repr(eu.shared)


async def test_a_methods_key_function_gets_the_instance(async_client: redis.asyncio.Redis) -> None:
    repo_class = repository_class(async_client)
    eu, us = repo_class("eu"), repo_class("us")
    assert await eu.regional("a") == "a@eu"
    assert await us.regional("a") == "a@us"
    assert await eu.regional("a") == "a@eu"
    assert eu.calls == ["a"] and us.calls == ["a"]
    assert eu.regional.key_for("a") == b"cache:repo:eu:a"
    assert await eu.regional.invalidate("a") is True
    assert await async_client.exists(b"redlease:{cache:repo:us:a}:cached") == 1


# -- keys that no two functions or argument types share (issue 37) --------------------------
async def test_lambdas_and_closures_need_a_name_and_then_keep_apart(
    async_client: redis.asyncio.Redis,
) -> None:
    with pytest.raises(ValueError, match="name="):
        redlease.cached(async_client, ttl=30)(_plus_one)

    def scaled_by(n: int, name: str) -> Any:
        @redlease.cached(async_client, ttl=30, name=name)
        async def scaled(x: int) -> int:
            return x * n

        return scaled

    with pytest.raises(ValueError, match="inside another"):
        redlease.cached(async_client, ttl=30)(scaled_by(1, "probe").__wrapped__)
    by2, by10 = scaled_by(2, "scaled:2"), scaled_by(10, "scaled:10")
    assert (await by2(5), await by10(5)) == (10, 50)


async def test_twin_two_functions_under_one_name_share_their_values(
    async_client: redis.asyncio.Redis,
) -> None:
    """What the refusal above prevents: closures of one factory under one name (as they had by
    default before, their module and qualified name) answer with each other's values."""

    def scaled_by(n: int) -> Any:
        @redlease.cached(async_client, ttl=30, name="scaled")
        async def scaled(x: int) -> int:
            return x * n

        return scaled

    by2, by10 = scaled_by(2), scaled_by(10)
    assert (await by2(5), await by10(5)) == (10, 10)


async def _plus_one(x: int) -> int:
    return x + 1


_plus_one.__qualname__ = "<lambda>"  # an async lambda cannot be written: named as one


async def test_dict_keys_of_different_types_are_different_values(
    async_client: redis.asyncio.Redis,
) -> None:
    @redlease.cached(async_client, ttl=30, name="kinds")
    async def kinds(d: dict[Any, str]) -> list[str]:
        return sorted(type(k).__name__ for k in d)

    assert await kinds({1: "a"}) == ["int"]
    assert await kinds({"1": "a"}) == ["str"]
    assert await kinds({1: "a"}) == ["int"]


# -- values come back as they were ----------------------------------------------------------
async def test_a_cached_tuple_comes_back_a_tuple(async_client: redis.asyncio.Redis) -> None:
    @redlease.cached(async_client, ttl=30, name="totals")
    async def totals() -> tuple[int, list[tuple[str, int]]]:
        return 3, [("a", 1), ("b", 2)]

    first = await totals()
    again = await totals()  # from Redis
    assert first == again == (3, [("a", 1), ("b", 2)])
    assert type(again) is tuple and type(again[1][0]) is tuple


async def test_a_result_json_would_change_is_refused_not_stored(
    async_client: redis.asyncio.Redis,
) -> None:
    @redlease.cached(async_client, ttl=30, name="by_id")
    async def by_id() -> dict[int, str]:
        return {1: "a"}

    with pytest.raises(TypeError, match="has the key 1 of type int"):
        await by_id()
    assert await async_client.exists(b"redlease:{" + by_id.key_for() + b"}:cached") == 0
