"""``redlease.cached``: the decorator, for plain functions and ``async def`` functions alike.

A plain function gets the sync cache (``_sync/cache.py``), a coroutine function the asyncio
one, loaded only then: ``import redlease`` stays free of asyncio code.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

from ._core import cache as core
from ._sync.cache import Cached

if TYPE_CHECKING:  # (only for type checkers: see the module's doc)
    from ._async.cache import AsyncCached

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Decorator(Protocol):
    """What ``cached(...)`` returns: it decorates a plain or an ``async def`` function."""

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[_P, Coroutine[Any, Any, _R]]
    ) -> AsyncCached[_P, _R]: ...

    @overload
    def __call__(self, func: Callable[_P, _R]) -> Cached[_P, _R]: ...


__all__ = ["cached"]


def cached(
    client: Any,
    *,
    ttl: float,
    stale: float = 0,
    lock_ttl: float = 10.0,
    name: str | None = None,
    key: str | Callable[..., str] | None = None,
    serializer: Any = None,
    prefix: str = "redlease",
) -> Decorator:
    """Cache a function's results in Redis, computed once per key across all processes.

    ::

        @redlease.cached(r, ttl=60, stale=30)
        def page(slug: str, lang: str = "en") -> dict: ...

    A plain function needs a sync client (``redis.Redis``, ``RedisCluster``), an ``async
    def`` function an asyncio one (``redis.asyncio.Redis``); the other kind is a
    ``TypeError`` when decorating. Methods work too (the decorator is a descriptor).

    * **One key per call.** The arguments are bound to the signature, defaults applied:
      ``page("home")``, ``page(slug="home")`` and ``page("home", lang="en")`` are one value,
      and ``page.invalidate(...)`` takes any of them.
    * **One computation per key.** On a miss, the first caller takes the key's rebuild lock
      (a redlease :class:`~redlease.Lock`) and computes; the others wait in FIFO order, woken
      by pub/sub, and return its value. A wait is bounded by ``lock_ttl``: then the waiter
      computes the value itself (and does not store it) rather than hang.
    * **Stale while revalidate.** With ``stale=s``, a call within ``s`` seconds after the value
      expired returns the old value at once, and one caller (across processes) refreshes it
      in the background (a thread, or a task of the caller's event loop).
    * **No overwrite by a late rebuild.** The value is written with the rebuild lock's fence,
      in one script that refuses a fence older than the lock's or the stored value's: a
      rebuild whose lease (``lock_ttl``) ran out cannot overwrite a newer value.

    :param client: your redis-py client (or valkey-py's).
    :param ttl: seconds a value stays fresh.
    :param stale: seconds an expired value is still served while it is refreshed (0: none).
    :param lock_ttl: the rebuild lock's lease, in seconds: longer than a computation takes
        (it is not renewed, so a stuck rebuild lets the next caller in), and how long others
        wait for it.
    :param name: the function's name in its keys, in place of its module and qualified name:
        kept across renames and moves. Required for a lambda, a function defined inside
        another or a callable object such as a partial (``ValueError`` without it: they share
        their name with others).
    :param key: a function of the call's arguments (a method's ``self`` first) returning the
        whole cache name, in place of ``name`` and the hash of the arguments (a ``str`` is
        taken as ``name=``). By default the arguments are hashed, by type and value; they
        must be None, bool, int, float, str, bytes, or lists, tuples, sets and dicts of them.
        A method's ``self`` (a first parameter named ``self`` or ``cls``) is left out: every
        instance shares the values; pass ``key=`` when they depend on the instance.
    :param serializer: ``dumps`` / ``loads`` of the values. By default JSON that gives back
        what was cached, tuples as tuples; a result JSON would change (a dict with non-str
        keys, an enum member, a namedtuple) is a ``TypeError``. Pass ``pickle`` only if every
        process that writes to this Redis is trusted.
    :param prefix: the key prefix (no white space or braces).

    Each value lives ``ttl + stale`` seconds, its rebuild lock's keys a little longer
    (``docs/safety.md``): every key has an expiry, whatever happens.

    The decorated function has ``invalidate(*args, **kwargs)`` (drop that value; a rebuild
    already running cannot store its result) and ``key_for(*args, **kwargs)``. Calls are
    counted in the metrics (``Observer.cache_lookup``: hit, stale, miss, wait, fallback).
    """
    settings = core.options(ttl, stale, lock_ttl, prefix, serializer)

    def decorate(func: Callable[..., Any]) -> Any:
        if not callable(func):
            raise TypeError(f"cached decorates a function, got {type(func).__name__}")
        if inspect.iscoroutinefunction(func):
            # the asyncio shell, loaded only for a coroutine function (see the module's doc)
            shell: Any = importlib.import_module("redlease._async.cache").AsyncCached
            kind = "an async def function needs an asyncio client (redis.asyncio.Redis)"
        else:
            shell, kind = Cached, "a plain function needs a sync client (redis.Redis)"
        try:
            return shell(client, func, settings, key=key, name=name)
        except TypeError as exc:
            if "client" in str(exc):
                raise TypeError(f"cached: {kind}: {exc}") from None
            raise

    return decorate
