"""The client libraries a backend accepts (redis-py, valkey-py) and their errors as redis-py's.

A :class:`Flavor` holds the classes of one library that a backend builds its private pools
and clients from; :func:`check_client` refuses anything else; :func:`address_of` says where a
client's server is. Errors reach the primitives as
redis-py's exception classes for valkey-py clients too (:func:`translate`, the original
chained), so that they handle one family of errors. No I/O here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import redis.asyncio
import redis.asyncio.cluster
import redis.exceptions
from redis.exceptions import RedisError

from .._core.validate import CLIENT_APIS
from .._synchronization import AsyncShield

__all__ = [
    "AsyncSubscription",
    "Flavor",
    "address_of",
    "check_client",
    "cluster_flavor",
    "flavor_of",
    "redis_flavor",
    "translate",
]

_KINDS = (
    "redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster, valkey.asyncio.Valkey or "
    "valkey.asyncio.cluster.ValkeyCluster"
)
"""The clients this API accepts, for error messages."""


@dataclass(frozen=True)
class Flavor:
    """The classes of one client library (redis-py or valkey-py) that a backend needs."""

    library: str
    pool_class: Any
    client_class: Any
    retry_class: Any
    no_backoff: Any
    errors: tuple[type[BaseException], ...]
    connect_func: str  # the connection's keyword for its handshake callback


def flavor_of(client: Any) -> Flavor | None:
    """The library of ``client``, or None when it is not a client this API accepts."""
    if isinstance(client, redis.asyncio.Redis):
        return redis_flavor()
    valkey = sys.modules.get("valkey.asyncio")  # a valkey client implies valkey is imported
    if valkey is not None and isinstance(client, valkey.Valkey):
        return _valkey_flavor()
    return None


def redis_flavor() -> Flavor:
    from redis.backoff import NoBackoff

    return Flavor(
        library="redis",
        pool_class=redis.asyncio.ConnectionPool,
        client_class=redis.asyncio.Redis,
        retry_class=redis.asyncio.retry.Retry,
        no_backoff=NoBackoff,
        errors=(),
        connect_func="redis_connect_func",
    )


def _valkey_flavor() -> Flavor:
    import valkey.asyncio  # type: ignore[import-not-found, unused-ignore]
    import valkey.asyncio.retry  # type: ignore[import-not-found, unused-ignore]
    import valkey.exceptions  # type: ignore[import-not-found, unused-ignore]
    from valkey.backoff import NoBackoff  # type: ignore[import-not-found, unused-ignore]

    return Flavor(
        library="valkey",
        pool_class=valkey.asyncio.ConnectionPool,
        client_class=valkey.asyncio.Valkey,
        retry_class=valkey.asyncio.retry.Retry,
        no_backoff=NoBackoff,
        errors=(valkey.exceptions.ValkeyError,),
        connect_func="valkey_connect_func",
    )


def cluster_flavor(client: Any) -> Flavor | None:
    """The library of ``client`` if it is a cluster client (``RedisCluster`` or
    ``ValkeyCluster``), else None."""
    if isinstance(client, redis.asyncio.cluster.RedisCluster):
        return redis_flavor()
    valkey = sys.modules.get("valkey.asyncio.cluster")  # a cluster client implies the import
    if valkey is not None and isinstance(client, valkey.ValkeyCluster):
        return _valkey_flavor()
    return None


def check_client(client: Any, arg: str = "client", *, cluster: bool = True) -> None:
    """Refuse a client this API cannot use (a sync client here, or anything else; a Redis
    Cluster client too unless ``cluster``)."""
    if cluster_flavor(client) is not None:
        if cluster:
            return
        raise TypeError(
            f"{arg} must be the client of one server, not of a Redis Cluster (Redlock needs "
            "independent servers; on a Cluster, use Lock)"
        )
    if flavor_of(client) is None:
        raise TypeError(
            f"{arg} must be a {_KINDS}, got {type(client).__module__}."
            f"{type(client).__qualname__} ({CLIENT_APIS})"
        )


def address_of(client: Any) -> str:
    """Where ``client``'s server is, for logs: ``host:port`` (or the socket path, or the
    Sentinel service) and the database."""
    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    service = getattr(pool, "service_name", None)  # a Sentinel pool: no host of its own
    if service:
        where = f"sentinel service {service!r}"
    else:
        where = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port')}"
    return f"{where}/{kwargs.get('db', 0) or 0}"


def translate(exc: BaseException) -> RedisError:
    """The redis-py exception of the same kind as ``exc`` (a valkey-py exception)."""
    for cls in type(exc).__mro__:
        name = "RedisError" if cls.__name__ == "ValkeyError" else cls.__name__
        target = getattr(redis.exceptions, name, None)
        if isinstance(target, type) and issubclass(target, RedisError):
            return target(*exc.args)
    return RedisError(str(exc))


class AsyncSubscription:
    """A client library's PubSub, raising redis-py's exception classes: each call runs within
    ``translated()`` (its backend's translation, which also logs outages)."""

    def __init__(self, pubsub: Any, translated: Callable[[], AbstractContextManager[None]]) -> None:
        self._pubsub = pubsub
        self._translated = translated

    async def subscribe(self, *channels: bytes) -> None:
        with self._translated():
            await AsyncShield.apart(lambda: self._pubsub.subscribe(*channels))

    async def get_message(self, timeout: float) -> Any:
        with self._translated():
            return await self._pubsub.get_message(timeout=timeout)

    async def aclose(self) -> None:
        """Close the subscription and its private pool."""
        try:
            with self._translated():
                await self._pubsub.aclose()
        finally:
            await self._pubsub.connection_pool.disconnect()
