"""A Sentinel group on 127.0.0.1: one master, its replicas, and the sentinels watching it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel

from redlease.server import HOST, find_server_binary
from tests.topology._common import (
    FAILOVER_TIMEOUT,
    LIVE,
    READY_TIMEOUT,
    TopologyError,
    parallel,
    poll,
    probe,
    replica_synced,
)
from tests.topology.server import RedisServer

__all__ = ["SentinelGroup"]

_SENTINEL_KWARGS = {"socket_timeout": 2.0, "socket_connect_timeout": 1.0}
"""Settings of the connections to the sentinels (not to the data servers)."""


class SentinelGroup:
    """A master, ``replicas`` replicas and ``sentinels`` Sentinels watching ``service``.

    Sentinels use ``down-after-milliseconds`` (default 1000) and a short failover timeout,
    so a killed master is replaced in a few seconds. Roles change after :meth:`failover`:
    :attr:`master` asks the sentinels each time.
    """

    def __init__(
        self,
        *,
        service: str = "mymaster",
        replicas: int = 2,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        binary: str | None = None,
    ) -> None:
        """Configure (not start) the group; quorum is a majority of the sentinels."""
        if not service or not service.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"service must be a non-empty word, got {service!r}")
        if replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {replicas!r}")
        if sentinels < 1:
            raise ValueError(f"sentinels must be >= 1, got {sentinels!r}")
        self.service = service
        """The name the sentinels monitor the master under."""
        self._n_replicas = replicas
        self._n_sentinels = sentinels
        self._down_after_ms = down_after_ms
        self._failover_timeout_ms = failover_timeout_ms
        self._binary = binary
        self._data: list[RedisServer] = []
        self._sentinels: list[RedisServer] = []
        self.startup_seconds: float | None = None
        """Wall time of the last :meth:`start`, for reports."""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> SentinelGroup:
        """Start master, then replicas and sentinels in parallel; wait until all agree."""
        if self._data:
            return self
        began = time.monotonic()
        binary = self._binary or find_server_binary()
        repl = {"repl-diskless-sync-delay": "0"}
        master = RedisServer(binary=binary, config=repl)
        self._data = [master]
        LIVE.add(self)
        try:
            master.start()
            self._data += [
                RedisServer(binary=binary, config={**repl, "replicaof": f"{HOST} {master.port}"})
                for _ in range(self._n_replicas)
            ]
            name = self.service
            sentinel_conf = {
                "sentinel monitor": f"{name} {HOST} {master.port} {self._n_sentinels // 2 + 1}",
                "sentinel down-after-milliseconds": f"{name} {self._down_after_ms}",
                "sentinel failover-timeout": f"{name} {self._failover_timeout_ms}",
                "sentinel parallel-syncs": f"{name} {self._n_replicas}",
            }
            self._sentinels = [
                RedisServer(binary=binary, config=sentinel_conf, sentinel=True)
                for _ in range(self._n_sentinels)
            ]
            # Replicas synced before the sentinels start: a sentinel learns replicas from the
            # master's INFO, which it refreshes only every 10 s after the first one.
            parallel(srv.start for srv in self._data[1:])
            poll(
                "the replicas to sync",
                lambda: True if all(replica_synced(srv.port) for srv in self._data[1:]) else None,
                READY_TIMEOUT,
            )
            parallel(srv.start for srv in self._sentinels)
            self.wait_healthy()
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def close(self) -> None:
        """Stop sentinels first (so they do not fail over a stopping master), then the data."""
        sentinels, self._sentinels = self._sentinels, []
        data, self._data = self._data, []
        parallel(srv.stop for srv in sentinels)
        parallel(srv.stop for srv in data)
        LIVE.discard(self)

    def __enter__(self) -> SentinelGroup:
        """Start the group."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the group."""
        self.close()

    # -- topology ----------------------------------------------------------------------------

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every sentinel, as ``redis.sentinel.Sentinel`` takes them."""
        return [(HOST, srv.port) for srv in self._sentinels]

    @property
    def sentinel_servers(self) -> list[RedisServer]:
        """The sentinel processes."""
        return list(self._sentinels)

    @property
    def data_servers(self) -> list[RedisServer]:
        """Master and replicas, in start order (the first was the master at start-up)."""
        return list(self._data)

    @property
    def master(self) -> RedisServer:
        """The data server the sentinels currently name as master."""
        port = self._agreed_master_port()
        if port is None:
            raise TopologyError(f"the sentinels do not agree on a master for {self.service!r}")
        return self._server_on(port)

    @property
    def replicas(self) -> list[RedisServer]:
        """Running data servers other than the current master."""
        master = self.master
        return [srv for srv in self._data if srv is not master and srv.running]

    # -- clients -----------------------------------------------------------------------------

    def sentinel(self, **kwargs: Any) -> redis.sentinel.Sentinel:
        """A sync ``Sentinel`` over all sentinels; kwargs are the data connections' settings.

        The sentinel connections themselves get short timeouts (``_SENTINEL_KWARGS``).
        """
        return redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            self.sentinel_addresses, sentinel_kwargs=dict(_SENTINEL_KWARGS), **kwargs
        )

    def async_sentinel(self, **kwargs: Any) -> redis.asyncio.sentinel.Sentinel:
        """An asyncio ``Sentinel`` over all sentinels; kwargs as for :meth:`sentinel`."""
        return redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            self.sentinel_addresses, sentinel_kwargs=dict(_SENTINEL_KWARGS), **kwargs
        )

    def master_for(self, **kwargs: Any) -> redis.Redis:
        """A sync client that follows the master: ``Sentinel(...).master_for(service)``."""
        client: redis.Redis = self.sentinel().master_for(  # type: ignore[no-untyped-call]
            self.service, **kwargs
        )
        return client

    def async_master_for(self, **kwargs: Any) -> redis.asyncio.Redis:
        """An asyncio client that follows the master."""
        client: redis.asyncio.Redis = self.async_sentinel().master_for(self.service, **kwargs)
        return client

    # -- faults ------------------------------------------------------------------------------

    def failover(
        self, *, kill: bool = True, timeout: float = FAILOVER_TIMEOUT
    ) -> tuple[RedisServer, RedisServer, float]:
        """Replace the master and wait until every sentinel names a new one that says master.

        ``kill=True`` SIGKILLs the master (the sentinels must notice, agree and elect: the
        realistic case); ``kill=False`` sends ``SENTINEL FAILOVER`` (immediate, no vote).
        Returns ``(old, new, seconds)`` once every sentinel reports ``new`` with no failover
        in progress (what ``master_for`` clients read), and ``new`` is the only master among
        the other data servers. A killed master stays down until :meth:`heal`; after
        ``kill=False`` the old master keeps answering as a master, to connections opened
        before, until the sentinels demote it (their next INFO of it, up to ~10 s) or
        :meth:`heal` / :meth:`wait_healthy` repoint it.

        On a loaded machine the sentinels sometimes promote one replica, give that attempt
        up, and promote another: the first stays a master (taking writes) until their next
        INFO of it, up to ~10 s later. It is repointed here, as the sentinels would do, so
        that the failover returned is one master, not two.
        """
        old = self.master
        began = time.monotonic()
        if kill:
            old.kill()
        else:
            with probe(self._sentinels[0].port) as conn:
                conn.execute_command("SENTINEL FAILOVER", self.service)

        def promoted() -> RedisServer | None:
            port = self._agreed_master_port()
            if port is None or port == old.port:
                return None
            with probe(port) as conn:
                if conn.info("replication").get("role") != "master":
                    return None
            return self._server_on(port)

        new = poll(f"the sentinels to promote a replica of {old!r}", promoted, timeout)
        self._repoint_strays(new.port, spare=old)
        return old, new, time.monotonic() - began

    def heal(self, *, timeout: float = READY_TIMEOUT) -> None:
        """Resume paused and restart dead servers, then wait until the group is healthy.

        A restarted old master comes up as an empty master; the sentinels turn it into a
        replica of the current master (that is what :meth:`wait_healthy` waits for).
        """
        for srv in self._data + self._sentinels:
            if srv.paused:
                srv.resume()
        parallel(srv.start for srv in self._data + self._sentinels if not srv.running)
        self.wait_healthy(timeout=timeout)

    def wait_healthy(self, *, timeout: float = READY_TIMEOUT) -> None:
        """Wait until all sentinels agree on the master, know every replica and each other,
        and every replica is synced to that master."""
        n_sentinels, n_replicas = len(self._sentinels), len(self._data) - 1

        def healthy() -> bool | None:
            port = self._agreed_master_port()
            if port is None:
                return None
            self._repoint_strays(port)
            with probe(port) as conn:
                info = conn.info("replication")
            if info.get("role") != "master" or info.get("connected_slaves") != n_replicas:
                return None
            for srv in self._data:
                if srv.port != port and not replica_synced(srv.port):
                    return None
            for srv in self._sentinels:
                # Split command names: raw replies, not redis-py's parsed shapes.
                with probe(srv.port) as conn:
                    replicas = conn.execute_command("SENTINEL", "REPLICAS", self.service)
                    others = conn.execute_command("SENTINEL", "SENTINELS", self.service)
                up = [r for r in map(_pairs, replicas) if "s_down" not in r["flags"]]
                if len(up) != n_replicas or len(others) != n_sentinels - 1:
                    return None
            return True

        poll(f"sentinel group {self.service!r} to be healthy", healthy, timeout)

    # -- internals ---------------------------------------------------------------------------

    def _repoint_strays(self, master_port: int, *, spare: RedisServer | None = None) -> None:
        """REPLICAOF the master on data servers that do not replicate it yet (but ``spare``).

        The sentinels would do the same, but only after their next INFO of that server, up
        to 10 s later: an old master that was restarted, or demoted by SENTINEL FAILOVER, or
        a replica promoted by a failover attempt they gave up.
        """
        for srv in self._data:
            if srv.port == master_port or srv is spare or not srv.running or srv.paused:
                continue
            with probe(srv.port) as conn:
                info = conn.info("replication")
                if info.get("role") != "slave" or info.get("master_port") != master_port:
                    conn.execute_command("REPLICAOF", HOST, master_port)

    def _agreed_master_port(self) -> int | None:
        """The master port every running sentinel reports, or None while they differ.

        Reads ``SENTINEL MASTER`` (what redis-py's ``discover_master`` reads, via SENTINEL
        MASTERS), not GET-MASTER-ADDR-BY-NAME: during a failover the leader already answers
        the latter with the promoted replica while its SENTINEL MASTER still shows the old
        master, so clients would be sent back there. A sentinel still failing over, or that
        sees the master down, also counts as "no agreement yet".
        """
        ports = set()
        for srv in self._sentinels:
            if not srv.running:
                continue
            with probe(srv.port) as conn:
                # Split command name: the raw reply, not redis-py's parsed shape.
                state = _pairs(conn.execute_command("SENTINEL", "MASTER", self.service))
            flags = set(str(state["flags"]).split(","))
            if flags & {"failover_in_progress", "s_down", "o_down"}:
                return None
            ports.add(int(state["port"]))
        return ports.pop() if len(ports) == 1 else None

    def _server_on(self, port: int) -> RedisServer:
        for srv in self._data:
            if srv.port == port:
                return srv
        raise TopologyError(f"no data server of ours listens on port {port}")


def _pairs(flat: Sequence[Any] | dict[str, Any]) -> dict[str, Any]:
    """A SENTINEL reply entry as a dict (RESP2 gives a flat list of name, value, ...)."""
    if isinstance(flat, dict):
        return flat
    return {str(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}
