"""Run one script on N servers at once, each reply bounded by one shared deadline.

The sync and asyncio forms are different algorithms, so both are written here side by side
(``AsyncFanOut`` is what ``_async/`` uses; unasync renames it to ``FanOut`` for ``_sync/``):

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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import select
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from redis.exceptions import TimeoutError

from ._core.kept import forget_frames
from ._core.scripts import Script

__all__ = ["LATE", "NOT_YET", "AsyncFanOut", "Call", "FanOut", "Late", "Unsent", "hung"]

Call = tuple[Any, Script, Sequence[bytes], Sequence[Any]]
"""One server's part: (backend, script, keys, args)."""

T = TypeVar("T")
R = TypeVar("R")

LATE = 2.0
"""Seconds after sending that a late reply is still collected; then its connection is closed
(whatever was sent behind it still runs: the server has it)."""

OVERSLEPT = 0.5
"""asyncio: a round's timer that fires this many deadlines late means the process was paused;
its servers then get one more deadline (once per round)."""

Enough = Callable[[list[Any]], bool]
"""Asked with the results so far (``None``: not read yet): may the fan-out return now?"""

NOT_YET: Any = object()
"""What :meth:`AsyncFanOut.arrived` returns for a late reply that has not come yet."""

_BACKGROUND: set[Any] = set()  # asyncio: the tasks still reading late replies (kept alive)


