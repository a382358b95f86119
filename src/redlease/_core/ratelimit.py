"""Rate limiter: algorithms, key layout, argument checks and reply decoding.

A limiter has one or more limits (:class:`~redlease._core.rates.Rate`: ``L`` units per
``W`` seconds) and one algorithm. A hit is checked against every limit and counted by all of
them or, if any refuses it, by none, in one script call on the server's clock (``TIME``).
For each algorithm, what passes in any span of ``d <= W`` seconds, and what it costs:

``"fixed"`` (fixed window, ``INCRBY`` + ``PEXPIRE`` made atomic): at most ``L`` per window;
    a window starts at the subject's first hit. Up to ``2 L`` may pass in a short span across
    a window's end. One counter per subject and limit.

``"sliding"`` (the two-window estimate, as Cloudflare and ``limits``' sliding window counter
    do it; *not* an exact log): windows aligned on the server's clock, and at a fraction
    ``f`` of one, the units of the last ``W`` are estimated as ``previous * (1 - f) +
    current``. At most ``L * (1 + d / W)`` pass in any span of ``d``, and at most ``L`` in
    each aligned window: a burst of ``L`` at a window's end is followed by ``L`` per ``W``,
    not by a second burst. One small hash (three numbers) per subject and limit, where an
    exact log (``L`` in any ``W``) keeps one sorted-set member per hit (``O(L)`` memory).

``"gcra"`` (generic cell rate algorithm: a leaky bucket kept as one timestamp): a burst of
    ``L``, then one unit every ``W / L``: at most ``L + L * d / W`` in any span of ``d``;
    ``retry_after`` is exact. One timestamp per subject and limit.

``"token_bucket"``: a bucket of ``burst`` tokens (default ``L``) refilled at ``L / W`` per
    second: at most ``burst + L * d / W`` in any span of ``d``. With ``burst = L`` it admits
    what GCRA admits; ``burst`` sets the burst apart from the rate. One small hash per subject
    and limit.

Refused hits are never counted. Every key expires once it no longer matters.

Keys, for prefix ``redlease``, limiter ``api`` and subject ``user:42``: limit ``i`` keeps
``redlease:ratelimit:api:<algorithm>:<window ms>:{user:42}``. The hash tag is the *subject*,
not the limiter's name: one subject's limits share a Cluster slot (one script call), and a
limiter with a million subjects spreads over the cluster. Braces (and ``%``) in the name are
written ``%7B``, ``%7D`` (``%25``), so the first ``{`` of a key always starts the subject. The
algorithm and the window are in the key: a limiter reconfigured (``"5/day"`` becomes
``"5/second"``, or another algorithm) never reads a value the old one wrote for another
meaning; it starts afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from . import validate
from .rates import Rate
from .scripts import Script, load

__all__ = [
    "ALGORITHMS",
    "FIXED",
    "GCRA",
    "MAX_COUNT",
    "RESET",
    "SCRIPTS",
    "SLIDING",
    "TOKEN_BUCKET",
    "Algorithm",
    "RateLimit",
    "algorithm",
    "bursts",
    "cost",
    "decode",
    "decode_reply",
    "keys",
    "limit",
    "limit_args",
    "limiter_name",
    "script",
]

Algorithm = Literal["fixed", "sliding", "gcra", "token_bucket"]
ALGORITHMS: tuple[Algorithm, ...] = ("fixed", "sliding", "gcra", "token_bucket")

MAX_COUNT = 10**12
"""The largest ``limit`` (and ``cost``) accepted: Lua's numbers keep counts this large exact."""


@dataclass(frozen=True)
class RateLimit:
    """The answer of a rate limiter for one subject.

    ``allowed``: the hit passed (``hit``) or would pass (``peek``). ``remaining``: units that
    could still pass now, after this hit. ``retry_after``: seconds until a refused hit of the
    same cost would pass (0 when allowed). ``reset_after``: seconds until the subject is fully
    reset (no trace of its hits left; 0 when it has none). ``limit`` and ``window`` are the
    limit's (units per ``window`` seconds); with ``"token_bucket"``, ``remaining`` counts the
    bucket's tokens, up to its ``burst``, which may be more than ``limit``.

    With several limits the answer is the tightest limit's (when refused, the refusing limit
    whose ``retry_after`` is longest; when allowed, the one with the fewest ``remaining``),
    and ``limits`` holds every limit's own answer, shortest window first (its ``allowed``
    says whether that limit alone would pass the hit). These map onto the ``RateLimit-*``
    and ``Retry-After`` headers.

    ``shadowed``: the limits refused this hit, and a limiter in ``mode="shadow"`` let it
    through (``allowed`` is then True; ``limits`` still shows which limit refused).
    """

    allowed: bool
    remaining: int
    retry_after: float
    reset_after: float
    limit: int
    window: float = 0.0
    limits: tuple[RateLimit, ...] = ()
    shadowed: bool = False


# -- argument checks ------------------------------------------------------------------------
def _count(value: Any, arg: str) -> int:
    return validate.count(value, arg, maximum=MAX_COUNT)


