"""Waiting on a rate limit: reservations, the retry-with-jitter path, shadow mode.

``RateLimiter.acquire`` waits until a hit passes and counts it. With one ``"gcra"`` or
``"token_bucket"`` limit a waiter *reserves* its instant in one script
(``ratelimit_reserve_*.lua``): the limit's state moves on by the waiter's cost at once, the
reply says how long to sleep, and the waiter sleeps that long, sending nothing, then passes.
Reservations are served in the order they were made (each starts where the last ended), so
N waiters never wake together and collide. A waiter that gives up while it sleeps
(cancelled, interrupted) gives its reservation back (``ratelimit_unreserve.lua``), but only
while nothing was counted on top of it: a later waiter's instant cannot move.

With several limits, or ``"fixed"`` / ``"sliding"``, a waiter hits, and when refused sleeps
``retry_after`` plus up to :data:`JITTER` of it, then hits again: waiters that wake in the
same instant are spread, but one may lose its turn to another (less exact, more commands).
Reserving under several limits is not done: a token bucket capped at its burst cannot carry
a debt in one limit without over-admitting in another, and a give-back would have to find
every limit untouched.

``mode="shadow"``: hits that would be refused pass, and are logged and counted instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .ratelimit import Algorithm, RateLimit
from .rates import Rate
from .scripts import Script, load

__all__ = [
    "JITTER",
    "MIN_PAUSE",
    "MODES",
    "RESERVE_GCRA",
    "RESERVE_TOKEN_BUCKET",
    "SCRIPTS",
    "UNRESERVE",
    "Mode",
    "Reservation",
    "admitted",
    "decode_reservation",
    "mode",
    "pause",
    "reserve_args",
    "reserve_script",
    "reserves",
    "shadowed",
    "subject",
    "unreserve_args",
]

Mode = Literal["enforce", "shadow"]
MODES: tuple[Mode, ...] = ("enforce", "shadow")

JITTER = 0.2
"""The retry path sleeps ``retry_after * (1 + U(0, JITTER))``: waiters refused together wake
apart."""
MIN_PAUSE = 0.001
"""Seconds: the least a retry sleeps (a ``retry_after`` of 0 must not spin)."""


def mode(value: Any, arg: str = "mode") -> Mode:
    """``"enforce"`` (refuse what the limits refuse) or ``"shadow"`` (refuse nothing)."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be 'enforce' or 'shadow', got {type(value).__name__}")
    for known in MODES:
        if value == known:
            return known
    raise ValueError(f"{arg} must be 'enforce' or 'shadow', got {value!r}")


def shadowed(result: RateLimit) -> RateLimit:
    """A refusal let through by shadow mode: allowed, ``shadowed``, each limit's own answer
    kept in ``limits`` (the refusing ones still say ``allowed=False``)."""
    return replace(result, allowed=True, retry_after=0.0, shadowed=True)


# -- reservations ---------------------------------------------------------------------------
def reserves(algo: Algorithm, rates: Sequence[Rate]) -> bool:
    """Whether ``acquire`` reserves: one limit, ``"gcra"`` or ``"token_bucket"``."""
    return len(rates) == 1 and algo in ("gcra", "token_bucket")


def reserve_script(algo: Algorithm) -> Script:
    """The reserving script of ``algo`` (see :func:`reserves`)."""
    return RESERVE_GCRA if algo == "gcra" else RESERVE_TOKEN_BUCKET


def reserve_args(*, cost: int, rate: Rate, burst: int, bound: float | None) -> list[Any]:
    """ratelimit_reserve_*.lua: reserve ``cost`` units of ``rate`` (a bucket of ``burst``)
    for a waiter that may sleep at most ``bound`` seconds (``None``: no bound)."""
    bound_us = -1 if bound is None else int(bound * 1e6)
    return [cost, rate.amount, round(rate.window * 1000), burst, bound_us]


def unreserve_args(*, stamp: bytes, cost: int, rate: Rate, burst: int) -> list[Any]:
    """ratelimit_unreserve.lua: give back the reservation that wrote ``stamp``."""
    return [stamp, cost, rate.amount, round(rate.window * 1000), burst]


@dataclass(frozen=True)
class Reservation:
    """A reserving script's reply: ``reserved`` or not, the ``wait`` (seconds) until the
    waiter's instant (or that it would have had), the ``stamp`` that gives it back, and the
    ``remaining`` units and ``reset_after`` seconds as of that instant."""

    reserved: bool
    wait: float
    stamp: bytes
    remaining: int
    reset_after: float


def decode_reservation(raw: Any) -> Reservation:
    """``{now, reserved, wait us, stamp, remaining, reset_after us}`` -> Reservation."""
    try:
        _, reserved, wait_us, stamp, remaining, reset_us = raw
        stamp = stamp.encode() if isinstance(stamp, str) else bytes(stamp)
        got = Reservation(
            bool(int(reserved)),
            max(int(wait_us), 0) / 1e6,
            stamp,
            max(int(remaining), 0),
            max(int(reset_us), 0) / 1e6,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from a rate limit script: {raw!r}") from exc
    if got.reserved and not got.stamp:
        raise ValueError(f"unexpected reply from a rate limit script: {raw!r}")
    return got


def admitted(got: Reservation, rate: Rate) -> RateLimit:
    """The answer ``acquire`` returns once the waiter's instant came."""
    one = RateLimit(True, got.remaining, 0.0, got.reset_after, rate.amount, rate.window)
    return replace(one, limits=(one,))


# -- the retry path -------------------------------------------------------------------------
def pause(retry_after: float, left: float | None, draw: float) -> float | None:
    """How long a refused waiter sleeps before it hits again: ``retry_after`` stretched by
    ``draw * JITTER`` (``draw`` in [0, 1)), at most the ``left`` seconds of its timeout;
    ``None`` when even ``retry_after`` is past the timeout (it cannot pass in time)."""
    if left is not None and retry_after > left:
        return None
    slept = max(retry_after * (1 + draw * JITTER), MIN_PAUSE)
    return slept if left is None else min(slept, max(left, 0.0))


# -- throttle -------------------------------------------------------------------------------
Key = str | bytes | Callable[..., str | bytes]


def subject(key: Key, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | bytes:
    """A throttled call's subject: ``key`` itself, or ``key(*args, **kwargs)``."""
    if isinstance(key, (str, bytes)):
        return key
    return key(*args, **kwargs)


_LIB = ("common_lib",)
RESERVE_GCRA = load("ratelimit_reserve_gcra", prelude=_LIB)
RESERVE_TOKEN_BUCKET = load("ratelimit_reserve_token_bucket", prelude=_LIB)
UNRESERVE = load("ratelimit_unreserve", prelude=_LIB)
SCRIPTS: tuple[Script, ...] = (RESERVE_GCRA, RESERVE_TOKEN_BUCKET, UNRESERVE)
