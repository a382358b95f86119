"""Whether a server may evict redlease's keys: its ``maxmemory-policy``, read once per client.

Every redlease key is data the server must keep: a lock's key evicted is a lock released
under its holder (a second client acquires it), a queue evicted drops its waiters. Only
``noeviction`` keeps them: ``allkeys-*`` policies may evict any key, and ``volatile-*``
policies evict keys with a TTL first, which is every lease. The client reads the policy on
its first connection to a server (``CONFIG GET maxmemory-policy``) and warns once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SAFE", "policy_of", "risk"]

SAFE = "noeviction"
"""The one ``maxmemory-policy`` under which the server never evicts a key."""


def policy_of(reply: Any) -> str | None:
    """The policy in a ``CONFIG GET maxmemory-policy`` reply (RESP2 ``[name, value]`` or
    RESP3 ``{name: value}``, bytes or str); ``None`` when it has none (a proxy's empty list)."""
    if isinstance(reply, dict):
        values = list(reply.values())
    elif isinstance(reply, (list, tuple)) and len(reply) >= 2:
        values = [reply[1]]
    else:
        return None
    if not values:
        return None
    value = values[0]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode(errors="replace")
    return str(value)


def risk(policy: str) -> str | None:
    """What ``policy`` risks for redlease's keys, in a sentence; ``None`` for ``noeviction``."""
    if policy == SAFE:
        return None
    if policy.startswith("volatile-"):
        return (
            "it evicts keys with a TTL first, and every lease has one: under memory pressure "
            "a held lock's key is evicted and a second client acquires the lock"
        )
    return (
        "it may evict any key: a held lock's key evicted lets a second client acquire the "
        "lock, an evicted queue drops its waiters"
    )
