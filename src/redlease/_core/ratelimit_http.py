"""What an HTTP rate limit answers: status, headers and body, for any web framework.

The header names are those of the IETF draft "RateLimit Fields for HTTP",
draft-ietf-httpapi-ratelimit-headers-06 (December 2022), the last revision with separate
fields, and the names slowapi, GitHub-style APIs and most clients read:

* ``RateLimit-Limit``: the tightest limit's amount (units per its window);
* ``RateLimit-Remaining``: units left under it after this request;
* ``RateLimit-Reset``: whole seconds until it is fully reset (rounded up);
* ``RateLimit-Policy``: every limit, e.g. ``10;w=1, 1000;w=86400``;
* ``Retry-After`` (RFC 9110) on a 429: whole seconds until a retry can pass (rounded up).

Revisions -07 and later merge these into ``RateLimit`` and ``RateLimit-Policy`` structured
fields; they are not sent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from .ratelimit import RateLimit

__all__ = ["OnUnavailable", "Verdict", "headers", "on_unavailable", "outage", "verdict"]

OnUnavailable = Literal["allow", "deny"]

TOO_MANY = 429
UNAVAILABLE = 503


@dataclass(frozen=True)
class Verdict:
    """What to do with a request: ``status`` None lets it through (with ``headers`` added to
    the response); else answer ``status`` with ``headers`` and ``body``."""

    status: int | None
    headers: tuple[tuple[str, str], ...]
    body: str = ""


def on_unavailable(value: Any, arg: str = "on_unavailable") -> OnUnavailable:
    """``"allow"`` (fail open: let requests through) or ``"deny"`` (fail closed: 503)."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be 'allow' or 'deny', got {type(value).__name__}")
    if value == "allow":
        return "allow"
    if value == "deny":
        return "deny"
    raise ValueError(f"{arg} must be 'allow' or 'deny', got {value!r}")


def _seconds(value: float) -> str:
    return str(max(math.ceil(value - 1e-9), 0))


def headers(result: RateLimit) -> tuple[tuple[str, str], ...]:
    """The draft-06 fields for ``result`` (and ``Retry-After`` when it was refused)."""
    policy = ", ".join(f"{r.limit};w={_seconds(r.window)}" for r in result.limits or (result,))
    fields = (
        ("RateLimit-Limit", str(result.limit)),
        ("RateLimit-Remaining", str(result.remaining)),
        ("RateLimit-Reset", _seconds(result.reset_after)),
        ("RateLimit-Policy", policy),
    )
    if result.allowed:
        return fields
    return (("Retry-After", _seconds(max(result.retry_after, 1e-6))), *fields)


def verdict(result: RateLimit, *, shadow: bool = False) -> Verdict:
    """Pass an allowed request with the headers; refuse the others with 429. ``shadow``
    (a limiter in ``mode="shadow"``): pass every request, without the fields, which would
    tell clients to slow down for a limit that is only being tried."""
    if shadow:
        return Verdict(None, ())
    if result.allowed:
        return Verdict(None, headers(result))
    return Verdict(TOO_MANY, headers(result), "Too Many Requests")


def outage(choice: OnUnavailable) -> Verdict:
    """The limiter could not answer: let the request through, or refuse it with 503."""
    if choice == "allow":
        return Verdict(None, ())
    return Verdict(UNAVAILABLE, (), "Service Unavailable: the rate limiter cannot be reached")
