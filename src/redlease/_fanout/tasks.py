"""The asyncio fan-out: one task per server sends the command and reads its reply (see the
package's docstring for what both forms promise)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from .._core.scripts import Script
from .results import LATE, NOT_YET, Call, Enough, Late, late, pack_all

__all__ = ["AsyncFanOut"]

T = TypeVar("T")
R = TypeVar("R")

OVERSLEPT = 0.5
"""asyncio: a round's timer that fires this many deadlines late means the process was paused;
its servers then get one more deadline (once per round)."""

_BACKGROUND: set[Any] = set()  # asyncio: the tasks still reading late replies (kept alive)


class _Slot:
    """asyncio: one server's call in a fan-out: its Pending once sent, and the scripts to
    send behind it as soon as it is (``follow`` before the send was done)."""

    def __init__(self) -> None:
        self.pending: Any = None
        self.behind: list[tuple[Script, Sequence[bytes], Sequence[Any]]] = []
        self.clock: float | None = None  # when its connection was opened (not billed)
        self.began: float | None = None  # when its task began (to send it)
        self.connecting = False


class AsyncFanOut:
    """Scripts on N servers at once, with asyncio."""

    SLACK = LATE
    """How much longer than a round's deadline its connections' own reads should be allowed
    (``with_deadline``): asyncio reads a late reply with the connection's read timeout, which
    would otherwise close it under what was sent behind; its connects run in parallel."""

    @staticmethod
    async def run(
        calls: Sequence[Call], timeout: float, enough: Enough | None = None, *, hold: bool = False
    ) -> list[Any]:
        """Each call's reply, the exception it raised, or :class:`Late`, in order; within
        ``timeout``, or as soon as ``enough(results)``. ``hold``: the caller may
        :meth:`follow` the late calls, then hands them on with :meth:`release`."""
        started = time.monotonic()
        results: list[Any] = [None] * len(calls)
        slots = [_Slot() for _ in calls]
        connected: list[asyncio.Future[None]] = []  # woken when a slot's clock starts

        async def one(i: int, call: Call, packed: Any) -> Any:
            backend, script, keys, args = call
            slots[i].began = time.monotonic()  # (not later: a backlog is the server's own)
            earlier = [task for task in backend.parked_calls() if not task.done()]
            if earlier:  # this server's late replies first: its calls run in order
                await asyncio.wait(earlier, timeout=timeout)
            slot = slots[i]
            if backend.cold():  # connecting has its own timeout: the clock starts after it
                slot.connecting = True
                try:
                    await backend.warm()
                finally:
                    slot.connecting = False
                    slot.clock = time.monotonic()
                    for future in connected:
                        if not future.done():
                            future.set_result(None)
            slot.pending = await backend.send(script, keys, args, packed)
            while slot.behind:  # followed while it was being sent
                await backend.follow(slot.pending, *slot.behind.pop(0))
            # Bounded by the connection's own read timeout (what ``with_deadline`` gave it:
            # ``SLACK`` more than the round's), not a timer of its own: a timer task per read
            # costs about as much as the read.
            return await backend.receive(slot.pending, None)

        tasks = {
            asyncio.ensure_future(one(i, call, packed)): i
            for i, (call, packed) in enumerate(zip(calls, pack_all(calls), strict=True))
        }
        waiting = set(tasks)
        grace: float | None = None  # the deadline after the process itself overslept
        try:
            while waiting and not (enough is not None and enough(results)):
                # Past the deadline, one more look: replies already in still count.
                until = _until(started, timeout, [slots[tasks[task]] for task in waiting])
                if until is not None and grace is not None:
                    until = max(until, grace)
                if until is None:  # a connection being opened: woken when it is (or fails)
                    connected[:] = [asyncio.get_running_loop().create_future()]
                    await asyncio.wait(
                        waiting | set(connected), return_when=asyncio.FIRST_COMPLETED
                    )
                    connected.clear()
                    continue
                left = max(until - time.monotonic(), 0.0)
                done, waiting = await asyncio.wait(
                    waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    if any(slots[tasks[task]].connecting for task in waiting):
                        continue  # (it started connecting meanwhile)
                    now = time.monotonic()
                    later = _until(started, timeout, [slots[tasks[task]] for task in waiting])
                    if later is not None and later > now:
                        continue  # began after the deadline was set: theirs runs from then
                    if grace is None and now - until > timeout * OVERSLEPT:
                        # The loop woke far past the deadline: this process was paused (a
                        # stall, a long callback), perhaps before its commands were even
                        # sent, and asyncio runs a due timer before the reads it made
                        # possible. The servers get one more deadline, once per round.
                        grace = now + timeout
                        continue
                    break
                for task in done:
                    failure = task.exception()
                    i = tasks[task]
                    if failure is None:
                        results[i] = task.result()
                        calls[i][0].timely(True)
                    else:
                        results[i] = failure
        except BaseException:  # cancelled: no late collection
            for task in waiting:
                task.cancel()
            raise
        for task in waiting:  # late: each task goes on (sending, then reading within LATE)
            i = tasks[task]
            backend = calls[i][0]
            results[i] = late(backend, None, started, task, slots[i])
            backend.timely(False)
            _BACKGROUND.add(task)
            backend.parked_calls().append(task)
            task.add_done_callback(functools.partial(_forget, backend))
        if not hold:
            await AsyncFanOut.release(results)
        return results

    @staticmethod
    async def release(results: Sequence[Any]) -> None:
        """The late calls among ``results`` are done with (their tasks read their replies)."""
        for result in results:
            if isinstance(result, Late):
                result.forget()

    @staticmethod
    async def arrived(late: Late) -> Any:
        """The late call's reply (or the exception raised in its place) if it has come
        meanwhile, else :data:`NOT_YET`. Once it came, :meth:`follow` would send nothing."""
        task = late.task
        if task is None or not task.done() or task.cancelled():
            return NOT_YET
        failure = task.exception()
        return task.result() if failure is None else failure

    @staticmethod
    async def follow(
        late: Late, script: Script, keys: Sequence[bytes], args: Sequence[Any]
    ) -> bool:
        """Send ``script`` behind the late call, to run right after it on its server.

        False (nothing sent) when its reply came meanwhile: the late call has run, and
        ``script`` must be sent the ordinary way if it is still needed.
        """
        slot = late.slot
        if slot is None:
            return False
        if slot.pending is None:
            if late.task.done():  # it failed before sending: nothing to follow
                return False
            slot.behind.append((script, keys, args))  # sent as soon as the call is
            return True
        try:
            sent: bool = await late.backend.follow(slot.pending, script, keys, args)
        except Exception:
            return False
        return sent

    @staticmethod
    async def gather(fn: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R | Exception]:
        """``fn(item)`` for every item at once: each result, or the exception it raised."""

        async def one(item: T) -> R | Exception:
            try:
                return await fn(item)
            except Exception as exc:
                return exc

        return list(await asyncio.gather(*(one(item) for item in items)))


def _until(started: float, timeout: float, slots: list[_Slot]) -> float | None:
    """When the round's calls in ``slots`` are all late: each has ``timeout`` from when its
    task began or its connection was opened, whichever is later, else from the start (None:
    one is being opened)."""
    until = started
    for slot in slots:
        if slot.connecting:
            return None
        for clock in (slot.clock, _began(slot)):
            if clock is not None and clock > until:
                until = clock
    return until + timeout


def _began(slot: _Slot) -> float | None:
    """When the task of ``slot`` began (None: not yet). A call whose task
    began late, after the process stalled between the round's start and its tasks, has its
    whole deadline from then: the servers are not blamed for the stall. (A server's own
    backlog, its earlier calls read first, still counts against it.)"""
    return slot.began


def _forget(backend: Any, task: Any) -> None:
    _BACKGROUND.discard(task)
    with contextlib.suppress(ValueError):
        backend.parked_calls().remove(task)
    if not task.cancelled():
        task.exception()  # retrieved: a late server's error is no news
