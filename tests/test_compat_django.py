"""django-redis users: the redlease.compat lock from a cache's client and from settings.

Real Django and django-redis (the ``django`` extra), configured in this process against the
test server with ``settings.configure(CACHES=...)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

django = pytest.importorskip("django")
django_redis = pytest.importorskip("django_redis")

import redis.exceptions  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.cache import caches  # noqa: E402
from django.test import override_settings  # noqa: E402
from django_redis.client import DefaultClient  # noqa: E402

import redlease  # noqa: E402
import redlease.compat  # noqa: E402
from tests.support import Tasks  # noqa: E402
from tests.topology import RedisServer  # noqa: E402


@pytest.fixture
def cache(server: RedisServer) -> Iterator[object]:
    """The ``default`` cache on the test server. Settings are configured once per process
    (another module may have done it first): the cache comes from ``override_settings``."""
    location = f"redis://{server.host}:{server.port}/0"
    backend = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": location}
    caches_setting = {"default": {**backend, "KEY_PREFIX": "site"}}
    if not settings.configured:
        settings.configure(CACHES=caches_setting)
        django.setup()
    with override_settings(CACHES=caches_setting):
        connection = django_redis.get_redis_connection("default")
        connection.flushall()
        yield caches["default"]
        redlease.close(connection)


def test_lock_on_the_caches_client_with_lock_class(cache: object) -> None:
    connection = django_redis.get_redis_connection("default")
    lock = connection.lock("report", timeout=5, lock_class=redlease.compat.Lock)
    with lock:
        assert lock.owned()
        assert lock.fence is not None and lock.fence > 0  # (its value: the lock's business)


def test_django_lock_from_settings_is_named_as_cache_lock_names_it(cache: object) -> None:
    lock = redlease.compat.django_lock("report", timeout=5, blocking_timeout=0)
    assert lock.name == cache.make_key("report")  # type: ignore[attr-defined]
    assert lock.name == "site:1:report"
    assert lock.redis.connection_pool is django_redis.get_redis_connection().connection_pool
    same = redlease.compat.django_lock("report", cache=cache, blocking_timeout=0)
    other_version = redlease.compat.django_lock("report", version=2, blocking_timeout=0)

    def take_and_release() -> bool:
        taken = other_version.acquire()
        other_version.release()
        return taken

    with lock:
        assert Tasks.run(same.acquire) is False  # the same lock through the cache object
        assert Tasks.run(take_and_release) is True  # another version: another lock


def test_django_lock_in_redis_pys_keys_excludes_cache_lock_holders(cache: object) -> None:
    """A rolling migration: ``cache.lock()`` (redis-py's Lock) and ``django_lock(...,
    keys="redis-py")`` exclude each other, and ``cache.has_key`` sees the lock."""
    theirs = cache.lock("migrating", timeout=5)  # type: ignore[attr-defined]
    ours = redlease.compat.django_lock("migrating", blocking_timeout=0, keys="redis-py")
    assert theirs.acquire(blocking=False)
    assert Tasks.run(ours.acquire) is False
    theirs.release()
    assert ours.acquire()
    assert cache.has_key("migrating")  # type: ignore[attr-defined]
    assert not cache.lock("migrating").acquire(blocking=False)  # type: ignore[attr-defined]
    ours.release()
    assert not cache.has_key("migrating")  # type: ignore[attr-defined]


def test_twin_django_locks_default_keys_do_not_exclude_cache_lock_holders(cache: object) -> None:
    """The check above would catch it: with redlease's own keys, both are let in."""
    theirs = cache.lock("migrating", timeout=5)  # type: ignore[attr-defined]
    ours = redlease.compat.django_lock("migrating", blocking_timeout=0)
    assert theirs.acquire(blocking=False)

    def take_and_release() -> bool:
        taken = ours.acquire()
        ours.release()
        return taken

    assert Tasks.run(take_and_release) is True
    theirs.release()


def test_django_lock_raises_redis_pys_errors(cache: object) -> None:
    holder = redlease.compat.django_lock("busy")
    assert holder.acquire()
    waiter = redlease.compat.django_lock("busy", blocking_timeout=0.1)
    with pytest.raises(redis.exceptions.LockError):
        Tasks.run(lambda: waiter.__enter__())
    holder.release()


def test_django_lock_refuses_a_cache_that_is_not_django_redis(cache: object) -> None:
    with pytest.raises(TypeError, match="django-redis"):
        redlease.compat.django_lock("x", cache=object())


class NoClient(DefaultClient):  # type: ignore[misc]
    """A django-redis client class with neither one client nor a hash ring (as a custom
    CLIENT_CLASS may be): django_lock must say so, not raise a bare NotImplementedError."""

    def get_client(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError


def test_django_lock_on_a_sharded_cache_lives_where_cache_lock_puts_it(
    cache: object, make_server: Any
) -> None:
    servers = [make_server(), make_server()]
    location = [f"redis://{s.host}:{s.port}/0" for s in servers]
    sharded = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": location,
               "OPTIONS": {"CLIENT_CLASS": "django_redis.client.ShardClient"}}  # fmt: skip
    no_client = {"CLIENT_CLASS": f"{__name__}.NoClient"}
    custom = {**sharded, "LOCATION": location[0], "OPTIONS": no_client}
    with override_settings(CACHES={"default": sharded, "custom": custom}):
        backend = caches["default"]
        clients = [redis.Redis.from_url(url) for url in location]  # to look for its keys
        used = {}
        for key in [f"job-{i}" for i in range(8)] + ["{user:1}a", "{user:1}b"]:
            lock = redlease.compat.django_lock(key, blocking_timeout=0)
            assert lock.redis is backend.lock(key).redis  # django-redis's own placement
            other = redlease.compat.django_lock(key, cache=backend, blocking_timeout=0)
            with lock:
                assert Tasks.run(other.acquire) is False
                holding = [bool(c.keys(f"*{lock.name}*")) for c in clients]
                assert sorted(holding) == [False, True]  # its keys on one server, the ring's
            used[id(lock.redis)] = lock.redis
        assert len(used) == 2  # (ten names over two servers: both take some)
        with pytest.raises(TypeError, match=r"get_client\(\) is not implemented"):
            redlease.compat.django_lock("x", cache="custom")
    for client in [*clients, *used.values()]:
        redlease.close(client)