def limit(value: Any, arg: str = "limit") -> int:
    """Units per window: an ``int`` >= 1."""
    return _count(value, arg)


def cost(value: Any, most: int, arg: str = "cost") -> int:
    """Units one hit takes: an ``int``, ``1 <= cost <= most`` (the smallest limit or burst).

    A cost above it could never pass, however long the caller waited: that is a mistake in
    the caller, reported at once rather than as an endless ``retry_after``.
    """
    number = _count(value, arg)
    if number > most:
        raise ValueError(f"{arg} must be at most the limit ({most}): it could never pass")
    return number


def algorithm(value: Any, arg: str = "algorithm") -> Algorithm:
    """One of :data:`ALGORITHMS`."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be a str, got {type(value).__name__}")
    for known in ALGORITHMS:
        if value == known:
            return known
    raise ValueError(f"{arg} must be one of {', '.join(map(repr, ALGORITHMS))}, got {value!r}")


def bursts(value: Any, rates: Sequence[Rate], algo: Algorithm) -> tuple[int, ...]:
    """Each limit's burst: ``burst=`` for ``"token_bucket"`` (an ``int`` for every limit, or
    one per limit, shortest window first), else (and by default) the limit's amount."""
    if value is None:
        return tuple(rate.amount for rate in rates)
    if algo != "token_bucket":
        raise ValueError(f"burst applies to algorithm='token_bucket' only, not {algo!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        return (_count(value, "burst"),) * len(rates)
    if isinstance(value, (list, tuple)):
        if len(value) != len(rates):
            raise ValueError(f"burst must have one size per limit ({len(rates)}), got {value!r}")
        return tuple(_count(each, "burst") for each in value)
    raise TypeError(f"burst must be an int or a sequence of ints, got {type(value).__name__}")


def limiter_name(value: bytes) -> bytes:
    """A limiter's (validated, encoded) name as its keys write it: ``%``, ``{`` and ``}``
    escaped, so that the subject is always the hash tag (see the key layout)."""
    return value.replace(b"%", b"%25").replace(b"{", b"%7B").replace(b"}", b"%7D")


def keys(
    prefix: str, name: bytes, algo: Algorithm, subject: bytes, rates: Sequence[Rate]
) -> list[bytes]:
    """The keys of ``subject`` in limiter ``name`` (escaped), one per limit (see the key
    layout)."""
    head = b"%s:ratelimit:%s:%s:" % (prefix.encode(), name, algo.encode())
    return [b"%s%d:{%s}" % (head, round(rate.window * 1000), subject) for rate in rates]


def limit_args(rates: Sequence[Rate], sizes: Sequence[int]) -> list[int]:
    """The scripts' per-limit ARGV: amount, window ms and burst for each limit."""
    args: list[int] = []
    for rate, size in zip(rates, sizes, strict=True):
        args += [rate.amount, round(rate.window * 1000), size]
    return args


def script(algo: Algorithm) -> Script:
    """The script that checks and counts a hit for ``algo``."""
    return _BY_ALGORITHM[algo]


# -- replies --------------------------------------------------------------------------------
def decode(raw: Any, most: int, window: float = 0.0) -> RateLimit:
    """One limit's ``{allowed, remaining, retry_after us, reset_after us}`` ->
    :class:`RateLimit`."""
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
        window=window,
    )


def decode_reply(raw: Any, rates: Sequence[Rate]) -> tuple[int, RateLimit]:
    """A hit script's reply -> (server time in us, the tightest limit's answer with every
    limit's in ``limits``)."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 1 + 4 * len(rates):
        raise ValueError(f"unexpected reply from a rate limit script: {raw!r}")
    each = tuple(
        decode(raw[1 + 4 * i : 5 + 4 * i], rate.amount, rate.window) for i, rate in enumerate(rates)
    )
    return int(raw[0]), replace(tightest(each), limits=each)


def tightest(each: Sequence[RateLimit]) -> RateLimit:
    """The answer that decides: the refusal with the longest ``retry_after``, or if none
    refuses, the fewest ``remaining`` (then the longest ``reset_after``)."""
    refused = [r for r in each if not r.allowed]
    if refused:
        return max(refused, key=lambda r: r.retry_after)
    return min(each, key=lambda r: (r.remaining, -r.reset_after))


_LIB = ("common_lib", "ratelimit_lib")
FIXED = load("ratelimit_fixed", prelude=_LIB)
SLIDING = load("ratelimit_sliding", prelude=_LIB)
GCRA = load("ratelimit_gcra", prelude=_LIB)
TOKEN_BUCKET = load("ratelimit_token_bucket", prelude=_LIB)
RESET = load("ratelimit_reset")
SCRIPTS: tuple[Script, ...] = (FIXED, SLIDING, GCRA, TOKEN_BUCKET, RESET)
_BY_ALGORITHM: dict[Algorithm, Script] = {
    "fixed": FIXED,
    "sliding": SLIDING,
    "gcra": GCRA,
    "token_bucket": TOKEN_BUCKET,
}
