"""redlease.cached: key names, argument checks and reply decoding of the single-flight cache.

One cached value per function and call. Keys, for prefix ``redlease`` and the cache name
``cache:app.report:3f2a...`` (the function's qualified name, or its ``name=``, and a hash of
its arguments bound to its signature: :class:`Namer`)::

    redlease:{cache:app.report:3f2a...}:cached   HASH    value, fence, fresh (server ms)
    redlease:{cache:app.report:3f2a...}:lock     ...     the rebuild lock (a redlease Lock of
    redlease:{cache:app.report:3f2a...}:fence    ...     the same name: its keys, _core/lock.py;
                                                         its fence counter expires here:
                                                         lua/cache_arm.lua)

One hash tag per cached value, so its scripts and its rebuild lock touch one Cluster slot.

A miss takes the rebuild lock: the first caller computes and writes the value with the lock's
fence (``lua/cache_write.lua`` refuses a fence older than the lock's counter or the stored
value's); the others queue on the lock (FIFO, woken by pub/sub) and find the value when their
turn comes, or, after ``lock_ttl``, compute it themselves without storing it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from . import cache_values as values
from . import calls, validate
from .keys import tagged
from .lock import LockKeys
from .scripts import Script, load

__all__ = [
    "ARM",
    "FRESH",
    "INVALIDATE",
    "MISSING",
    "READ",
    "SCRIPTS",
    "STALE",
    "WRITE",
    "CacheKeys",
    "Lookup",
    "Namer",
    "Options",
    "Serializer",
    "cache_name",
    "data_key",
    "decode_read",
    "decode_write",
    "dumps",
    "label_of",
    "options",
]

MISSING, FRESH, STALE = 0, 1, 2
"""The states of a cached value, as cache_read.lua returns them."""


class Serializer(Protocol):
    """What ``serializer=`` must offer: the ``json`` and ``pickle`` modules both do."""

    def dumps(self, obj: Any, /) -> str | bytes: ...

    def loads(self, data: bytes, /) -> Any: ...


@dataclass(frozen=True)
class Options:
    """The checked arguments of ``cached()``."""

    ttl_ms: int
    stale_ms: int
    lock_ttl: float
    prefix: str
    serializer: Serializer

    @property
    def keep_ms(self) -> int:
        """How long the rebuild lock's fencing counter lives after it was last armed or
        written: past a wait and a rebuild (``lock_ttl`` each), past the value's whole life
        (``ttl + stale``), plus a second: see ``lua/cache_arm.lua``."""
        return self.ttl_ms + self.stale_ms + 2 * round(self.lock_ttl * 1000) + 1000


def options(ttl: Any, stale: Any, lock_ttl: Any, prefix: Any, serializer: Any) -> Options:
    """Check ``cached()``'s arguments, naming the one at fault (``serializer=None``:
    :data:`~redlease._core.cache_values.JSON`)."""
    serializer = values.JSON if serializer is None else serializer
    ttl_ms = validate.ttl_ms(ttl, "ttl")
    stale_ms = 0 if stale == 0 and not isinstance(stale, bool) else validate.ttl_ms(stale, "stale")
    lock_ms = validate.lease_ms(lock_ttl, "lock_ttl")
    methods = (getattr(serializer, "dumps", None), getattr(serializer, "loads", None))
    if not all(callable(method) for method in methods):
        raise TypeError(
            f"serializer must have dumps() and loads() (like json or pickle), got {serializer!r}"
        )
    return Options(ttl_ms, stale_ms, lock_ms / 1000, validate.prefix(prefix), serializer)


@dataclass(frozen=True)
class CacheKeys:
    """The keys one cached value's scripts touch: its data and its rebuild lock's fence."""

    data: bytes
    fence: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> CacheKeys:
        """Keys for the cache name ``name`` (validated) under ``prefix`` (validated)."""
        return cls(data=data_key(prefix, name), fence=LockKeys.build(prefix, name).fence)

    @property
    def all(self) -> list[bytes]:
        """KEYS of cache_write.lua and cache_invalidate.lua, in order."""
        return [self.data, self.fence]


def data_key(prefix: str, name: bytes) -> bytes:
    """The key of the cached value alone: all a hit reads."""
    (data,) = tagged(prefix, name, "cached")
    return data


class Namer:
    """Names the values of one cached function: computed on every call, so kept cheap.

    A value's name is ``cache:<label>:<hash of the bound arguments>``: ``label`` is ``name``
    (or a str ``key``), else the function's module and qualified name; a ``key`` function
    gives the whole name instead, ``cache:<key(*args, **kwargs)>``. A first parameter named
    ``self`` or ``cls`` (a method's instance or class) is left out of the hash.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        prefix: str,
        *,
        name: str | None = None,
        key: str | Callable[..., Any] | None = None,
    ) -> None:
        self.label = label_of(func, name, key)
        self._key = key if callable(key) else None
        self._signature = calls.signature(func)
        first = next(iter(self._signature.parameters), None) if self._signature else None
        self._instance = first if first in calls.INSTANCE else None
        self._start = f"cache:{self.label}:".encode()
        self._data_start = prefix.encode() + b":{"

    def name(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
        """The cache name of one call, however its arguments are spelled."""
        key = self._key
        if key is not None:
            made = key(*args, **kwargs)
            if not isinstance(made, str) or not made:
                raise TypeError(f"key() must return a non-empty str, got {made!r}")
            return b"cache:" + made.encode()
        try:
            arguments = calls.bind(self._signature, args, kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.label}: {exc}") from None
        arguments.pop(self._instance or "", None)
        try:
            text = values.key_text(arguments)
        except TypeError as exc:
            raise TypeError(
                f"the arguments of {self.label} cannot make its cache key: {exc} (None, bool, "
                "int, float, str, bytes, and lists, tuples, sets and dicts of them can); or "
                "pass key=lambda *args, **kwargs: '<a str>'"
            ) from None
        return self._start + hashlib.sha256(text.encode()).hexdigest()[:32].encode()

    def data_key(self, name: bytes) -> bytes:
        """:func:`data_key` of ``name``, with the prefix encoded once."""
        return self._data_start + name + b"}:cached"


def label_of(func: Callable[..., Any], name: Any, key: Any) -> str:
    """What names ``func`` in its cache keys (see :class:`Namer`). A lambda, a function
    defined inside another, or a callable object (a partial) shares its name with others (two
    lambdas of a module, the closures of one factory): without ``name=`` or ``key=`` it is a
    ``ValueError``."""
    if isinstance(key, str):
        if name is not None:
            raise TypeError("give name= or key='<a str>' (its older spelling), not both")
        name = key
    elif key is not None and not callable(key):
        raise TypeError(f"key must be a str, a function or None, got {type(key).__name__}")
    elif key is not None and name is not None:
        raise TypeError("give name= or a key= function (it makes the whole name), not both")
    if name is not None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        validate.name(name, "name")
        return name
    qualname = getattr(func, "__qualname__", None)
    if not isinstance(qualname, str):  # a partial, a callable object: no name of its own
        qualname = f"<{type(func).__qualname__} object>"
    found = f"{getattr(func, '__module__', None)}.{qualname}"
    if key is None and "<" in qualname:  # <lambda>, <locals>, <partial object>
        raise ValueError(
            f"cached: {found} is a lambda, a function defined inside another or a callable "
            "object, whose name others share (two lambdas of a module, the closures of one "
            "factory): pass name='<unique name>' (the closures of a factory each their "
            "own), or key="
        )
    return found


def cache_name(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    name: str | None = None,
    key: str | Callable[..., Any] | None = None,
) -> bytes:
    """:meth:`Namer.name` of one call (for callers that name one value)."""
    return Namer(func, "redlease", name=name, key=key).name(args, kwargs)


def dumps(serializer: Serializer, value: Any, label: str = "the function") -> bytes:
    """``serializer.dumps(value)`` as bytes (str is encoded as UTF-8); a value it cannot
    serialize is a ``TypeError`` that says what to pass instead."""
    try:
        data = serializer.dumps(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"the result of {label} cannot be cached: {serializer!r} failed on it ({exc}); "
            "return what JSON keeps (None, bool, int, float, str, and lists, tuples and "
            "str-keyed dicts of them), or pass serializer="
        ) from exc
    return data.encode() if isinstance(data, str) else bytes(data)


@dataclass(frozen=True)
class Lookup:
    """cache_read.lua's reply: ``state`` (MISSING, FRESH, STALE) and the serialized value."""

    state: int
    data: bytes | None = None


def decode_read(raw: Any) -> Lookup:
    """``{state[, value]}`` -> :class:`Lookup`."""
    try:
        state = int(raw[0])
        data = raw[1] if state != MISSING else None
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from cache_read.lua: {raw!r}") from exc
    if state not in (MISSING, FRESH, STALE):
        raise ValueError(f"unexpected reply from cache_read.lua: {raw!r}")
    if isinstance(data, str):
        data = data.encode()
    return Lookup(state, data)


def decode_write(raw: Any) -> bool:
    """``{stored, fence}`` -> whether the value was stored."""
    try:
        return int(raw[0]) == 1
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from cache_write.lua: {raw!r}") from exc


READ = load("cache_read")
ARM = load("cache_arm")
WRITE = load("cache_write")
INVALIDATE = load("cache_invalidate")
SCRIPTS: tuple[Script, ...] = (READ, ARM, WRITE, INVALIDATE)
