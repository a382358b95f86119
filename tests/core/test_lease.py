"""Holdings and tokens (``_core/lease.py``): no Redis."""

from __future__ import annotations

from redlease._core.lease import Holding, new_token


def test_tokens_are_random_and_long() -> None:
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    process, _random, identity = next(iter(tokens)).split(b".", 2)
    assert all(t.startswith(process + b".") for t in tokens)  # the process' channel id
    assert all(len(t.split(b".")[1]) == 32 for t in tokens)  # and 128 random bits
    assert all(t.endswith(b"." + identity) for t in tokens)  # and who holds it


def holding(ttl_ms: int = 3000, key: bytes = b"k") -> Holding:
    return Holding(key=key, token=b"t", fence=1, owner=1, ttl_ms=ttl_ms, expires_at=100.0)


def test_mark_lost_returns_the_callback_once() -> None:
    calls: list[int] = []
    h = holding()
    h.on_lost = lambda: calls.append(1)
    assert h.mark_lost() is h.on_lost
    assert h.mark_lost() is None  # already lost
