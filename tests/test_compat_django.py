"""django-redis users: the redlease.compat lock from a cache's client and from settings.

Real Django and django-redis (the ``django`` extra), configured in this process against the
test server with ``settings.configure(CACHES=...)``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

django = pytest.importorskip("django")
django_redis = pytest.importorskip("django_redis")

import redis.exceptions  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.cache import caches  # noqa: E402
from django.test import override_settings  # noqa: E402

import redlease  # noqa: E402
import redlease.compat  # noqa: E402
from redlease.server import RedisServer  # noqa: E402
from tests.support import Tasks  # noqa: E402


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
