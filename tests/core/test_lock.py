"""The mutex's pure part (``_core/lock.py``, ``_core/keys.py``): keys and replies."""

from __future__ import annotations

import pytest

from redlease import ForeignData
from redlease._core import keys
from redlease._core.lock import (
    BARGE_MS,
    BARGING,
    RESERVING,
    ROTATION_MS,
    LockInfo,
    LockKeys,
    acquire_args,
    acquire_reserving_args,
    claim_args,
    decode_acquire,
    decode_inspect,
    leave_args,
    release_args,
)


def test_keys_share_one_hash_tag() -> None:
    keys = LockKeys.build("app", b"orders:42")
    for key in (keys.lock, keys.fence, keys.queue, keys.handoff):
        assert key.startswith(b"app:{orders:42}:")


def test_every_key_builder_uses_one_tag() -> None:
    assert keys.base("p", b"n") == b"p:{n}:"
    assert keys.tagged("p", b"n", "a", "b") == (b"p:{n}:a", b"p:{n}:b")


def test_decode_acquire_refuses_nonsense() -> None:
    assert decode_acquire([1, 7]).acquired
    assert decode_acquire([b"0", b"100"]).value == 100
    for raw in (None, [], [5, 1], ["x", 1]):
        with pytest.raises(ValueError, match="acquire script"):
            decode_acquire(raw)


def test_decode_inspect() -> None:
    lock_keys = LockKeys.build("p", b"n")
    assert decode_inspect([1500, 1, 7, 2], "n", lock_keys) == LockInfo(
        name="n", held=True, mine=True, remaining=1.5, fence=7, waiters=2, servers=1
    )
    held = decode_inspect([1500, 0, 7, 0, b"ab.cd.host:12:Thread-1"], "n", lock_keys).held_by
    assert held is not None and (held.host, held.pid, held.thread) == ("host", 12, "Thread-1")
    assert decode_inspect([-2, 0, 0, 0], "n", lock_keys).remaining is None
    assert decode_inspect([-1, 0, 3, 0], "n", lock_keys) == LockInfo(
        name="n", held=True, mine=False, remaining=None, fence=3, waiters=0, servers=1
    )
    with pytest.raises(ForeignData, match=r"p:\{n\}:queue") as caught:
        decode_inspect([-3, 3], "n", lock_keys)
    assert caught.value.key == lock_keys.queue
    with pytest.raises(ValueError, match=r"inspect\.lua"):
        decode_inspect([1, 2], "n", lock_keys)


def test_the_lock_scripts_argv_is_built_by_name() -> None:
    """acquire_*.lua / release.lua / leave.lua / claim.lua ARGV as their headers number them."""
    assert acquire_args(token=b"t", ttl_ms=10, join=False, window_ms=50, channels=b"c") == [
        b"t",
        10,
        0,
        50,
        b"c",
    ]
    reserving = acquire_reserving_args(
        token=b"t", ttl_ms=10, join=True, window_ms=50, channels=b"c", score="7", tell=False
    )
    assert reserving == [b"t", 10, 1, 50, b"c", "7", "0"]
    release = release_args(token=b"t", window_ms=50, channels=b"c", mode=BARGING)
    assert release == [b"t", 50, b"c", b"B", BARGE_MS, "1", ROTATION_MS, "", 0]
    fair = release_args(token=b"t", window_ms=50, channels=b"c", mode=b"G", lease_ms=10)
    assert fair[8] == 10  # ARGV[9]: the lease a head that joined within the window gets
    quiet = leave_args(token=b"t", window_ms=50, channels=b"c", mode=RESERVING, tell=False)
    assert quiet == [b"t", 50, b"c", b"R", 0, "0", 0]  # no barging turns in mode R
    assert claim_args(token=b"t", ttl_ms=10) == [b"t", 10]
