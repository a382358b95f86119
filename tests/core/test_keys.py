"""Each primitive its own key space: no two primitives of one name share a key."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from redlease._core.election import election_keys
from redlease._core.fencing import FencedKeys
from redlease._core.inventory import InventoryKeys
from redlease._core.latch import LatchKeys
from redlease._core.lock import LockKeys
from redlease._core.rwlock import rwlock_keys
from redlease._core.semaphore import semaphore_keys
from redlease._core.shared import SharedKeys

NAMES = [b"y", b"orders:42", b"a}b", b"a{b}c", b"semaphore", b"x:semaphore"]


def key_spaces(prefix: str, name: bytes) -> dict[str, set[bytes]]:
    """Every key of every primitive named ``name``, by primitive."""
    return {
        "lock": set(LockKeys.build(prefix, name).in_order()),
        "semaphore": set(semaphore_keys(prefix, name).in_order()),
        "rwlock": set(rwlock_keys(prefix, name).in_order()),
        "election": set(election_keys(prefix, name).in_order()),
        "latch": set(LatchKeys.build(prefix, name).in_order()),
        "fenced": set(FencedKeys.build(prefix, name).all),
        "inventory": set(InventoryKeys.build(prefix, name).all),
    }


def shared_keys(spaces: dict[str, set[bytes]]) -> list[tuple[str, str, set[bytes]]]:
    kinds = sorted(spaces)
    return [
        (a, b, spaces[a] & spaces[b])
        for i, a in enumerate(kinds)
        for b in kinds[i + 1 :]
        if spaces[a] & spaces[b]
    ]


@pytest.mark.parametrize("name", NAMES)
def test_no_two_primitives_of_one_name_share_a_key(name: bytes) -> None:
    assert shared_keys(key_spaces("redlease", name)) == []


def test_no_primitive_shares_a_key_with_another_of_any_listed_name() -> None:
    """Across names too: a Lock named "semaphore" shares no key with a Semaphore."""
    seen: dict[bytes, tuple[str, bytes]] = {}
    for name in NAMES:
        for kind, found in key_spaces("redlease", name).items():
            for key in found:
                assert seen.setdefault(key, (kind, name)) == (kind, name), key


@pytest.mark.parametrize("name", NAMES)
def test_each_primitive_keeps_its_keys_in_one_cluster_slot(name: bytes) -> None:
    for kind, found in key_spaces("redlease", name).items():
        assert len({key_slot(key) for key in found}) == 1, kind


def test_the_lock_layout_is_unchanged() -> None:
    """Existing locks keep working across the upgrade: the same four keys as before."""
    keys = LockKeys.build("redlease", b"y")
    assert keys.in_order() == [
        b"redlease:{y}:lock",
        b"redlease:{y}:fence",
        b"redlease:{y}:queue",
        b"redlease:{y}:handoff",
    ]


def test_twin_the_old_shared_layout_collided_with_the_lock() -> None:
    """The layout before: the shared primitives' keys had no kind, and so one name's Lock,
    Semaphore, ReadWriteLock and Election shared ``:queue`` and ``:fence`` (and the three
    shared ones every key). The check above catches it."""
    suffixes = ("holders", "units", "queue", "granted", "fence", "capacity", "payload", "watchers")
    old = {
        "lock": set(LockKeys.build("redlease", b"y").in_order()),
        "semaphore": {b"redlease:{y}:" + suffix.encode() for suffix in suffixes},
    }
    assert shared_keys(old) == [
        ("lock", "semaphore", {b"redlease:{y}:queue", b"redlease:{y}:fence"})
    ]


def test_kinds_are_checked() -> None:
    with pytest.raises(ValueError, match="kind"):
        SharedKeys.build("redlease", b"y", "lock")
