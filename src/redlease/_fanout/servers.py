"""One server as the fan-outs see it: whether it answers (health, probes), and the late calls
parked on it (sync: read, or given up on, by the next round on that server).

A late call's connection stays open, with the call *parked* on its backend
(``backend.parked_calls()``) until its reply is read: asyncio parks the task still reading it;
sync parks the call itself, and the next round on that server first collects whatever has
arrived (:func:`collect`) and sends behind a call still on its way (:func:`take_parked`), so
that one server runs a process's calls in order.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from .poll import fileno, ready
from .results import LATE

__all__ = ["CHAIN", "collect", "hung", "probe", "take_parked"]

CHAIN = 4
"""The most unread calls queued on one connection to a late server; past that, the server is
given up on that connection (closed) and the next call goes on a fresh one."""


def hung(backend: Any) -> bool:
    """A call on ``backend`` would first open a connection to a server that did not answer
    when last asked (:meth:`~redlease._async.one_server.AsyncBackend.hung`: down, or late and
    its connection given up on since), whose handshake may take a whole deadline. (A late
    server with a connection open is asked in turn, as any: a loaded machine is late. Left
    out, its queues and locks go stale, and its silence costs the waiters their wake-ups.)"""
    return not backend.idle() and backend.hung()


def probe(backend: Any) -> None:
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


def take_parked(backend: Any) -> Any:
    """sync: a call of ``backend`` whose reply is still on its way (taken), or None."""
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


def collect(backend: Any) -> None:
    """sync: read the late replies that have arrived on ``backend`` (their connections go
    back to use); close those older than :data:`LATE`, or with no room behind them
    (:data:`CHAIN`), so that the round knows which servers it would connect to anew (what
    was sent there still runs). Each parked call is taken with ``pop``, so two threads never
    read one connection."""
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
        fd = fileno(pending)
        if fd < 0 or ready([fd], 0):
            with contextlib.suppress(Exception):  # a late server's error is no news
                backend.receive(pending, 0.1)
        elif now - pending.sent_at > LATE or _full(pending):
            backend.abandon(pending)
        else:
            keep.append(pending)
    parked.extend(keep)
