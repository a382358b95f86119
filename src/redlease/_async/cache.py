"""The single-flight cache behind ``redlease.cached``: one computation per key across processes."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import redis.asyncio

from .. import _observe
from .._core import cache as core
from .._core import validate
from .._logging import record
from .._synchronization import AsyncBackground, ProcessLock
from ..errors import LockLost, LockUnavailable
from .flavor import check_client
from .lock import AsyncLock
from .primitive import AsyncPrimitive

__all__ = ["AsyncCached", "AsyncCachedMethod"]

_P = ParamSpec("_P")
_Q = ParamSpec("_Q")
_R = TypeVar("_R")
_S = TypeVar("_S")


class AsyncCached(AsyncPrimitive, Generic[_P, _R]):
    """A function whose results are cached in Redis, computed once per key at a time.

    Made by ``redlease.cached(client, ttl=...)``; call it as the function. ``invalidate(*args,
    **kwargs)`` drops the value of those arguments; ``key_for(*args, **kwargs)`` is its cache
    name; both take the arguments as a call does, in any spelling of it. On a method, read
    through an instance, it is an :class:`AsyncCachedMethod`. Redis failures raise
    :class:`~redlease.LockUnavailable` with the cause chained.
    """

    _unavailable_error = LockUnavailable

    def __init__(
        self,
        client: redis.asyncio.Redis,
        func: Callable[_P, Any],
        settings: core.Options,
        *,
        key: str | Callable[..., Any] | None = None,
        name: str | None = None,
    ) -> None:
        validate.decorated(func, "cached", coroutine=AsyncBackground.ASYNC)
        check_client(client)
        self._namer = core.Namer(func, settings.prefix, name=name, key=key)
        functools.update_wrapper(self, func)
        self._client = client
        self._func = func
        self._settings = settings
        self._serializer = settings.serializer
        self._label = self._namer.label
        self._refreshing: dict[bytes, AsyncBackground | None] = {}
        self._guard = ProcessLock()

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> AsyncCached[_P, _R]: ...

    @overload
    def __get__(
        self: AsyncCached[Concatenate[_S, _Q], _R], instance: _S, owner: type[Any] | None = None
    ) -> AsyncCachedMethod[_Q, _R]: ...

    def __get__(self, instance: Any, owner: type[Any] | None = None) -> Any:
        """Read on a class: itself; on an instance: that instance's bound method."""
        return self if instance is None else AsyncCachedMethod(self, instance)

    def __repr__(self) -> str:
        return f"<cached {self._label} ttl={self._settings.ttl_ms / 1000}>"

    def key_for(self, *args: _P.args, **kwargs: _P.kwargs) -> bytes:
        """The cache name of a call with these arguments (its keys carry it as hash tag)."""
        return self._namer.name(args, kwargs)

    async def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """The cached value of this call: computed if there is none."""
        name = self.key_for(*args, **kwargs)
        found = await self._read(self._namer.data_key(name))
        if found.state == core.FRESH:
            _observe.cache_lookup(self._label, "hit")
            return self._loads(found.data)
        keys = core.CacheKeys.build(self._settings.prefix, name)
        if found.state == core.STALE:
            _observe.cache_lookup(self._label, "stale")
            self._refresh_later(name, keys, args, kwargs)
            return self._loads(found.data)
        return await self._fill(name, keys, args, kwargs)

    async def invalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> bool:
        """Drop the value cached for these arguments; True if there was one. A rebuild already
        running for them computes on, but cannot store what it computed."""
        keys = core.CacheKeys.build(self._settings.prefix, self.key_for(*args, **kwargs))
        return bool(await self._run(core.INVALIDATE, keys.all, [], "invalidate"))

    # -- a miss: one caller computes, the others wait for its value -------------------------
    async def _fill(
        self, name: bytes, keys: core.CacheKeys, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> _R:
        lock = self._lock(name)
        await self._arm(keys)
        if not await lock.acquire(timeout=self._settings.lock_ttl):
            # The rebuild took longer than lock_ttl: compute here rather than hang, unstored.
            _observe.cache_lookup(self._label, "fallback")
            result: _R = await self._func(*args, **kwargs)
            return result
        try:
            found = await self._read(keys.data)
            if found.state == core.FRESH:  # filled while we waited
                _observe.cache_lookup(self._label, "wait")
                return self._loads(found.data)
            _observe.cache_lookup(self._label, "miss")
            return await self._compute(lock, keys, args, kwargs)
        finally:
            await self._release(lock)

    async def _compute(
        self, lock: AsyncLock, keys: core.CacheKeys, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> _R:
        fence = lock.fence  # taken now, while held: the write carries the fence of this rebuild
        result: _R = await self._func(*args, **kwargs)
        data = core.dumps(self._serializer, result, self._label)
        settings = self._settings
        if fence is not None:
            args_ = [fence, data, settings.ttl_ms, settings.stale_ms, settings.keep_ms]
            core.decode_write(await self._run(core.WRITE, keys.all, args_, "write"))
        return result

    # -- stale: answer now, refresh once in the background ----------------------------------
    def _refresh_later(
        self, name: bytes, keys: core.CacheKeys, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        with self._guard:  # one refresh per value in this process (the lock: across them)
            if name in self._refreshing:
                return
            self._refreshing[name] = None

        async def refresh() -> None:
            try:
                lock = self._lock(name)
                await self._arm(keys)
                if not await lock.acquire(blocking=False):
                    return  # another caller (here or in another process) refreshes it
                try:
                    if (await self._read(keys.data)).state != core.FRESH:
                        await self._compute(lock, keys, args, kwargs)
                finally:
                    await self._release(lock)
            except Exception as exc:
                record(
                    logging.WARNING,
                    "refresh_failed",
                    "refreshing cached %s failed: %s: %s",
                    self._label,
                    type(exc).__name__,
                    str(exc),
                    name=self._label,
                    error=f"{type(exc).__name__}: {exc}",
                )
            finally:
                with self._guard:
                    self._refreshing.pop(name, None)

        job = AsyncBackground(refresh, "redlease-cache-refresh")
        with self._guard:  # kept referenced while it runs, unless it is already over
            if name in self._refreshing:
                self._refreshing[name] = job

    # -- plumbing ---------------------------------------------------------------------------
    def _lock(self, name: bytes) -> AsyncLock:
        settings = self._settings
        return AsyncLock(
            self._client,
            name,
            ttl=settings.lock_ttl,
            timeout=settings.lock_ttl,
            prefix=settings.prefix,
            renew=False,  # lock_ttl bounds a rebuild: a stuck one lets the next caller in
        )

    async def _release(self, lock: AsyncLock) -> None:
        # (a lease that ran out while computing: the fenced write was refused, or done first)
        with contextlib.suppress(LockLost):
            await lock.release()

    async def _arm(self, keys: core.CacheKeys) -> None:
        """Make the rebuild lock's fencing counter one that expires (``cache_arm.lua``)."""
        await self._run(core.ARM, [keys.fence], [self._settings.keep_ms], "arm")

    async def _read(self, key: bytes) -> core.Lookup:
        return core.decode_read(await self._run(core.READ, [key], [], "read"))

    def _subject(self) -> tuple[str, Any]:
        return f"cached {self._label}", self._label

    def _loads(self, data: bytes | None) -> _R:
        result: _R = self._serializer.loads(data or b"")
        return result


class AsyncCachedMethod(Generic[_P, _R]):
    """A cached method read through an instance, ``obj.method``: a call, ``invalidate`` and
    ``key_for`` pass the instance first, as calling the method does (a ``key=`` function
    gets it; the default key leaves out a first parameter named ``self`` or ``cls``)."""

    __slots__ = ("__func__", "__self__")

    def __init__(self, cached: AsyncCached[..., Any], instance: Any) -> None:
        self.__func__ = cached
        self.__self__ = instance

    def __repr__(self) -> str:
        return f"<bound {self.__func__!r} of {self.__self__!r}>"

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.__func__, attribute)  # __name__, __doc__, __wrapped__, ...

    async def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """The cached value of this call: computed if there is none."""
        result: _R = await self.__func__(self.__self__, *args, **kwargs)
        return result

    async def invalidate(self, *args: _P.args, **kwargs: _P.kwargs) -> bool:
        """:meth:`AsyncCached.invalidate` of this call."""
        return bool(await self.__func__.invalidate(self.__self__, *args, **kwargs))

    def key_for(self, *args: _P.args, **kwargs: _P.kwargs) -> bytes:
        """:meth:`AsyncCached.key_for` of this call."""
        return self.__func__.key_for(self.__self__, *args, **kwargs)
