"""The connection of the ``redlease`` subcommands: the URL (its topology) and the client.

:func:`parse_url` reads the topology from the URL, so that one string says everything (a
demo passes it to its worker processes); :func:`make_client` builds the client it names;
:func:`unavailable` is the one-line error when Redis could not be used. URLs in messages
go through :func:`redact`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import redis
import redis.connection
import redis.exceptions
import redis.sentinel
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from redis.retry import Retry

import redlease

from ._common import EX_UNAVAILABLE, URL_ENV, CliError

__all__ = [
    "CLUSTER_SCHEMES",
    "SENTINEL_SCHEMES",
    "Client",
    "Target",
    "check_connection",
    "close_client",
    "make_async_client",
    "make_client",
    "parse_url",
    "redact",
    "resolve_url",
    "tls_url",
    "topology_url",
    "unavailable",
]


def redact(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, fit for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, hosts = netloc.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if not at or not colon:
        return url
    return f"{scheme}://{user}:***@{hosts}{tail}"


def resolve_url(explicit: str | None, *, default: str | None) -> str | None:
    """The URL to use: ``--url``, else ``$REDLEASE_URL`` (if not empty), else ``default``."""
    if explicit:
        return explicit
    return os.environ.get(URL_ENV) or default


# The topology is part of the URL, so that one string says everything (a demo passes it to
# its worker processes): redis:// rediss:// unix:// (one server, or a Sentinel master's
# settings), redis+cluster:// rediss+cluster:// (any node of a Redis Cluster) and
# redis+sentinel:// rediss+sentinel:// (the sentinels, then the service). --cluster and
# --sentinel/--service are written into this form by the parser.

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
_TLS_OPTIONS = {"tls_ca_cert": "ssl_ca_certs", "tls_cert": "ssl_certfile", "tls_key": "ssl_keyfile"}
"""``--tls-*`` options -> the redis-py connection setting (URL query parameter) they set."""
_SENTINEL_ONLY = ("sentinel_username", "sentinel_password")
"""Query parameters of a Sentinel URL that are for the sentinels, not for the master."""

Client = redis.Redis | RedisCluster
"""What :func:`make_client` returns: a server's (or Sentinel master's) client, or a cluster's."""


@dataclass(frozen=True)
class Target:
    """A parsed connection URL: the topology and how to reach it (see :func:`parse_url`)."""

    topology: str
    """``"server"``, ``"cluster"`` or ``"sentinel"``."""
    url: str
    """A redis-py URL: the server, a node of the cluster, or (Sentinel) the master's settings
    with a placeholder host."""
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    sentinel_kwargs: tuple[tuple[str, str], ...] = ()


