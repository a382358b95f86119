"""The pure part of redlease.cached: cache names, argument checks, reply decoding."""

from __future__ import annotations

import json
import pickle

import pytest

from redlease._core import cache


def test_a_cache_name_is_stable_and_hashes_the_arguments() -> None:
    name = cache.cache_name("app.report", None, ("mon",), {"b": 2, "a": 1})
    assert name == cache.cache_name("app.report", None, ("mon",), {"a": 1, "b": 2})
    assert name.startswith(b"cache:app.report:") and len(name) == len(b"cache:app.report:") + 32
    assert name != cache.cache_name("app.report", None, ("tue",), {"a": 1, "b": 2})
    assert name != cache.cache_name("app.other", None, ("mon",), {"a": 1, "b": 2})
    # positional and keyword arguments are not merged: different calls, different keys
    assert cache.cache_name("f", None, (1,), {}) != cache.cache_name("f", None, (), {"x": 1})


def test_a_key_function_names_the_value_itself() -> None:
    assert cache.cache_name("f", lambda x: f"user:{x}", (7,), {}) == b"cache:user:7"
    with pytest.raises(TypeError, match="key"):
        cache.cache_name("f", lambda x: 7, (7,), {})


def test_arguments_that_are_not_json_need_a_key() -> None:
    with pytest.raises(TypeError, match="key="):
        cache.cache_name("f", None, (object(),), {})


def test_keys_share_the_rebuild_locks_hash_tag() -> None:
    keys = cache.CacheKeys.build("redlease", b"cache:f:1")
    assert keys.data == b"redlease:{cache:f:1}:cached"
    assert keys.fence == b"redlease:{cache:f:1}:fence"
    namer = cache.Namer("f", None, "p")
    assert namer.data_key(b"cache:f:1") == cache.CacheKeys.build("p", b"cache:f:1").data


def test_options_name_the_argument_at_fault() -> None:
    settings = cache.options(60, 0, 10.0, "redlease", json)
    assert (settings.ttl_ms, settings.stale_ms, settings.lock_ttl) == (60_000, 0, 10.0)
    assert cache.options(1, 2.5, 1, "p", pickle).stale_ms == 2500
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
