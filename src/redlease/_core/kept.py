"""Errors kept past the call that caught them, without the frames they passed through.

A raised exception's ``__traceback__`` references every frame it passed, and each finished
frame keeps its local variables and its caller's frame: an error kept by a long-lived object
(the waiter hub, a shared subscription) keeps a waiting thread's whole stack alive, and with
it the lock handles in its locals, which the watchdog then renews for as long as it lives.
What is kept is a copy: same class and message, no traceback, no ``__cause__`` or
``__context__``. (The error raised to the caller chains the original: it is not kept.)
"""

from __future__ import annotations

import copy
import enum
import traceback
from typing import Any

__all__ = ["forget_frames", "kept"]

_PLAIN = (str, bytes, int, float, type(None), enum.Enum)
"""Attribute values a kept copy may carry (redis-py's errors have an error type, a status)."""


def kept(exc: BaseException, fallback: type[BaseException] = RuntimeError) -> BaseException:
    """A copy of ``exc`` that is safe to keep: its class and message, none of its frames.

    An error whose class cannot be copied becomes ``fallback("<class>: <message>")``.
    """
    try:
        clone = copy.copy(exc)
    except Exception:  # an exception class whose __init__ does not take its own args
        clone = None
    if (
        not isinstance(clone, BaseException)
        or clone is exc
        or not all(_plain(value) for value in vars(clone).values())
    ):  # (an attribute may hold anything, frames included: only the text is kept then)
        clone = fallback(f"{type(exc).__name__}: {exc}")
    clone.__traceback__ = None
    clone.__cause__ = None
    clone.__context__ = None
    clone.__suppress_context__ = True
    return clone


def _plain(value: object) -> bool:
    if isinstance(value, tuple):  # (e.g. a MOVED error's node address)
        return all(isinstance(item, _PLAIN) for item in value)
    return isinstance(value, _PLAIN)


def forget_frames(exc: BaseException) -> None:
    """Drop the tracebacks of an error about to be dropped (its causes' and the per-server
    errors it carries included), clearing the locals of their finished frames.

    For an error caught and dropped: one in a reference cycle (redis-py keeps some, and so
    does a finished frame holding its own error) would keep the catching frames, and the
    holdings in their locals, alive and renewed until the cycle collector runs.
    """
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo and len(seen) < 64:
        error = todo.pop()
        if not isinstance(error, BaseException) or id(error) in seen:
            continue
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)  # (a running frame is left alone)
        error.__traceback__ = None  # (its frames' callers: a list holding it is one)
        todo += [error.__cause__, error.__context__]
        errors = getattr(error, "errors", None)
        if isinstance(errors, dict):
            todo += list(errors.values())