def parse_url(url: str) -> Target:
    """What ``url`` names; ``ValueError`` saying what is wrong with it (nothing is sent).

    * ``redis://``, ``rediss://``, ``unix://``: one server (redis-py's forms);
    * ``redis+cluster://[[user]:password@]host:port[?...]``: any node of a Redis Cluster
      (``rediss+cluster://`` for TLS);
    * ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?...]``: the
      master a group of sentinels names for ``service`` (``rediss+sentinel://``: TLS to the
      sentinels and the master, with the same certificates). The user and password are the
      master's; ``?sentinel_username=...&sentinel_password=...`` are the sentinels'.

    Query parameters go to redis-py's connections as its ``from_url`` passes them, e.g.
    ``?ssl_ca_certs=ca.pem&ssl_certfile=client.pem&ssl_keyfile=client.key`` for a client
    certificate (TLS schemes only), ``?socket_timeout=10``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a URL (no scheme://): {redact(url)!r}")
    scheme = scheme.lower()
    tls = scheme.startswith("rediss")
    query = urlsplit(url).query
    for name in parse_qs(query):
        if name.startswith("ssl_") and not tls:
            raise ValueError(f"{name} is a TLS setting: use a rediss:// URL ({redact(url)})")
    if scheme in CLUSTER_SCHEMES:
        return Target("cluster", ("rediss" if tls else "redis") + "://" + rest)
    if scheme in SENTINEL_SCHEMES:
        return _sentinel_target(url, rest, tls, query)
    if scheme not in ("redis", "rediss", "unix"):
        raise ValueError(
            f"unknown URL scheme {scheme + '://'!r}: use redis://, rediss://, unix://, "
            "redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://"
        )
    return Target("server", url)


def _sentinel_target(url: str, rest: str, tls: bool, query: str) -> Target:
    netloc, _, path = rest.partition("/")
    path = path.partition("?")[0].partition("#")[0]
    userinfo, at, hosts = netloc.rpartition("@")
    sentinels = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        host = host.strip("[]")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"a sentinel must be host:port, got {item!r} in {redact(url)}")
        sentinels.append((host, int(port)))
    service, _, db = path.partition("/")
    if not service:
        raise ValueError(f"no service name: redis+sentinel://HOST:PORT/SERVICE ({redact(url)})")
    if db and not db.isdigit():
        raise ValueError(f"the database after the service must be a number, got {db!r}")
    pairs = parse_qsl(query, keep_blank_values=True)
    master_query = urlencode([(k, v) for k, v in pairs if k not in _SENTINEL_ONLY])
    sentinel_kwargs = tuple(
        (k.removeprefix("sentinel_"), v) for k, v in pairs if k in _SENTINEL_ONLY
    )
    master = f"{'rediss' if tls else 'redis'}://{userinfo}{at}127.0.0.1/{db or 0}"
    master += f"?{master_query}" if master_query else ""
    return Target("sentinel", master, tuple(sentinels), unquote(service), sentinel_kwargs)


def _connection_kwargs(target: Target) -> dict[str, Any]:
    """The master's connection settings of a Sentinel target (host and class left out)."""
    kwargs = dict(redis.connection.parse_url(target.url))  # type: ignore[no-untyped-call]
    for name in ("host", "port", "connection_class"):
        kwargs.pop(name, None)
    if target.url.startswith("rediss://"):
        kwargs["ssl"] = True
    return kwargs