class Late(TimeoutError):
    """A reply not read when the fan-out returned: its server was slower than the deadline,
    or than enough others. Counts as a vote not cast; the call may still run (or have run)
    on the server."""

    def __init__(
        self, message: str, backend: Any, pending: Any, task: Any = None, slot: Any = None
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.pending = pending
        self.task = task
        self.slot = slot  # asyncio: the call's _Slot (its Pending once sent)

    def forget(self) -> None:
        """Drop the references to the call (an error kept for a report keeps no connection
        alive); :meth:`AsyncFanOut.follow` cannot be used afterwards."""
        self.backend = self.pending = self.task = self.slot = None


class Unsent(Late):
    """A call never sent: its server was :func:`hung` and the call was not needed (sync: the
    others answered enough, or the deadline passed, before it would have been connected; a
    Redlock leaving the queues of such a server): a vote not cast, and nothing ran there
    (nothing to undo or follow)."""

    def __init__(self, backend: Any) -> None:
        super().__init__("not sent: known not to answer, and not needed in time", backend, None)


def hung(backend: Any) -> bool:
    """A call on ``backend`` would first open a connection to a server that did not answer
    when last asked (:meth:`~redlease._async.client.AsyncBackend.hung`: down, or late and
    its connection given up on since), whose handshake may take a whole deadline. (A late
    server with a connection open is asked in turn, as any: a loaded machine is late. Left
    out, its queues and locks go stale, and its silence costs the waiters their wake-ups.)"""
    return not backend.idle() and backend.hung()


class _Slot:
    """asyncio: one server's call in a fan-out: its Pending once sent, and the scripts to
    send behind it as soon as it is (``follow`` before the send was done)."""

    def __init__(self) -> None:
        self.pending: Any = None
        self.behind: list[tuple[Script, Sequence[bytes], Sequence[Any]]] = []
        self.clock: float | None = None  # when its connection was opened (not billed)
        self.began: float | None = None  # when its task began (to send it)
        self.connecting = False


def _packs(calls: Sequence[Call]) -> list[Any]:
    """Each call's command packed, once per distinct (script, keys, args)."""
    cache: dict[tuple[int, int, int], Any] = {}
    out = []
    for backend, script, keys, args in calls:
        key = (id(script), id(keys), id(args))
        packed = cache.get(key)
        if packed is None:
            packed = cache[key] = backend.pack(script, keys, args)
        out.append(packed)
    return out


def _late(backend: Any, pending: Any, started: float, task: Any = None, slot: Any = None) -> Late:
    waited = time.monotonic() - started
    return Late(f"no reply yet after {waited * 1000:.1f} ms", backend, pending, task, slot)


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
            for i, (call, packed) in enumerate(zip(calls, _packs(calls), strict=True))
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
            results[i] = _late(backend, None, started, task, slots[i])
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
        for late in results:
            if isinstance(late, Late):
                late.forget()

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


class FanOut:
    """Scripts on N servers at once, without threads: write everything, then read."""

    SLACK = 0.0
    """None: the sync fan-out reads only what has arrived, each read with its own timeout,
    and connects in turn, so a longer connection timeout would only slow a round where a
    server hangs."""

    @staticmethod
    def run(
        calls: Sequence[Call], timeout: float, enough: Enough | None = None, *, hold: bool = False
    ) -> list[Any]:
        """Each call's reply, the exception it raised, or :class:`Late`, in order; within
        ``timeout``, or as soon as ``enough(results)``. ``hold``: the caller may
        :meth:`follow` the late calls, then hands them on with :meth:`release` (until
        then no other fan-out can read their connections)."""
        for backend in {id(call[0]): call[0] for call in calls}.values():
            _collect(backend)
        started = time.monotonic()
        results: list[Any] = [None] * len(calls)
        packs = _packs(calls)
        # A hung server with no connection open would make the round wait its handshake
        # before the next one is even sent (no threads: one at a time): it is connected
        # last, and only if the others did not give ``enough``, one at a time within one
        # more deadline at most (however many hang, they cost the round one deadline; one
        # that answers again is heard even when the others used up the round's). Else it
        # is probed now and then, off the caller's path (see _probe).
        first: list[int] = []
        last: list[int] = []
        for i, call in enumerate(calls):  # (asked once: another thread may change it)
            (last if hung(call[0]) else first).append(i)
        if len(first) < len(calls) or not all(calls[i][0].idle() for i in first):
            # Servers with a connection open first: opening one (its own timeout) delays the
            # rest.
            first.sort(key=lambda i: not calls[i][0].idle())
        sent: dict[int, tuple[int, Any, Any]] = {}  # socket fd -> (index, backend, pending)
        try:
            until = FanOut._send(calls, packs, first, results, sent, started + timeout, timeout)
            FanOut._read(sent, results, until, timeout, enough)
            needed_by: float | None = None  # the hung ones' deadline, once they are needed
            for i in last:
                backend = calls[i][0]
                if enough is None or not enough(results):
                    if needed_by is None:  # one deadline for them all, at least
                        needed_by = max(until, time.monotonic() + timeout)
                    if time.monotonic() < needed_by:
                        needed_by = FanOut._send(
                            calls, packs, [i], results, sent, needed_by, timeout
                        )
                        FanOut._read(sent, results, needed_by, timeout, enough)
                        continue
                results[i] = Unsent(backend)  # not needed, or no time left: never sent
                if backend.probe():
                    _probe(backend)
        except BaseException:  # interrupted: close the connections not read yet
            for _, other, unread in sent.values():
                other.abandon(unread)
            raise
        for i, backend, pending in sent.values():  # late: the next fan-out collects them
            results[i] = _late(backend, pending, started)
            backend.timely(False)
        if not hold:
            FanOut.release(results)
        return results

    @staticmethod
    def _send(
        calls: Sequence[Call],
        packs: list[Any],
        indices: list[int],
        results: list[Any],
        sent: dict[int, tuple[int, Any, Any]],
        until: float,
        timeout: float,
    ) -> float:
        """Send the calls at ``indices`` (each behind its server's late call, if any); the
        round's new deadline: ``timeout`` after the last send (a connect may have been slow),
        or ``until`` if nothing was sent."""
        last_sent = None
        for i in indices:
            (backend, script, keys, args), packed = calls[i], packs[i]
            try:
                earlier = _earlier(backend)
                if earlier is None:
                    pending = backend.send(script, keys, args, packed)
                else:  # behind this server's late call: its calls run in order
                    pending = backend.behind(earlier, script, keys, args, packed)
            except Exception as exc:
                results[i] = _caught(exc)
                continue
            sent[_fileno(pending)] = (i, backend, pending)
            last_sent = pending.sent_at
        return until if last_sent is None else max(until - timeout, last_sent) + timeout

    @staticmethod
    def _read(
        sent: dict[int, tuple[int, Any, Any]],
        results: list[Any],
        until: float,
        timeout: float,
        enough: Enough | None,
    ) -> None:
        """Read the replies of ``sent`` as they arrive, until ``until`` or ``enough``; what
        is read leaves ``sent``."""
        poller = _Poller(list(sent))
        while sent and not (enough is not None and enough(results)):
            # Past the deadline, one more look: replies already in still count.
            ready = poller.ready(max(until - time.monotonic(), 0.0))
            if not ready:
                break
            for fd in ready:
                i, backend, pending = sent.pop(fd)
                poller.done(fd)
                try:
                    results[i] = backend.receive(pending, timeout)
                    backend.timely(True)
                except Exception as exc:
                    results[i] = _caught(exc)

    @staticmethod
    def release(results: Sequence[Any]) -> None:
        """Hand the late calls among ``results`` to the next fan-outs on their servers."""
        for late in results:
            if isinstance(late, Late):
                if late.pending is not None:
                    late.backend.parked_calls().append(late.pending)
                late.forget()

    @staticmethod
    def arrived(late: Late) -> Any:
        """The late call's reply (or the exception raised in its place) if it has come
        meanwhile (read now: its connection goes back to use), else :data:`NOT_YET`."""
        pending = late.pending
        if pending is None:
            return NOT_YET
        fd = _fileno(pending)
        if fd >= 0 and not _ready([fd], 0):
            return NOT_YET
        late.pending = None  # read here, not handed on
        try:
            return late.backend.receive(pending, LATE)
        except Exception as exc:
            return _caught(exc)

    @staticmethod
    def follow(late: Late, script: Script, keys: Sequence[bytes], args: Sequence[Any]) -> bool:
        """Send ``script`` behind the late call, to run right after it on its server.

        False (nothing sent) when its reply came meanwhile: the late call has run, and
        ``script`` must be sent the ordinary way if it is still needed.
        """
        try:
            sent: bool = late.backend.follow(late.pending, script, keys, args)
        except Exception:
            return False
        return sent

    @staticmethod
    def gather(fn: Callable[[T], R], items: Sequence[T]) -> list[R | Exception]:
        """``fn(item)`` for every item at once: each result, or the exception it raised.

        Each but the first runs in a daemon thread of its own: ``fn`` is a cold path (a
        first contact with each server) whose connect may take its timeout, and one
        server's must not hold up the others' (as asyncio's does not). Every ``fn`` call
        must be bounded by its own timeouts: all are waited for."""
        results: list[R | Exception] = [RuntimeError("not run")] * len(items)

        def one(k: int) -> None:
            try:
                results[k] = fn(items[k])
            except Exception as exc:
                results[k] = _caught(exc)

        threads = [
            threading.Thread(target=one, args=(k,), name="redlease-connect", daemon=True)
            for k in range(1, len(items))
        ]
        for thread in threads:
            thread.start()
        if items:
            one(0)
        for thread in threads:
            thread.join()
        return results


def _caught(exc: Exception) -> Exception:
    """A server's error, as its call's result (sync): without its traceback, whose frames
    reach the round's and its caller's (the handle, the watchdog's holdings), and which a
    frame keeping the results would hold in a cycle, for the collector to find some day."""
    forget_frames(exc)
    return exc


def _fileno(pending: Any) -> int:
    sock = pending.conn._sock
    if sock is None:  # pragma: no cover - just sent on it
        return -id(pending)
    return int(sock.fileno())


def _ready(fds: list[int], timeout: float) -> list[int]:
    """The sockets among ``fds`` with something to read within ``timeout`` seconds (a
    negative fd, a closed connection, is ready: its read fails at once)."""
    closed = [fd for fd in fds if fd < 0]
    if closed:
        return closed
    if hasattr(select, "poll"):
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return [fd for fd, _ in poller.poll(timeout * 1000)]
    readable, _, _ = select.select(fds, [], [], timeout)  # pragma: no cover - no poll
    return list(readable)


class _Poller:
    """The sockets of one round's calls, polled until each is read (one ``poll`` object for
    the round, not one per look)."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds
        self._poll: Any = None
        if hasattr(select, "poll") and all(fd >= 0 for fd in fds):
            self._poll = select.poll()
            for fd in fds:
                self._poll.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)

    def ready(self, timeout: float) -> list[int]:
        """The sockets with something to read within ``timeout`` seconds."""
        if self._poll is None:
            return _ready(self._fds, timeout)
        return [fd for fd, _ in self._poll.poll(timeout * 1000)]

    def done(self, fd: int) -> None:
        """``fd`` was read: not polled again."""
        if self._poll is None:
            self._fds.remove(fd)
        else:
            self._poll.unregister(fd)


CHAIN = 4
"""The most unread calls queued on one connection to a late server; past that, the server is
given up on that connection (closed) and the next call goes on a fresh one."""


def _probe(backend: Any) -> None:
    """sync: ask a :func:`hung` server whether it answers again, in a daemon thread that ends
    within its connect timeout: open a connection (its handshake bounded by the deadline)
    and keep it, so that the next round sends to it as to any (then a reply in time makes
    it answer again); or fail, and it stays down until the next probe. The caller never
    waits for it."""
    threading.Thread(target=_try_warm, args=(backend,), name="redlease-probe", daemon=True).start()


def _try_warm(backend: Any) -> None:
    with contextlib.suppress(Exception):  # (logged once by the backend: it is down)
        backend.warm()


def _full(pending: Any) -> bool:
    """Whether no more calls may queue behind ``pending`` (see :data:`CHAIN`)."""
    return bool(pending.before + pending.owed + 1 >= CHAIN)


def _earlier(backend: Any) -> Any:
    """A call of ``backend`` whose reply is still on its way (taken), or None."""
    parked = backend.parked_calls()
    if not parked:  # the usual case: no exception raised to find out
        return None
    try:
        pending = parked.pop()
    except IndexError:  # another thread took the last one
        return None
    if _full(pending):
        backend.abandon(pending)
        return None
    return pending


def _collect(backend: Any) -> None:
    """Read the late replies that have arrived on ``backend`` (their connections go back to
    use); close those older than :data:`LATE`, or with no room behind them (:data:`CHAIN`),
    so that the round knows which servers it would connect to anew (what was sent there
    still runs). Each parked call is taken with ``pop``, so two threads never read one
    connection."""
    parked: list[Any] = backend.parked_calls()
    if not parked:
        return
    keep = []
    now = time.monotonic()
    while parked:
        try:
            pending = parked.pop()
        except IndexError:  # another thread took the last one
            break
        fd = _fileno(pending)
        if fd < 0 or _ready([fd], 0):
            with contextlib.suppress(Exception):  # a late server's error is no news
                backend.receive(pending, 0.1)
        elif now - pending.sent_at > LATE or _full(pending):
            backend.abandon(pending)
        else:
            keep.append(pending)
    parked.extend(keep)
