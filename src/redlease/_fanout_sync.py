"""The sync fan-out: no threads. The command is written to every server first
(``backend.send``), then the replies are read as they arrive (``poll`` over the sockets), all
within ``timeout`` of sending. One round trip, like the asyncio form; a hung server costs the
deadline once. See ``_fanout.py`` for what both forms promise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ._core.scripts import Script
from ._fanout_poll import Poller, fileno, ready
from ._fanout_results import (
    LATE,
    NOT_YET,
    Call,
    Enough,
    Late,
    Unsent,
    caught,
    late,
    pack_all,
)
from ._fanout_servers import collect, hung, probe, take_parked

__all__ = ["FanOut"]

T = TypeVar("T")
R = TypeVar("R")


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
            collect(backend)
        started = time.monotonic()
        results: list[Any] = [None] * len(calls)
        packs = pack_all(calls)
        # A hung server with no connection open would make the round wait its handshake
        # before the next one is even sent (no threads: one at a time): it is connected
        # last, and only if the others did not give ``enough``, one at a time within one
        # more deadline at most (however many hang, they cost the round one deadline; one
        # that answers again is heard even when the others used up the round's). Else it
        # is probed now and then, off the caller's path (see probe).
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
                    probe(backend)
        except BaseException:  # interrupted: close the connections not read yet
            for _, other, unread in sent.values():
                other.abandon(unread)
            raise
        for i, backend, pending in sent.values():  # late: the next fan-out collects them
            results[i] = late(backend, pending, started)
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
                earlier = take_parked(backend)
                if earlier is None:
                    pending = backend.send(script, keys, args, packed)
                else:  # behind this server's late call: its calls run in order
                    pending = backend.behind(earlier, script, keys, args, packed)
            except Exception as exc:
                results[i] = caught(exc)
                continue
            sent[fileno(pending)] = (i, backend, pending)
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
        poller = Poller(list(sent))
        while sent and not (enough is not None and enough(results)):
            # Past the deadline, one more look: replies already in still count.
            found = poller.ready(max(until - time.monotonic(), 0.0))
            if not found:
                break
            for fd in found:
                i, backend, pending = sent.pop(fd)
                poller.done(fd)
                try:
                    results[i] = backend.receive(pending, timeout)
                    backend.timely(True)
                except Exception as exc:
                    results[i] = caught(exc)

    @staticmethod
    def release(results: Sequence[Any]) -> None:
        """Hand the late calls among ``results`` to the next fan-outs on their servers."""
        for result in results:
            if isinstance(result, Late):
                if result.pending is not None:
                    result.backend.parked_calls().append(result.pending)
                result.forget()

    @staticmethod
    def arrived(late: Late) -> Any:
        """The late call's reply (or the exception raised in its place) if it has come
        meanwhile (read now: its connection goes back to use), else :data:`NOT_YET`."""
        pending = late.pending
        if pending is None:
            return NOT_YET
        fd = fileno(pending)
        if fd >= 0 and not ready([fd], 0):
            return NOT_YET
        late.pending = None  # read here, not handed on
        try:
            return late.backend.receive(pending, LATE)
        except Exception as exc:
            return caught(exc)

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
                results[k] = caught(exc)

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
