"""Once: at most one run per period for a name, on the server's clock (the pure part).

Two keys per name, which never expire: a hash that keeps the last run, and the fencing
counter, raised by every run (``next_fence`` in ``common_lib.lua``, as every other fence)::

    <prefix>:{<name>}:once:run   HASH  state    running | done | failed | released
                                       token    the run's random token (its owner)
                                       fence    the last run's fencing token
                                       start    when it started (server ms)
                                       end      when it ended (server ms; absent while running)
                                       until    when the name is free again (server ms):
                                                running: its lease end (renewed);
                                                done: start + every; failed, released:
                                                its end (released: by force_release)
                                       every    the period of that run (ms)
                                       host, pid  who ran it
    <prefix>:{<name>}:once:fence STRING  the fencing counter (never reset)

A run starts when ``until`` is past (``once_start.lua``): none is in progress (a holder that
died stops renewing, so ``until`` passes within its lease) and none succeeded within its
period. ``once_finish.lua`` marks it done (the name stays taken until start + every),
``once_fail.lua`` failed (free at once), ``once_renew.lua`` is the watchdog's batch.
``once_force_release.lua`` is an operator's break-glass: it marks the run that keeps the name
(in progress, or a success within its period) released, free at once, and moves the fence on.
The kind (``once``) comes first after ``}:``, so a Once never reads another primitive's keys.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ForeignData
from . import duration, holder, keys, validate
from .breakglass import ForceReleased
from .scripts import load

__all__ = [
    "BUSY",
    "DONE_RECENTLY",
    "FAIL",
    "FINISH",
    "FORCE_RELEASE",
    "FOREIGN",
    "INSPECT",
    "MAX_EVERY",
    "RENEW",
    "START",
    "STARTED",
    "OnceInfo",
    "OnceKeys",
    "OnceReleased",
    "Start",
    "decode_finish",
    "decode_force_release",
    "decode_inspect",
    "decode_start",
    "every_ms",
    "lease_ms",
]

_LIB = ("common_lib", "once_lib")
START = load("once_start", prelude=_LIB)
FINISH = load("once_finish", prelude=_LIB)
FAIL = load("once_fail", prelude=_LIB)
RENEW = load("once_renew", prelude=_LIB)
INSPECT = load("once_inspect", prelude=_LIB)
FORCE_RELEASE = load("once_force_release", prelude=_LIB)

STARTED, BUSY, DONE_RECENTLY = 1, 0, 2
"""once_start.lua's statuses: started / a run is in progress / a run succeeded within its period."""
FOREIGN = -3
"""A script's status for a key holding data redlease did not write."""
MAX_EVERY = 400 * 86400.0
"""The longest period accepted (400 days: a yearly job with room to spare)."""


@dataclass(frozen=True)
class OnceKeys:
    """The keys of the Once ``name``: ``<prefix>:{<name>}:once:run`` and ``:once:fence``."""

    run: bytes
    fence: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> OnceKeys:
        """The keys of ``name`` (prefix and name validated, name encoded)."""
        return cls(*keys.tagged(prefix, name, "once:run", "once:fence"))

    def in_order(self) -> list[bytes]:
        """Both keys, as KEYS[1..2] of ``once_start.lua``."""
        return [getattr(self, field.name) for field in fields(self)]


def every_ms(value: Any, arg: str = "every") -> int:
    """A period (``0 < every <= MAX_EVERY``) in whole ms: seconds, a ``timedelta``, or a
    duration as the command line writes it (``"24h"``, ``"1h30m"``: ``_core/duration.py``)."""
    seconds = duration.seconds(value, arg)
    if math.isnan(seconds) or not 0 < seconds <= MAX_EVERY:
        raise ValueError(f"{arg} must be > 0 and at most 400 days, got {value!r}")
    return max(1, round(seconds * 1000))


def lease_ms(value: Any, arg: str = "ttl") -> int:
    """A run's lease in whole ms, as ``validate.lease_ms`` checks it, given as :func:`every_ms`
    takes a period (seconds, a ``timedelta`` or ``"30s"``)."""
    if not isinstance(value, (str, datetime.timedelta)):
        return validate.lease_ms(value, arg)
    seconds = duration.seconds(value, arg)
    try:
        return validate.lease_ms(seconds, arg)
    except ValueError as exc:  # its message shows the seconds: say what was written too
        raise ValueError(f"{exc} (from {value!r})") from None


@dataclass(frozen=True)
class Start:
    """once_start.lua's reply: ``status``; ``value`` the fence when started, else the ms until
    the name is free; ``now`` the server's time (ms)."""

    status: int
    value: int
    now: int