def _sentinel_kwargs(target: Target, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The sentinels' settings: the master's timeouts and TLS, their own credentials."""
    own = {k: v for k, v in kwargs.items() if k.startswith(("socket_", "ssl"))}
    return {**own, **dict(target.sentinel_kwargs)}


def make_client(url: str, *, timeout: float = 5.0) -> Client:
    """A sync client for ``url`` (any form :func:`parse_url` accepts); ``ValueError`` if the
    URL is malformed.

    A server's or Sentinel master's client sends nothing yet; a cluster client asks a node
    for the map of slots at once (:class:`CliError`, exit 69, if none answers).

    Client-side retries are off, and connecting and each reply are limited to ``timeout``
    seconds (unless the URL's query says otherwise, e.g. ``?socket_timeout=10``): a command
    line tool should fail fast, and a lock's watchdog must not hang on a dead server.
    """
    target = parse_url(url)
    settings: dict[str, Any] = {
        "socket_connect_timeout": timeout,
        "socket_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    if target.topology == "sentinel":
        kwargs = {**settings, **_connection_kwargs(target)}
        kwargs.pop("retry")
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            target.sentinels, sentinel_kwargs=_sentinel_kwargs(target, kwargs), **kwargs
        )
        client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
            target.service, retry=Retry(NoBackoff(), 0)
        )
        return client
    if target.topology == "cluster":
        try:
            return RedisCluster.from_url(target.url, **settings)
        except RedisClusterException as exc:
            if "db" in str(exc):  # "Argument 'db' is not possible to use in cluster mode"
                raise ValueError(f"a cluster has no databases: {exc}") from None
            raise unavailable(url, exc) from exc
        except (redis.RedisError, OSError) as exc:
            raise unavailable(url, exc) from exc
    return redis.Redis.from_url(target.url, **settings)


def make_async_client(url: str, *, connect_timeout: float = 5.0, timeout: float = 10.0) -> Any:
    """An asyncio client for ``url`` (as :func:`make_client`, for the demo's processes):
    ``redis.asyncio.Redis``, a Sentinel master's, or ``redis.asyncio.cluster.RedisCluster``."""
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.asyncio.retry
    import redis.asyncio.sentinel

    target = parse_url(url)
    settings: dict[str, Any] = {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": timeout,
    }
    retry = redis.asyncio.retry.Retry(NoBackoff(), 0)
    if target.topology == "sentinel":
        kwargs = {**settings, **_connection_kwargs(target)}
        sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            target.sentinels, sentinel_kwargs=_sentinel_kwargs(target, kwargs), **kwargs
        )
        return sentinel.master_for(target.service, retry=retry)
    if target.topology == "cluster":
        return redis.asyncio.cluster.RedisCluster.from_url(target.url, retry=retry, **settings)
    return redis.asyncio.Redis.from_url(target.url, retry=retry, **settings)


def close_client(client: Client) -> None:
    """Close ``client``, and for a Sentinel master's client the sentinels' connections too."""
    client.close()
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    for sentinel in getattr(manager, "sentinels", ()):
        sentinel.close()


def topology_url(url: str, *, cluster: bool, sentinels: Sequence[str], service: str | None) -> str:
    """``url`` with ``--cluster`` or ``--sentinel``/``--service`` written into it (see
    :func:`parse_url`); ``ValueError`` naming the option when they do not fit together."""
    if sentinels or service:
        if cluster:
            raise ValueError("--cluster and --sentinel name different topologies: choose one")
        if not sentinels or not service:
            raise ValueError("--sentinel HOST:PORT and --service NAME go together")
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss") or parts.hostname:
            raise ValueError(
                "with --sentinel, --url gives only the master's settings, without a host "
                "(e.g. rediss://:PASSWORD@/0), or is left out"
            )
        userinfo = parts.netloc.rpartition("@")[0]
        db = parts.path.strip("/")
        return urlunsplit(
            (
                parts.scheme + "+sentinel",
                (userinfo + "@" if userinfo else "") + ",".join(sentinels),
                f"/{quote(service, safe='')}" + (f"/{db}" if db else ""),
                parts.query,
                "",
            )
        )
    if cluster:
        scheme, sep, rest = url.partition("://")
        if scheme.lower() not in ("redis", "rediss") or not sep:
            raise ValueError(
                f"--cluster needs a redis:// or rediss:// URL of a node, got {scheme}://"
            )
        return f"{scheme.lower()}+cluster://{rest}"
    return url


def tls_url(url: str, options: dict[str, str | None]) -> str:
    """``url`` with the ``--tls-*`` options added as its query parameters (they win over the
    same parameters already there); ``ValueError`` if ``url`` does not use TLS."""
    given = {_TLS_OPTIONS[k]: v for k, v in options.items() if v is not None}
    if not given:
        return url
    parts = urlsplit(url)
    if not parts.scheme.lower().startswith("rediss"):
        named = ", ".join("--" + k.replace("_", "-") for k, v in options.items() if v)
        raise ValueError(f"{named}: TLS options need a rediss:// URL, got {parts.scheme}://")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in given]
    return urlunsplit(parts._replace(query=urlencode([*query, *given.items()])))


def check_connection(client: Client, url: str) -> None:
    """PING through ``client``; :class:`CliError` (exit 69) naming the URL if that fails."""
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise unavailable(url, exc) from exc


def unavailable(url: str, exc: BaseException) -> CliError:
    """The error to report when Redis at ``url`` could not be reached or failed."""
    cause = exc.__cause__ if isinstance(exc, redlease.LockUnavailable) else None
    detail = str(cause or exc) or type(exc).__name__
    if isinstance(cause or exc, redis.sentinel.MasterNotFoundError):  # drop the client dump
        detail = (
            detail.split(" : ", 1)[0] + " (no sentinel answered, or none knows that --service name)"
        )
    elif isinstance(cause or exc, redis.exceptions.AskError):  # MOVED too: a node of a cluster
        detail = (
            f"it is a node of a Redis Cluster (it answered MOVED {detail}): add --cluster, "
            "or use a redis+cluster:// URL"
        )
    return CliError(f"cannot use Redis at {redact(url)}: {detail}", EX_UNAVAILABLE)
