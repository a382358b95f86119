"""Run one script on N servers at once, each reply bounded by one shared deadline.

The sync and asyncio forms are different algorithms, so both are written by hand and both are
imported from here (``AsyncFanOut`` is what ``_async/`` uses; unasync renames it to ``FanOut``
for ``_sync/``):

* asyncio: one task per server sends the command and reads its reply;
* sync: no threads. The command is written to every server first (``backend.send``), then the
  replies are read as they arrive (``poll`` over the sockets), all within ``timeout`` of
  sending. One round trip, like the asyncio form; a hung server costs the deadline once.

The command is packed once for all servers that get the same script, keys and args.

Opening a connection is not billed to the deadline: it has its own timeout (the backend's
connect timeout, handshake included), and a call's clock starts once it is sent (sync:
servers with a connection open are sent to first; asyncio: a stall of the process before
its tasks sent counts against nobody), unless the server is known to be down or its last
reply was late (then the hung servers cost a round its deadline once, however many hang,
not a connect timeout each), so a fresh Redlock's first round does not spend its deadline
connecting.

A process that was itself paused past the deadline (asyncio: its timer fired more than half
a deadline late) does not blame the servers for it: their replies get one more deadline, once
per round (sync: ``poll`` looks at the sockets once more when it wakes up, so what arrived
during the pause is read anyway).

A caller may stop early: ``enough(results)`` is asked after each reply (e.g. "a majority
granted", or "a majority can no longer grant"). The replies not read by then, or not by the
deadline, come back as :class:`Late` (a ``TimeoutError``: a vote not cast). Their connections
stay open: the reply is collected later, off the caller's path (asyncio: by its task, which
keeps reading; sync: by the next fan-out on that server, which first collects whatever has
arrived, or by :meth:`FanOut.arrived`), for at most :data:`LATE` seconds after sending
(asyncio: the connection's read timeout, which ``with_deadline`` sets that much past the
round's deadline), and a script can still be sent behind it with
:meth:`AsyncFanOut.follow`: the server runs it right after the late one, however late that
is (how a late grant is undone: it can never be left held).

Both talk to Redis only through the backends (see ``_async/client.py``). A server that fails
yields its exception in place of its reply; nothing is raised for it.

Here: the asyncio form. ``_fanout_sync.py``: the sync form; ``_fanout_results.py``: a round's
calls and its results (``Late``, ``Unsent``); ``_fanout_servers.py``: a server's health as the
rounds use it, and the late calls parked on it; ``_fanout_poll.py``: sync socket readiness.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ._core.scripts import Script
from ._fanout_results import LATE, NOT_YET, Call, Enough, Late, Unsent, late, pack_all
from ._fanout_servers import hung
from ._fanout_sync import FanOut

__all__ = ["LATE", "NOT_YET", "AsyncFanOut", "Call", "FanOut", "Late", "Unsent", "hung"]

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
