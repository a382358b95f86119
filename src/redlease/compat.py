"""redis-py's ``Lock`` API on redlease: switch one line, keep your code.

::

    import redis, redlease.compat

    r = redis.Redis()
    lock = r.lock("report", timeout=10, blocking_timeout=5, lock_class=redlease.compat.Lock)
    with lock:                                    # redis.exceptions.LockError if not acquired
        build_report(fence=lock.fence)

:class:`Lock` (for ``redis.Redis`` and ``RedisCluster``) and :class:`AsyncLock` (for
``redis.asyncio``) take redis-py's arguments and raise its errors: each error is also the
matching redlease error (see the table in ``docs/moving-from-redis-py.md``). What is safer
than redis-py stays safer: ``timeout=None`` is a lease renewed while held (a dead holder frees
it), waiters are served in FIFO order and woken by pub/sub (``sleep`` is ignored), a sync
lock belongs to the thread that took it, and ``fence`` is there for those who want it.
redlease's own options go through ``functools.partial`` (``r.lock(name,
lock_class=functools.partial(redlease.compat.Lock, lease=3))``: redis-py's ``Redis.lock``
passes no other keyword). ``keys="redis-py"`` keeps the lock in redis-py's own key (a
mixed fleet during a rolling migration: see ``docs/moving-from-redis-py.md``).

:func:`django_lock` gives the same lock from a django-redis cache (the ``django`` extra).
"""

from __future__ import annotations

from typing import Any

from ._async.redispy import AsyncRedisPyLock
from ._core.redispy import (
    LockError,
    LockNotOwnedError,
    NotAcquiredError,
    NotHeldError,
    UnavailableError,
)
from ._core.redispy import sleep as _check_sleep
from ._sync.redispy import RedisPyLock

__all__ = [
    "AsyncLock",
    "Lock",
    "LockError",
    "LockNotOwnedError",
    "NotAcquiredError",
    "NotHeldError",
    "UnavailableError",
    "django_lock",
]


class Lock(RedisPyLock):
    """redis-py's ``redis.lock.Lock`` on a redlease :class:`~redlease.Lock`.

    ``Lock(r, name, timeout=None, sleep=0.1, blocking=True, blocking_timeout=None,
    thread_local=True, raise_on_release_error=True, *, lease=10.0, prefix="redlease",
    keys="redlease")``, or ``r.lock(name, ..., lock_class=redlease.compat.Lock)``
    (``functools.partial(redlease.compat.Lock, lease=3)`` for redlease's options). Methods:
    ``acquire``, ``release``, ``extend``, ``reacquire``, ``locked``, ``owned``, ``with``; and
    ``fence``, ``lock`` (the redlease lock).
    """

    def acquire(
        self,
        sleep: float | None = None,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: Any = None,
    ) -> bool:
        """Take the lock: True once acquired, False if ``blocking`` is false and it is held,
        or if it stayed held for ``blocking_timeout`` seconds (``None``: wait forever).

        ``sleep`` is ignored (a release wakes the next waiter); ``token`` must be ``None``
        (``ValueError`` otherwise: each acquisition gets a random token of its own).
        Waiting forever for a lock the caller's thread already holds raises ``RuntimeError``
        instead of waiting forever.
        """
        _check_sleep(sleep)
        return self._acquire(blocking, blocking_timeout, token)


class AsyncLock(AsyncRedisPyLock):
    """redis-py's ``redis.asyncio.lock.Lock`` on a redlease :class:`redlease.asyncio.Lock`.

    ``r.lock(name, ..., lock_class=redlease.compat.AsyncLock)`` with a ``redis.asyncio``
    client; the same methods as :class:`Lock`, as coroutines, and ``async with``. Who may
    release it is :class:`redlease.asyncio.Lock`'s rule.
    """

    async def acquire(
        self,
        blocking: bool | None = None,
        blocking_timeout: float | None = None,
        token: Any = None,
    ) -> bool:
        """Take the lock, as :meth:`Lock.acquire` (redis-py's asyncio lock has no ``sleep``)."""
        return await self._acquire(blocking, blocking_timeout, token)


def django_lock(
    key: str,
    version: int | None = None,
    timeout: float | None = None,
    sleep: float = 0.1,
    blocking: bool = True,
    blocking_timeout: float | None = None,
    *,
    cache: Any = "default",
    thread_local: bool = True,
    raise_on_release_error: bool = True,
    lease: float = 10.0,
    keys: str = "redlease",
) -> Lock:
    """django-redis's ``cache.lock(key, ...)`` as a redlease lock (the ``django`` extra).

    ``cache`` is an alias of ``settings.CACHES`` (default ``"default"``) or a django-redis
    cache object (``django.core.cache.caches["default"]``); the lock runs on that cache's
    Redis client, the one ``django_redis.get_redis_connection(alias)`` returns, and is named
    as ``cache.lock()`` names it (``cache.make_key(key, version)``, so ``KEY_PREFIX`` and
    ``VERSION`` apply). On a sharded cache (django-redis's ``ShardClient``) the lock lives
    on the server the cache's hash ring gives that name (a ``{tag}`` in the key picks it), as
    ``cache.lock()`` places it. Same arguments as ``cache.lock()``, plus ``lease`` and
    ``keys`` (see :class:`Lock`; ``keys="redis-py"`` excludes ``cache.lock()`` holders during
    a rolling migration, and ``cache.has_key(key)`` sees the lock). Nothing is sent to Redis
    until it is acquired.
    """
    # Django is an optional extra: imported only when this function is called.
    from django.core.cache import caches  # type: ignore[import-untyped,unused-ignore]

    backend = caches[cache] if isinstance(cache, str) else cache
    if not hasattr(getattr(backend, "client", None), "get_client"):
        raise TypeError(
            "cache must be a django-redis cache (or the alias of one), got "
            f"{type(backend).__name__}"
        )
    name = str(backend.make_key(key, version=version))
    return Lock(
        _django_redis_client(backend.client, name),
        name,
        timeout,
        sleep,
        blocking,
        blocking_timeout,
        thread_local,
        raise_on_release_error,
        lease=lease,
        keys=keys,
    )


def _django_redis_client(client: Any, name: str) -> Any:
    """The redis-py client that django-redis's ``cache.lock(name)`` would use: a sharded
    cache (``ShardClient``, which has no single client) puts the lock on the server its hash
    ring gives ``name``, as ``ShardClient.lock`` does."""
    get_server = getattr(client, "get_server", None)
    if callable(get_server):
        return get_server(name)
    try:
        return client.get_client(write=True)
    except NotImplementedError:
        raise TypeError(
            f"django_lock cannot find the Redis client of this {type(client).__name__} "
            "(a django-redis client class whose get_client() is not implemented, with no "
            "get_server(key)): pass its redis-py client to redlease.compat.Lock instead"
        ) from None
