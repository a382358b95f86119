"""Cancelling an asyncio acquire at any point of its life, and what must hold afterwards.

An acquire runs in a task through :func:`instrumented`, which counts the task's suspensions
(each await that really waits) and cancels the task at the ``k``-th one (``at``), or as the
future it waits on there completes (``done``: the cancellation and the reply arrive together,
where ``asyncio.wait_for`` swallowed it on Python 3.10-3.11), or ``delay`` seconds after the
start (``timer``). :func:`trial` runs one round on a held primitive: victims cancelled at
their plans, one live waiter, then the holder releases. A round's problems are returned, not
raised, so that a broken variant can show the checks catch it:

* every cancelled acquire ends promptly (``CancelledError``, or ``True`` if its plan came
  after it acquired: then it releases);
* the live waiter is served within ``BOUND`` of the lock becoming free for it (the hand-off
  window, with a loaded machine's slack; a lost turn costs the 10 s lease);
* nothing is left behind: no queued token (every sorted set of the name empty), no lease (a
  fresh handle takes the name at once), no follower or leader in the hubs.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio

import redlease.asyncio as redlease
from redlease._async.runtime import runtime_for

TTL = 10.0  # a lost turn or an orphan lease shows as seconds, far past BOUND
BOUND = 2.0  # seconds: a live waiter is served within this of the lock becoming free
ENDS = 2.0  # seconds: a cancelled acquire has ended within this
KINDS = ("lock", "rlock", "semaphore", "write", "election", "redlock")


@dataclass(frozen=True)
class Plan:
    """When to cancel one acquire: ``mode`` "at"/"done" at suspension ``k``; "timer" after
    ``delay`` s; "never" (the live waiter, and the run that measures a path)."""

    mode: str
    k: int = 0
    delay: float = 0.0


@dataclass
class Seen:
    steps: int = 0
    cancelled_at: float | None = None  # when the plan cancelled the task


@types.coroutine
def instrumented(coro: Any, plan: Plan, seen: Seen) -> Generator[Any, Any, Any]:
    """Run ``coro`` (in the current task), cancelling the task as ``plan`` says."""
    steps = coro.__await__()
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            yielded = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            return stop.value
        seen.steps += 1
        if plan.mode in ("at", "done") and seen.steps == plan.k:
            task = asyncio.current_task()
            assert task is not None
            if plan.mode == "at" or not isinstance(yielded, asyncio.Future):
                cancel(task, seen)  # lands on the await that yielded
            else:
                yielded.add_done_callback(lambda _, task=task: cancel(task, seen))
        try:
            value, error = (yield yielded), None
        except BaseException as exc:
            value, error = None, exc


def cancel(task: asyncio.Future[Any], seen: Seen) -> None:
    if not task.done():
        seen.cancelled_at = time.monotonic()
        task.cancel()


class Side:
    """One handle of a primitive, taken and given back the same way for every kind."""

    def __init__(self, kind: str, clients: list[redis.asyncio.Redis], name: str) -> None:
        self.kind = kind
        one = clients[0]
        if kind == "lock":
            self.handle: Any = redlease.Lock(one, name, ttl=TTL)
        elif kind == "rlock":
            self.handle = redlease.RLock(one, name, ttl=TTL)
        elif kind == "semaphore":
            self.handle = redlease.Semaphore(one, name, 1, ttl=TTL)
        elif kind == "write":
            self.handle = redlease.ReadWriteLock(one, name, ttl=TTL).write
        elif kind == "election":
            self.handle = redlease.Election(one, name, ttl=TTL)
        else:
            self.handle = redlease.Redlock(clients, name, ttl=TTL)

    def take(self, timeout: float | None) -> Awaitable[bool]:
        if self.kind == "election":
            return self.handle.campaign("candidate", timeout)  # type: ignore[no-any-return]
        return self.handle.acquire(timeout=timeout)  # type: ignore[no-any-return]

    async def give(self) -> None:
        if self.kind == "election":
            await self.handle.resign()
        else:
            await self.handle.release()


@dataclass
class Round:
    """The clients of one round: ``holders`` (a process of their own, as far as the hubs go)
    and ``waiters`` (victims and the live waiter share their hubs), and the admin clients."""

    holders: list[redis.asyncio.Redis]
    waiters: list[redis.asyncio.Redis]
    admins: list[redis.asyncio.Redis]
    problems: list[str] = field(default_factory=list)


async def path_length(kind: str, rnd: Round, name: str) -> int:
    """Suspensions of an acquire that waits for a release, then takes the lock."""
    holder = Side(kind, rnd.holders, name)
    assert await holder.take(0)
    seen, waiter = Seen(), Side(kind, rnd.waiters, name)
    task = asyncio.ensure_future(instrumented(waiter.take(None), Plan("never"), seen))
    await asyncio.sleep(0.05)
    await holder.give()
    assert await asyncio.wait_for(task, 5.0)
    await waiter.give()
    return seen.steps


async def trial(
    kind: str, rnd: Round, name: str, plans: list[Plan], live_at: int, hold: float = 0.03
) -> None:
    """One round: the victims (one per plan) and a live waiter, queued in that order with the
    live one at position ``live_at``, wait on a held ``name``; it is released ``hold`` s
    after the last one queued. Whoever acquires releases at once, as its caller would."""
    holder = Side(kind, rnd.holders, name)
    assert await holder.take(0), "the round's name is free"
    tasks: dict[asyncio.Future[Any], tuple[Side, Seen, Plan]] = {}
    live = Side(kind, rnd.waiters, name)
    for i in range(len(plans) + 1):
        if i == live_at:
            tasks[asyncio.ensure_future(live.take(30.0))] = (live, Seen(), Plan("never"))
        if i < len(plans):
            side, seen, plan = Side(kind, rnd.waiters, name), Seen(), plans[i]
            task = asyncio.ensure_future(instrumented(side.take(None), plan, seen))
            if plan.mode == "timer":
                asyncio.get_running_loop().call_later(plan.delay, cancel, task, seen)
            tasks[task] = (side, seen, plan)
        await asyncio.sleep(0.005)  # queued in this order
    await asyncio.sleep(hold)
    await holder.give()
    await supervise(kind, rnd, tasks, time.monotonic())
    rnd.problems += await left_behind(kind, rnd, name)


async def supervise(
    kind: str, rnd: Round, tasks: dict[asyncio.Future[Any], tuple[Side, Seen, Plan]], free: float
) -> None:
    """Until every acquire ended: release what was acquired; check that a cancelled acquire
    ends within ENDS, and that the live waiter is served within BOUND of the lock last
    becoming free (``free``). A victim whose plan never came (parked past its point) is
    cancelled once everything else ended."""
    pending, late = set(tasks), set()
    while pending:
        done, pending = await asyncio.wait(pending, timeout=0.02)
        now = time.monotonic()
        for task in done:
            side, seen, plan = tasks[task]
            if task.cancelled():
                continue
            if task.exception() is not None:
                rnd.problems.append(f"{kind}: {plan} raised {task.exception()!r}")
            elif task.result():
                if seen.cancelled_at is not None:
                    rnd.problems.append(f"{kind}: {plan} acquired after its cancel")
                await side.give()
                free = time.monotonic()
            elif plan.mode == "never":
                rnd.problems.append(f"{kind}: the live waiter timed out")
        for task in pending - late:
            side, seen, plan = tasks[task]
            if seen.cancelled_at is not None and now - seen.cancelled_at > ENDS:
                late.add(task)
                rnd.problems.append(f"{kind}: {plan} still waiting {ENDS} s after its cancel")
                task.cancel()
            elif plan.mode == "never" and now - free > BOUND:
                late.add(task)
                plans = [p for _, _, p in tasks.values()]
                rnd.problems.append(f"{kind}: {plans}: live waiter not served in {BOUND} s")
                task.cancel()  # caught: the rest of the round is not worth a lease
        parked = all(tasks[t][2].mode != "never" for t in pending)
        if pending and parked and now - free > BOUND:  # past their plans' points, alone
            for task in pending:
                cancel(task, tasks[task][1])


async def left_behind(kind: str, rnd: Round, name: str) -> list[str]:
    """What a round left behind once every acquire ended and every holder released."""
    found: list[str] = []
    for admin in rnd.admins:
        for _ in range(100):  # a cancelled wait leaves its queue in the background
            queued = [key async for key in admin.scan_iter(match=f"*{{{name}}}*", _type="zset")]
            if not queued:
                break
            await asyncio.sleep(0.02)
        else:
            found.append(f"{kind}: still queued after 2 s: {queued}")
    fresh = Side(kind, rnd.holders, name)
    if await fresh.take(0):
        await fresh.give()
    else:
        found.append(f"{kind}: a fresh handle cannot take {name}: a lease was left")
    for client in rnd.waiters:
        hub = runtime_for(client).hub
        if hub._followers or hub._leader is not None:
            found.append(f"{kind}: the hub still lists {hub._followers} / {hub._leader}")
    return found


RoundFactory = Callable[[], Awaitable[Round]]
