"""The shared resource's pure part (``_core/shared.py``, ``_core/semaphore.py``)."""

from __future__ import annotations

import pytest

from redlease import ForeignData, SemaphoreInfo
from redlease._core.election import ElectionInfo, Leader, decode_watch, election_info
from redlease._core.holder import decode
from redlease._core.latch import LatchInfo, LatchKeys, decode_wait
from redlease._core.latch import decode_inspect as latch_inspect
from redlease._core.rwlock import ReadWriteLockInfo, rwlock_info
from redlease._core.semaphore import semaphore_info
from redlease._core.shared import (
    EVERYTHING,
    Holder,
    SharedKeys,
    Snapshot,
    decode_acquire,
    decode_inspect,
    int_list,
)


def test_keys_share_one_hash_tag_in_script_order() -> None:
    keys = SharedKeys.build("app", b"pool", "semaphore")
    assert all(k.startswith(b"app:{pool}:semaphore:") for k in keys.in_order())
    assert keys.in_order()[0] == keys.holders and keys.in_order()[-1] == keys.watchers
    assert len(set(keys.in_order())) == 8


def test_decode_inspect() -> None:
    keys = SharedKeys.build("p", b"n", "rwlock")
    raw = [[3, 2, 1, 9, 1500], [b"a.1", 1500, 1, b""], [b"b.2", 2500, 1, b"9 v"]]
    snap = decode_inspect(raw, "n", keys)
    assert snap == Snapshot(
        3, 2, 1, 9, 1.5, (Holder(b"a.1", 1.5, 1, b""), Holder(b"b.2", 2.5, 1, b"9 v"))
    )
    assert decode_inspect([[1, 0, 0, 0, -2]], "n", keys).mine is None
    with pytest.raises(ForeignData, match=r"p:\{n\}:rwlock:queue"):
        decode_inspect([-3, 3], "n", keys)
    for bad in (None, [[1, 2]], [[1, 2, 3, 4, 5], [b"x"]]):
        with pytest.raises(ValueError, match=r"shared_inspect\.lua"):
            decode_inspect(bad, "n", keys)


def test_decode_acquire_carries_the_stored_capacity() -> None:
    assert decode_acquire([1, 7]).capacity is None
    got = decode_acquire([1, 7, 5])
    assert (got.reply.acquired, got.reply.value, got.capacity) == (True, 7, 5)
    assert decode_acquire([b"0", b"-1", b"3"]).capacity == 3
    for bad in ([1, 7, b"x"], [9, 1], None):
        with pytest.raises(ValueError):
            decode_acquire(bad)


def test_int_list() -> None:
    assert int_list([b"1", 2], "x.lua", 2) == [1, 2]
    with pytest.raises(ValueError, match=r"x\.lua"):
        int_list([1], "x.lua", 2)


def test_semaphore_info_never_reports_negative_availability() -> None:
    snap = Snapshot(1, 4, 0, 4, None, (Holder(b"a", 1.0, 1, b""), Holder(b"b", 2.0, 3, b"")))
    assert semaphore_info(snap, "s", {b"b"}) == SemaphoreInfo(
        name="s",
        permits=1,
        used=4,
        available=0,
        waiters=0,
        mine=3,
        holders=(1.0, 2.0),
        fence=4,
        held_by=(decode(b"a", 0), decode(b"b", 0)),
        units=(1, 3),
    )


def test_latch_replies() -> None:
    latch_keys = LatchKeys.build("p", b"l")
    assert all(k.startswith(b"p:{l}:") for k in latch_keys.in_order())
    assert decode_wait([1, 4]) == (True, 4)
    assert latch_inspect([2, 1, 3], "l", latch_keys) == LatchInfo("l", 2, 1, 3)
    with pytest.raises(ForeignData, match=r"p:\{l\}:waiters"):
        latch_inspect([-3, 3], "l", latch_keys)
    for bad in ([2, 1], [b"x", 1]):
        with pytest.raises(ValueError, match=r"latch_wait\.lua"):
            decode_wait(bad)


def test_election_replies() -> None:
    assert decode_watch([1, 3, b"host", 3]) == (True, Leader("host", 3), 3)
    assert decode_watch([1, 0, b"", 4]) == (True, None, 4)
    assert decode_watch([0, 250]) == (False, None, 250)
    for bad in ([2, 1], [b"x"], None):
        with pytest.raises(ValueError, match=r"election_watch\.lua"):
            decode_watch(bad)
    snap = Snapshot(1, 1, 2, 7, None, (Holder(b"t", 1.0, 1, b"7 a b"),))
    assert election_info(snap, "e") == ElectionInfo(
        name="e",
        leader=Leader("a b", 7),
        remaining=1.0,
        candidates=2,
        mine=False,
        last_term=7,
        held_by=decode(b"t", 7),
    )


def test_rwlock_info_tells_the_writer_from_readers() -> None:
    writer = Holder(b"w", 1.0, EVERYTHING, b"")
    reader = Holder(b"r", 2.0, 1, b"")
    snap = Snapshot(EVERYTHING, EVERYTHING + 1, 1, 5, None, (writer, reader))
    assert rwlock_info(snap, "rw") == ReadWriteLockInfo(
        name="rw",
        readers=1,
        writer=True,
        waiters=1,
        fence=5,
        leases=(1.0, 2.0),
        held_by=(decode(b"w", 0), decode(b"r", 0)),
    )
