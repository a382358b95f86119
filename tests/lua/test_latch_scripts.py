"""The latch scripts' contracts, one transition at a time (``lua/latch_*.lua``).

A latch counts down from n; at 0 it opens, tells every waiter once ("H<token> 0") and stops
counting until set again. A waiter that saw a generation passes it back, so that a round
that completed between two of its looks opens it even if the latch was set again since.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from redlease._core import latch
from redlease._core.latch import LatchKeys, decode_inspect, decode_wait
from redlease._core.scripts import Script
from redlease.errors import ForeignData
from tests.lua.conftest import CHANNELS

KEYS = LatchKeys.build("redlease", b"latch")
KEEP = 60_000


def run(client: redis.Redis, script: Script, keys: list[bytes], args: list[Any]) -> Any:
    return client.evalsha(client.script_load(script.source), len(keys), *keys, *args)


def set_(client: redis.Redis, n: int) -> int:
    return int(run(client, latch.SET, [KEYS.count, KEYS.generation], [n]))


def count_down(client: redis.Redis) -> int:
    return int(run(client, latch.COUNT_DOWN, KEYS.in_order(), [CHANNELS]))


def wait(client: redis.Redis, token: bytes, seen: int | None = None) -> tuple[bool, int]:
    args = [token, 1, b"" if seen is None else seen, KEEP]
    return decode_wait(run(client, latch.WAIT, KEYS.in_order(), args))


def test_set_starts_counting_only_when_not_counting(client: redis.Redis) -> None:
    assert set_(client, 3) == 1
    assert set_(client, 5) == 0  # counting already: nothing changed
    assert client.get(KEYS.count) == b"3"


def test_counting_down_opens_the_latch_once_and_tells_every_waiter(
    client: redis.Redis, listen: Any
) -> None:
    messages = listen(b"p1", b"p2")
    set_(client, 2)
    assert wait(client, b"p1.a") == (False, 0)
    assert wait(client, b"p2.b") == (False, 0)
    assert client.zcard(KEYS.waiters) == 2
    assert count_down(client) == 1 and messages() == []
    assert count_down(client) == 0
    assert sorted(messages()) == [b"Hp1.a 0", b"Hp2.b 0"]
    assert not client.exists(KEYS.count, KEYS.waiters)
    assert client.get(KEYS.generation) == b"1"
    assert count_down(client) == 0 and client.get(KEYS.generation) == b"1"  # not counting
    assert messages() == []  # told once


def test_twin_a_count_down_short_of_zero_tells_nobody(client: redis.Redis, listen: Any) -> None:
    """The twin: the same waiters with the count not yet at 0 hear nothing, so the messages
    above are the opening's."""
    messages = listen(b"p1", b"p2")
    set_(client, 3)
    wait(client, b"p1.a")
    wait(client, b"p2.b")
    count_down(client)
    count_down(client)
    assert messages() == [] and client.zcard(KEYS.waiters) == 2


def test_a_waiter_that_missed_the_opening_sees_it_by_its_generation(client: redis.Redis) -> None:
    set_(client, 1)
    _, seen = wait(client, b"p1.a")
    count_down(client)
    set_(client, 1)  # counting again before the waiter looked
    assert wait(client, b"p1.a", seen) == (True, 1)  # a round completed since it began
    assert wait(client, b"p2.b") == (False, 1)  # a newcomer waits for the new round


def test_an_open_latch_does_not_keep_waiters(client: redis.Redis) -> None:
    assert wait(client, b"p1.a") == (True, 0)
    assert not client.exists(KEYS.waiters)


def test_leave_takes_the_waiter_out(client: redis.Redis) -> None:
    set_(client, 1)
    wait(client, b"p1.a")
    assert run(client, latch.LEAVE, [KEYS.waiters], [b"p1.a"]) == 1
    assert run(client, latch.LEAVE, [KEYS.waiters], [b"p1.a"]) == 0
    assert client.zcard(KEYS.waiters) == 0


def test_inspect_reads_count_rounds_and_waiters(client: redis.Redis) -> None:
    set_(client, 2)
    wait(client, b"p1.a")
    info = decode_inspect(run(client, latch.INSPECT, KEYS.in_order(), []), "latch", KEYS)
    assert (info.count, info.rounds, info.waiters) == (2, 0, 1)


def test_inspect_refuses_a_key_redlease_did_not_write(client: redis.Redis) -> None:
    client.set(KEYS.generation, b"not a number")
    raw = run(client, latch.INSPECT, KEYS.in_order(), [])
    with pytest.raises(ForeignData):
        decode_inspect(raw, "latch", KEYS)
