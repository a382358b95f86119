"""The pure part of redlease.cached: cache names, argument checks, reply decoding."""

from __future__ import annotations

import functools
import json
import pickle

import pytest

from redlease._core import cache, cache_values


def report(day: str, a: int = 1, b: int = 2) -> None: ...


def other(day: str, a: int = 1, b: int = 2) -> None: ...


def test_a_cache_name_is_stable_and_hashes_the_arguments() -> None:
    name = cache.cache_name(report, ("mon",), {"b": 2, "a": 1})
    assert name == cache.cache_name(report, ("mon",), {"a": 1, "b": 2})
    start = b"cache:tests.core.test_cache.report:"
    assert name.startswith(start) and len(name) == len(start) + 32
    assert name != cache.cache_name(report, ("tue",), {"a": 1, "b": 2})
    assert name != cache.cache_name(other, ("mon",), {"a": 1, "b": 2})
    assert cache.cache_name(report, ("mon",), {}, name="app.report").startswith(
        b"cache:app.report:"
    )


def test_one_call_is_one_name_however_its_arguments_are_spelled() -> None:
    spellings = [
        (("mon",), {}),
        ((), {"day": "mon"}),
        (("mon", 1), {}),
        (("mon",), {"b": 2}),
        ((), {"b": 2, "day": "mon", "a": 1}),
    ]
    names = {cache.cache_name(report, args, kwargs) for args, kwargs in spellings}
    assert len(names) == 1
    assert cache.cache_name(report, ("mon", 3), {}) not in names
    with pytest.raises(TypeError, match="report: missing a required argument: 'day'"):
        cache.cache_name(report, (), {})


def test_a_key_function_names_the_value_itself() -> None:
    assert cache.cache_name(report, (7,), {}, key=lambda day: f"user:{day}") == b"cache:user:7"
    with pytest.raises(TypeError, match="key"):
        cache.cache_name(report, (7,), {}, key=lambda day: 7)


def test_arguments_that_cannot_make_a_key_need_a_key_function() -> None:
    with pytest.raises(TypeError, match=r"argument 'day' is of type object.*key="):
        cache.cache_name(report, (object(),), {})


def test_a_lambda_or_a_nested_function_needs_a_name() -> None:
    """Their qualified name is shared (two lambdas of a module, the closures of one factory):
    without name= they would share keys."""

    def scaled(x: int) -> int:
        return x

    for func in (lambda x: x, scaled, functools.partial(report, "mon")):
        with pytest.raises(ValueError, match="name="):
            cache.Namer(func, "p")
        assert cache.Namer(func, "p", name="scaled:2").label == "scaled:2"
        assert cache.Namer(func, "p", key=lambda x: f"s:{x}").name((1,), {}) == b"cache:s:1"
    assert cache.Namer(report, "p").label == "tests.core.test_cache.report"
    assert cache.Namer(report, "p", key="old.name").label == "old.name"
    for bad, error in ((dict(name=""), ValueError), (dict(name=1), TypeError)):
        with pytest.raises(error, match="name"):
            cache.Namer(report, "p", **bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not both"):
        cache.Namer(report, "p", name="a", key=lambda day: "b")


def test_a_methods_instance_is_left_out_of_its_key() -> None:
    class Repo:
        def get(self, k: str) -> None: ...

    namer = cache.Namer(Repo.get, "p", name="repo.get")
    assert namer.name((Repo(), "a"), {}) == namer.name((Repo(),), {"k": "a"})
    assert namer.name((Repo(), "a"), {}) != namer.name((Repo(), "b"), {})


def test_keys_share_the_rebuild_locks_hash_tag() -> None:
    keys = cache.CacheKeys.build("redlease", b"cache:f:1")
    assert keys.data == b"redlease:{cache:f:1}:cached"
    assert keys.fence == b"redlease:{cache:f:1}:fence"
    namer = cache.Namer(report, "p")
    assert namer.data_key(b"cache:f:1") == cache.CacheKeys.build("p", b"cache:f:1").data


def test_options_name_the_argument_at_fault() -> None:
    settings = cache.options(60, 0, 10.0, "redlease", json)
    assert (settings.ttl_ms, settings.stale_ms, settings.lock_ttl) == (60_000, 0, 10.0)
    assert cache.options(1, 2.5, 1, "p", pickle).stale_ms == 2500
    assert cache.options(1, 0, 1, "p", None).serializer is cache_values.JSON
    for bad, arg in (((0, 0, 1), "ttl"), ((1, -1, 1), "stale"), ((1, 0, 0.01), "lock_ttl")):
        with pytest.raises(ValueError, match=arg):
            cache.options(*bad, "redlease", json)
    with pytest.raises(TypeError, match="serializer"):
        cache.options(1, 0, 1, "redlease", object())


def test_replies_decode() -> None:
    assert cache.decode_read([0]) == cache.Lookup(cache.MISSING)
    assert cache.decode_read([1, b"42"]) == cache.Lookup(cache.FRESH, b"42")
    assert cache.decode_read([2, "42"]) == cache.Lookup(cache.STALE, b"42")
    assert cache.decode_write([1, 5]) is True and cache.decode_write([0, 7]) is False
    for raw in (None, [9], []):
        with pytest.raises(ValueError):
            cache.decode_read(raw)
    assert cache.dumps(json, {"a": 1}) == b'{"a": 1}'
