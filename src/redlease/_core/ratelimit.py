"""Rate limiter: algorithms, key layout, argument checks and reply decoding.

Two algorithms, both one Lua script per call and one key per subject:

``"fixed"`` (fixed window, the classic ``INCR`` + ``PEXPIRE``, made atomic):
    a counter per subject whose window of ``window`` seconds starts at the subject's first
    hit. Up to ``limit`` units pass per window. Refused hits do not count, so a client that
    keeps hammering is let in again as soon as the window ends. The cheapest, and what most
    APIs document, but up to ``2 * limit`` may pass within ``window`` across a window's end.

``"gcra"`` (generic cell rate algorithm: a leaky bucket kept as one timestamp):
    a subject may burst ``limit`` units, and then gets ``limit / window`` units per second,
    spread evenly: after a full burst the next unit passes ``window / limit`` seconds later,
    not at the end of a window. No boundary burst; ``retry_after`` is exact. Refused hits
    do not count either. Time is the server's ``TIME``, so clients with skewed clocks agree.

How they compare with the strategies the ``limits`` package documents: its *fixed window*
also starts at the first hit, but (in the versions read) increments before it compares, so
refused hits count too; its *moving window* keeps a timestamp per hit (exact "``limit`` in
any ``window``", memory ``O(limit)`` per subject); its *sliding window counter* weighs the
previous window's count (an approximation, two counters); its GCRA script is given the time
by the client. Ours keep one
small string per subject, take time from the server only, and never count refusals. Where the
moving window would be chosen for exactness, GCRA gives the same long-run rate with smoother
spacing in constant memory.

Keys, for prefix ``redlease``, limiter ``api`` and subject ``user:42``::

    redlease:ratelimit:api:fixed:{user:42}   STRING  units used in this window; PX = its end
    redlease:ratelimit:api:gcra:{user:42}    STRING  theoretical arrival time, server us;
                                                     PX = until it is in the past

The hash tag is the *subject*, not the limiter's name: each call touches one key, so a limiter
with a million subjects spreads over a Redis Cluster instead of loading one slot. The name may
not contain braces, so the first ``{`` of a key always starts the subject. The algorithm is in
the key, so switching algorithms never misreads the other's value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from . import validate
from .scripts import Script, load

__all__ = [
    "ALGORITHMS",
    "FIXED",
    "GCRA",
    "MAX_COUNT",
    "RESET",
    "SCRIPTS",
    "Algorithm",
    "RateLimit",
    "algorithm",
    "cost",
    "decode",
    "key",
    "limit",
    "limiter_name",
]

Algorithm = Literal["fixed", "gcra"]
ALGORITHMS: tuple[Algorithm, ...] = ("fixed", "gcra")

MAX_COUNT = 10**12
"""The largest ``limit`` (and ``cost``) accepted: Lua's numbers keep counts this large exact."""


@dataclass(frozen=True)
class RateLimit:
    """The answer of a rate limiter for one subject.

    ``allowed``: the hit passed (``hit``) or would pass (``peek``). ``remaining``: units that
    could still pass now, after this hit. ``retry_after``: seconds until a refused hit of the
    same cost would pass (0 when allowed). ``reset_after``: seconds until the subject is fully
    reset (no trace of its hits left; 0 when it has none). ``limit`` is the limiter's.
    These map onto the ``RateLimit-Remaining`` / ``Retry-After`` / ``RateLimit-Reset`` headers.
    """

    allowed: bool
    remaining: int
    retry_after: float
    reset_after: float
    limit: int


# -- argument checks ------------------------------------------------------------------------
def _count(value: Any, arg: str) -> int:
    return validate.count(value, arg, maximum=MAX_COUNT)


def limit(value: Any, arg: str = "limit") -> int:
    """Units per window: an ``int`` >= 1."""
    return _count(value, arg)


def cost(value: Any, most: int, arg: str = "cost") -> int:
    """Units one hit takes: an ``int``, ``1 <= cost <= most`` (the limit).

    A cost above the limit could never pass, however long the caller waited: that is a
    mistake in the caller, reported at once rather than as an endless ``retry_after``.
    """
    number = _count(value, arg)
    if number > most:
        raise ValueError(f"{arg} must be at most the limit ({most}): it could never pass")
    return number


def algorithm(value: Any, arg: str = "algorithm") -> Algorithm:
    """``"fixed"`` or ``"gcra"``."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be a str, got {type(value).__name__}")
    for known in ALGORITHMS:
        if value == known:
            return known
    raise ValueError(f"{arg} must be one of {', '.join(map(repr, ALGORITHMS))}, got {value!r}")


def limiter_name(value: bytes, arg: str = "name") -> bytes:
    """A limiter's (validated, encoded) name must not contain braces: see the key layout."""
    if b"{" in value or b"}" in value:
        raise ValueError(f"{arg} must not contain braces, got {value!r}")
    return value


def key(prefix: str, name: bytes, algo: Algorithm, subject: bytes) -> bytes:
    """The key of ``subject`` (validated, encoded) in limiter ``name``."""
    return b"%s:ratelimit:%s:%s:{%s}" % (prefix.encode(), name, algo.encode(), subject)


# -- replies --------------------------------------------------------------------------------
def decode(raw: Any, most: int) -> RateLimit:
    """``{allowed, remaining, retry_after us, reset_after us}`` -> :class:`RateLimit`."""
    try:
        allowed, remaining, retry_us, reset_us = (int(x) for x in raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from a rate limit script: {raw!r}") from exc
    if allowed not in (0, 1):
        raise ValueError(f"unexpected reply from a rate limit script: {raw!r}")
    return RateLimit(
        allowed=bool(allowed),
        remaining=max(remaining, 0),
        retry_after=0.0 if allowed else max(retry_us, 0) / 1e6,
        reset_after=max(reset_us, 0) / 1e6,
        limit=most,
    )


FIXED = load("ratelimit_fixed")
GCRA = load("ratelimit_gcra")
RESET = load("ratelimit_reset")
SCRIPTS: tuple[Script, ...] = (FIXED, GCRA, RESET)
