"""Reading a server's maxmemory-policy and what it risks (pure)."""

from __future__ import annotations

import pytest

from redlease._core.eviction import policy_of, risk


@pytest.mark.parametrize(
    ("reply", "policy"),
    [
        ([b"maxmemory-policy", b"allkeys-lru"], "allkeys-lru"),
        (["maxmemory-policy", "noeviction"], "noeviction"),
        ({b"maxmemory-policy": b"volatile-ttl"}, "volatile-ttl"),
        ([], None),
        ({}, None),
        (None, None),
    ],
)
def test_policy_of_reads_resp2_resp3_bytes_and_str(reply: object, policy: str | None) -> None:
    assert policy_of(reply) == policy


def test_only_noeviction_is_safe() -> None:
    assert risk("noeviction") is None
    assert "every lease" in (risk("volatile-lru") or "")
    for policy in ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-random"):
        assert "second client" in (risk(policy) or "")
