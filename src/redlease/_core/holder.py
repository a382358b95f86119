"""Who holds a lease: the identity every token carries, and its decoding for ``inspect()``.

A token is ``<process id>.<128 random bits, hex>.<host>:<pid>:<thread or task name>``. The
scripts read only the part before the first ``.`` (the process id that names the waiter's
channel); the identity after the second is for people: ``inspect()``, ``redlease inspect``,
``redlease top``. Carrying it in the token costs no write of its own (the token is written
anyway). Each part is cut to :data:`MAX_PART` characters and keeps only
:data:`_ALLOWED` characters (others become ``_``): no white space (the scripts' messages are
split on spaces) and no ``:`` (it separates the parts).

What is shown of a token is never the token: ``inspect()``, ``redlease inspect``, ``top`` and
the logs show :func:`shown`, the process id and the first :data:`SHOWN_HEX` hex digits of the
random part (enough to tell holders apart and to name one to ``force_release``), never the
rest: the token is a capability (``release``, ``extend``, ``adopt`` take it whole).

*Since when* is the server's time at acquisition. It is not stored either: the fence issued to
the holder is ``max(counter + 1, server time in us)`` (``lua/common_lib.lua``), so a fence of
at least :data:`TIME_FENCE` *is* that time, to the microsecond, unless acquisitions outran
the clock (then a little later than the truth). A smaller fence is a count from before fences
were times: ``since`` is ``None`` then.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "MAX_PART",
    "SHOWN_HEX",
    "TIME_FENCE",
    "HolderInfo",
    "decode",
    "identity",
    "name_of",
    "shown",
    "since",
]

MAX_PART = 48
"""The most characters of the host name, and of the thread or task name, a token keeps."""
SHOWN_HEX = 8
"""How many hex digits of a token's 128 random bits are shown (32 bits: the other 96 stay
secret)."""
TIME_FENCE = 10**15
"""Fences from here on are server times in microseconds (10**15 us is September 2001)."""

_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-()[]#@+=,/")


def _clean(text: str) -> str:
    return "".join(c if c in _ALLOWED else "_" for c in text[:MAX_PART]) or "_"


_HOST = _clean(socket.gethostname().split(".")[0])


@lru_cache(maxsize=1024)
def identity(pid: int, who: str) -> bytes:
    """``<host>:<pid>:<who>``, cleaned and bounded, as the token's last part (cached: the hot
    path asks once per acquisition, nearly always with a name seen before)."""
    return f"{_HOST}:{pid}:{_clean(who)}".encode()


def name_of(owner: object) -> str:
    """The name of a lock's owner: an asyncio task's ``get_name()``, a thread's ``name``."""
    get_name = getattr(owner, "get_name", None)
    return str(get_name() if get_name is not None else getattr(owner, "name", ""))


@dataclass(frozen=True)
class HolderInfo:
    """Who holds a lease, as its token says: ``host`` (short host name), ``pid``, ``thread``
    (the thread's name, or the asyncio task's), ``since`` (the server's time when it was
    acquired, seconds since the epoch; ``None`` when unknown) and ``token``: the start of the
    holder's token (``shown()``), what ``force_release(token=...)`` takes to name one holder;
    never the whole token, which would let its reader act as the holder. ``host``, ``pid``
    and ``thread`` are ``None`` for a token without an identity (an older redlease's, or one
    written by hand)."""

    token: str
    host: str | None
    pid: int | None
    thread: str | None
    since: float | None


def since(fence: int) -> float | None:
    """The server time (s) a fence of :data:`TIME_FENCE` or more was issued at, else None."""
    return fence / 1_000_000 if fence >= TIME_FENCE else None


def shown(token: bytes | str) -> str:
    """What may be shown of ``token``: ``<process id>.<first SHOWN_HEX hex digits>`` (a token
    of another form: its first SHOWN_HEX characters). A prefix of the token, never all of it."""
    text = token.decode(errors="replace") if isinstance(token, bytes) else token
    process, dot, rest = text.partition(".")
    if dot and len(rest) > SHOWN_HEX:
        return f"{process}.{rest[:SHOWN_HEX]}"
    return text[: min(SHOWN_HEX, max(len(text) - 1, 0))]


def decode(token: bytes | str, fence: int) -> HolderInfo:
    """The :class:`HolderInfo` of ``token``, issued ``fence`` (see :func:`since`)."""
    text = token.decode(errors="replace") if isinstance(token, bytes) else token
    parts = text.split(".", 2)
    host = pid = thread = None
    if len(parts) == 3:
        fields = parts[2].split(":", 2)
        if len(fields) == 3 and fields[1].isdigit():
            host, pid, thread = fields[0], int(fields[1]), fields[2]
    return HolderInfo(shown(text), host, pid, thread, since(fence))
