"""asyncio: an acquire cancelled at any point of its life ends at once and leaves nothing
behind, for every primitive that waits (see tests/cancel_points.py for the rounds and their
checks). Seeded: ``REDLEASE_CANCEL_SEED`` replays a run (the seed is in the failure)."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async.hub import AsyncHub
from redlease._redispy_versions import AsyncConnections
from tests.cancel_points import KINDS, Plan, Round, path_length, trial
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(180)

SEED = int(os.environ.get("REDLEASE_CANCEL_SEED") or random.randrange(2**32))
MIXED = 6  # rounds per kind with two victims, cancelled by timers and at random awaits


@pytest.fixture
async def make_round(
    server: RedisServer, redlock_servers: list[RedisServer]
) -> AsyncIterator[Callable[[str], Awaitable[Round]]]:
    made: list[redis.asyncio.Redis] = []

    def clients(kind: str) -> list[redis.asyncio.Redis]:
        servers = redlock_servers[:3] if kind == "redlock" else [server]
        new = [redis.asyncio.Redis(host=s.host, port=s.port) for s in servers]
        made.extend(new)
        return new

    async def factory(kind: str) -> Round:
        return Round(clients(kind), clients(kind), clients(kind))

    yield factory
    for client in made:
        await redlease.close(client)
        await client.aclose()


def sweep(steps: int) -> list[Plan]:
    """A cancellation at every suspension of the path, and as each one's wait completes."""
    return [Plan(mode, k=k) for k in range(1, steps + 3) for mode in ("at", "done")]


def mixed(rng: random.Random, steps: int) -> list[Plan]:
    def one() -> Plan:
        if rng.random() < 0.5:
            return Plan("timer", delay=rng.uniform(0.0, 0.005))
        return Plan(rng.choice(("at", "done")), k=rng.randint(1, steps + 2))

    return [one(), one()]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_acquire_ends_and_leaves_nothing(
    kind: str, make_round: Callable[[str], Awaitable[Round]]
) -> None:
    rng = random.Random(f"{SEED}:{kind}")
    rnd = await make_round(kind)
    base = f"cancel:{SEED}:{kind}"
    steps = await path_length(kind, rnd, f"{base}:path")
    for i, plan in enumerate(sweep(steps)):
        await trial(kind, rnd, f"{base}:{i}", [plan], live_at=rng.randint(0, 1))
    for i in range(MIXED):
        plans = mixed(rng, steps)
        await trial(kind, rnd, f"{base}:mixed:{i}", plans, live_at=rng.randint(0, 2))
    assert not rnd.problems, (
        f"seed {SEED} (REDLEASE_CANCEL_SEED={SEED} replays it), a path of {steps} "
        f"suspensions: {rnd.problems[:6]}"
    )


# -- the checks catch what they are for ------------------------------------------------------


async def test_a_swallowed_cancellation_is_caught(
    make_round: Callable[[str], Awaitable[Round]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken: each reply read as asyncio.wait_for does on Python 3.10-3.11, which returns a
    reply that came with the cancellation and drops the cancellation."""
    read = AsyncConnections.read

    async def swallowing(conn: Any, timeout: float | None) -> Any:
        inner = asyncio.ensure_future(read(conn, timeout))
        waiter = asyncio.get_running_loop().create_future()
        inner.add_done_callback(lambda _: waiter.done() or waiter.set_result(None))
        try:
            await waiter
        except asyncio.CancelledError:
            if inner.done():
                return inner.result()
            inner.cancel()
            raise
        return inner.result()

    monkeypatch.setattr(AsyncConnections, "read", staticmethod(swallowing))
    rnd = await make_round("lock")
    steps = await path_length("lock", rnd, f"swallow:{SEED}:path")
    for k in range(1, steps + 1):
        await trial("lock", rnd, f"swallow:{SEED}:{k}", [Plan("done", k=k)], live_at=1)
    assert any("still waiting" in p or "acquired after" in p for p in rnd.problems), rnd.problems


async def test_a_cancelled_follower_left_listed_is_caught(
    make_round: Callable[[str], Awaitable[Round]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken: a follower cancelled in its wait stays in the hub's list. The leader (first
    victim) and a follower (second) give up; the reading turn goes to the dead follower and
    the live waiter (third) sleeps until the lease runs out."""
    wait = AsyncHub.wait

    async def leaky(self: AsyncHub, waiter: Any, timeout: float | None) -> None:
        try:
            await wait(self, waiter, timeout)
        except asyncio.CancelledError:
            if self._leader is not waiter:
                self._followers.insert(0, waiter)
            raise

    monkeypatch.setattr(AsyncHub, "wait", leaky)
    rnd = await make_round("lock")
    plans = [Plan("timer", delay=0.08), Plan("timer", delay=0.05)]
    await trial("lock", rnd, f"leaky:{SEED}", plans, live_at=2, hold=0.15)
    assert any("live waiter not served" in p for p in rnd.problems), rnd.problems