def _foreign(raw: Any, name: str | bytes, where: OnceKeys) -> None:
    if isinstance(raw, list) and len(raw) == 2 and raw[0] == FOREIGN:
        key = where.in_order()[int(raw[1]) - 1]
        raise ForeignData(
            f"key {key.decode(errors='replace')} of once {name!r} holds data redlease did "
            "not write",
            name=name,
            key=key,
        )


def decode_start(raw: Any, name: str | bytes, where: OnceKeys) -> Start:
    """Decode ``{status, value, now}``; ForeignData for ``{-3, i}`` (KEYS[i] is foreign)."""
    _foreign(raw, name, where)
    try:
        status, value, now = (int(x) for x in raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from once_start.lua: {raw!r}") from exc
    if status not in (STARTED, BUSY, DONE_RECENTLY):
        raise ValueError(f"unexpected status from once_start.lua: {raw!r}")
    return Start(status, value, now)


def decode_finish(raw: Any) -> tuple[bool, int]:
    """once_finish.lua's / once_fail.lua's ``{ok, now}``: recorded?, the server's time (ms)."""
    try:
        ok, now = (int(x) for x in raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from a once script: {raw!r}") from exc
    return ok == 1, now


@dataclass(frozen=True)
class OnceInfo:
    """The last run of a Once, read atomically (``Once.last()``).

    ``state``: ``"running"``, ``"done"``, ``"failed"``, ``"lost"`` (its holder stopped
    renewing before it finished: it died, or lost Redis for longer than its lease), or
    ``"released"`` (an operator freed it: ``Once.force_release``, ``redlease release --force``).
    ``started`` / ``ended``: server time (seconds since the epoch; ``ended`` is ``None`` while
    running or lost). ``fence``: its fencing token. ``host`` / ``pid``: who ran it.
    ``free_in``: seconds until a new run may start (0.0: it may now). ``every``: the period
    that run was started with (seconds). ``token``: the start of the run's token (never all of
    it), as ``Once.force_release`` takes it to name this run. ``held_by``: who runs it, as a
    lock's ``inspect().held_by`` says (``None`` unless ``state`` is ``"running"``).
    """

    name: str | bytes
    state: str
    started: float
    ended: float | None
    fence: int
    host: str
    pid: int
    free_in: float
    every: float
    token: str
    held_by: holder.HolderInfo | None = None


_FIELDS = ("state", "fence", "start", "end", "until", "every", "host", "pid", "token")
"""The hash fields once_inspect.lua returns after the server's time, in order."""


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def decode_inspect(raw: Any, name: str | bytes, where: OnceKeys) -> OnceInfo | None:
    """Decode ``{now, state, fence, start, end, until, every, host, pid, token}`` (``None``:
    never run)."""
    _foreign(raw, name, where)
    try:
        now, values = int(raw[0]), dict(zip(_FIELDS, raw[1:], strict=True))
        if values["state"] is None:
            return None
        state = _text(values["state"])
        until = int(values["until"])
        if state not in ("running", "done", "failed", "released"):
            raise ValueError(state)
        if state == "running" and until <= now:
            state = "lost"
        end = values["end"]
        return OnceInfo(
            name=name,
            state=state,
            started=int(values["start"]) / 1000,
            ended=None if end is None else int(end) / 1000,
            fence=int(values["fence"]),
            host=_text(values["host"]),
            pid=int(values["pid"]),
            free_in=max(until - now, 0) / 1000,
            every=int(values["every"]) / 1000,
            token=holder.shown(_text(values["token"])),
            held_by=holder.decode(_text(values["token"]), int(values["fence"]))
            if state == "running"
            else None,
        )
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise ValueError(f"unexpected reply from once_inspect.lua: {raw!r}") from exc


@dataclass(frozen=True)
class OnceReleased(ForceReleased):
    """What ``Once.force_release`` did: a :class:`~redlease.ForceReleased` (``removed``: the
    run released, empty when nothing kept the name; ``fence``: the counter now) and ``state``,
    what that run was: ``"running"`` (its holder was evicted: ``on_lost`` at its next
    renewal) or ``"done"`` (a success within its period, cleared); ``None`` when nothing was
    changed."""

    state: str | None


def decode_force_release(raw: Any, name: str | bytes, where: OnceKeys) -> OnceReleased:
    """Decode once_force_release.lua's ``{token, state, fence, counter}`` (``{-3, i}``:
    ForeignData); the removed run's ``since`` is its start, read from its fence."""
    _foreign(raw, name, where)
    try:
        token, state, fence, counter = raw
        removed = (holder.decode(token, int(fence)),) if token else ()
        return OnceReleased(name, removed, int(counter), _text(state) if token else None)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from once_force_release.lua: {raw!r}") from exc
