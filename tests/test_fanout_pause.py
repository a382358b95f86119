"""asyncio only: a process paused past a round's deadline does not blame the servers for it.

asyncio runs a timer that is due before the reads that its own pause made possible: without
a second look, every server of a round that the process itself stalled came back late
(a CI run: "could not release lock: only 0 of 5 servers answered ... no reply yet after
243.8 ms", with a deadline of 100 ms). The sync fan-out needs no twin of this: ``poll`` looks
at the sockets once more when it wakes up.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import redlease.asyncio as redlease
from redlease import _fanout
from redlease._core.lock import INSPECT
from redlease._fanout import Late

pytestmark = pytest.mark.timeout(60)
PAUSE = 0.3  # three deadlines of the default server_timeout (0.1 s)
ROUNDS = 5


async def paused_rounds(clients: list[Any], pause: float = PAUSE) -> list[list[Any]]:
    """ROUNDS rounds of a read-only script, each with the process paused for ``pause``
    seconds once the round has started, before its commands are sent."""
    lock = redlease.Redlock(clients, "paused", ttl=10.0)
    assert lock.server_timeout == 0.1
    assert await lock.acquire()  # every connection open: a round only sends and reads
    await lock.release()
    rounds = []
    for _ in range(ROUNDS):
        # Queued before the round's tasks (run() creates them before its first await).
        asyncio.get_running_loop().call_soon(time.sleep, pause)
        rounds.append(await lock._servers.round(INSPECT, lock._keys.in_order(), [b"nobody"]))
    return rounds


async def test_a_paused_process_still_counts_the_replies(async_redlock_clients: list[Any]) -> None:
    for replies in await paused_rounds(async_redlock_clients):
        assert not [r for r in replies if isinstance(r, BaseException)], replies


async def test_twin_without_a_second_look_the_servers_are_late(
    async_redlock_clients: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above catches a fan-out that blames its servers for its own pause (with
    neither look: the long pause is caught by either)."""
    monkeypatch.setattr(_fanout, "OVERSLEPT", float("inf"))
    monkeypatch.setattr(_fanout, "_began", lambda slot: None)
    rounds = await paused_rounds(async_redlock_clients)
    assert any(isinstance(r, Late) for replies in rounds for r in replies)  # fails above


# A pause that ends after the deadline, but less than OVERSLEPT deadlines after it, before
# the commands were sent (a CI run: "only 0 of 5 servers answered ... no reply yet after
# 140.3 ms"): the timer is not late enough to tell a pause, but the calls went out late.
SHORT_PAUSE = 0.12


async def test_a_call_sent_after_a_short_pause_has_its_whole_deadline(
    async_redlock_clients: list[Any],
) -> None:
    for replies in await paused_rounds(async_redlock_clients, SHORT_PAUSE):
        assert not [r for r in replies if isinstance(r, BaseException)], replies


async def test_twin_counting_from_the_rounds_start_the_servers_are_late(
    async_redlock_clients: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fanout, "_began", lambda slot: None)  # the old clock
    rounds = await paused_rounds(async_redlock_clients, SHORT_PAUSE)
    assert any(isinstance(r, Late) for replies in rounds for r in replies)  # fails above
