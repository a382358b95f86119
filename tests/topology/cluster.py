"""A Redis Cluster on 127.0.0.1: N masters with M replicas each, joined with redis-py.

The cluster is joined with redis-py commands (``CLUSTER SET-CONFIG-EPOCH``, ``ADDSLOTSRANGE``,
``MEET``, ``REPLICATE``), not ``redis-cli --cluster create``: no second binary to find, no
fixed one-second polls, no interactive prompt, no output to parse, and a failure names the node
and the command that failed. Nodes use a short ``cluster-node-timeout`` and
``cluster-replica-validity-factor 0`` (a replica may always be promoted, however long its link
was down), so a failover takes ~2-3 s.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import redis
import redis.asyncio.cluster
import redis.cluster

from redlease.server import HOST, START_ATTEMPTS, ServerStartError, find_server_binary, free_port
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
from tests.topology.cluster_nodes import SLOTS, ClusterNodeInfo, cluster_nodes, key_slot, owns
from tests.topology.server import RedisServer, binary_version

__all__ = ["RedisClusterServers"]


class RedisClusterServers:
    """A Redis Cluster of ``masters`` shards with ``replicas_per_master`` replicas each.

    Slots are split evenly between the first ``masters`` nodes at start-up; roles change
    after failovers, so :attr:`masters`, :attr:`replicas` and :meth:`master_of` ask the
    cluster each time. Every node also has a fixed ``cluster-port`` (its bus port), since
    ``port + 10000`` may be above 65535 for the ephemeral ports servers get here.
    """

    def __init__(
        self,
        *,
        masters: int = 3,
        replicas_per_master: int = 1,
        node_timeout_ms: int = 1000,
        binary: str | None = None,
        config: dict[str, str] | None = None,
    ) -> None:
        """Configure (not start) the cluster; ``config`` is added to every node's config."""
        if masters < 1:
            raise ValueError(f"masters must be >= 1, got {masters!r}")
        if replicas_per_master < 0:
            raise ValueError(f"replicas_per_master must be >= 0, got {replicas_per_master!r}")
        if node_timeout_ms < 100:
            raise ValueError(f"node_timeout_ms must be >= 100, got {node_timeout_ms!r}")
        self._n_masters = masters
        self._n_replicas = replicas_per_master
        self._node_timeout_ms = node_timeout_ms
        self._binary = binary
        self._extra = dict(config or {})
        self._servers: list[RedisServer] = []
        self._bus_ports: list[int] = []  # cluster-port of each server, same order
        self._ids: dict[int, str] = {}  # port -> node id (stable for a node's lifetime)
        self.startup_seconds: float | None = None
        """Wall time of the last :meth:`start` (processes, join, sync), for reports."""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> RedisClusterServers:
        """Start all nodes in parallel, join them, and wait until healthy; returns self."""
        if self._servers:
            return self
        began = time.monotonic()
        binary = self._binary or find_server_binary()
        version, what = binary_version(binary)
        if version is not None and version < (7, 0):  # no cluster-port setting before 7.0
            raise ServerStartError(
                f"a Redis Cluster here needs Redis >= 7.0 (redlease needs sharded pub/sub on "
                f"a Cluster): {what}"
            )
        total = self._n_masters * (1 + self._n_replicas)
        for attempt in range(1, START_ATTEMPTS + 1):
            # A node's bus port is chosen free, but another process (a second test worker
            # starting its own cluster) may take it before the node binds it: start afresh.
            configs = [self._node_config() for _ in range(total)]
            self._servers = [RedisServer(binary=binary, config=conf) for conf in configs]
            self._bus_ports = [int(conf["cluster-port"]) for conf in configs]
            LIVE.add(self)
            try:
                parallel(srv.start for srv in self._servers)
            except RuntimeError as exc:
                self.close()
                if "already in use" not in str(exc) or attempt == START_ATTEMPTS:
                    raise
                continue
            except BaseException:
                self.close()
                raise
            break
        try:
            self._join()
            self.wait_healthy()
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def close(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL) and remove their directories."""
        servers, self._servers = self._servers, []
        parallel(srv.stop for srv in servers)
        self._ids.clear()
        LIVE.discard(self)

    def __enter__(self) -> RedisClusterServers:
        """Start the cluster."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the cluster."""
        self.close()

    def __repr__(self) -> str:
        """Show ports and running state."""
        return f"<RedisClusterServers {[srv for srv in self._servers]}>"

    # -- topology ----------------------------------------------------------------------------

    @property
    def nodes(self) -> list[RedisServer]:
        """Every node, in start order (the first ``masters`` were the masters at start-up)."""
        return list(self._servers)

    @property
    def masters(self) -> list[RedisServer]:
        """Running nodes that are masters owning slots now, by lowest slot."""
        view = self._view()
        owners = sorted(
            (info.slots[0][0], info.port)
            for info in view.values()
            if info.is_master and info.slots and not info.failed
        )
        return [self._server_on(port) for _, port in owners]

    @property
    def replicas(self) -> list[RedisServer]:
        """Running nodes that are replicas now."""
        return [
            self._server_on(info.port)
            for info in self._view().values()
            if "slave" in info.flags and not info.failed
        ]

    def node_id(self, server: RedisServer) -> str:
        """The cluster node id of ``server``."""
        try:
            return self._ids[server.port]
        except KeyError:
            raise ValueError(f"server {server!r} is not a node of this cluster") from None

    def master_of(self, slot_or_key: int | str | bytes) -> RedisServer:
        """The master that owns a slot (an int) or a key's slot (str/bytes), as seen now."""
        slot = self._slot(slot_or_key)
        for info in self._view().values():
            if info.is_master and not info.failed and owns(info, slot):
                return self._server_on(info.port)
        raise TopologyError(f"no live master owns slot {slot}")

    def replicas_of(self, master: RedisServer) -> list[RedisServer]:
        """The running replicas of ``master``."""
        master_id = self.node_id(master)
        return [
            self._server_on(info.port)
            for info in self._view().values()
            if info.master_id == master_id and not info.failed
        ]

    # -- clients -----------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A sync ``RedisCluster`` knowing every node as a start-up node; kwargs pass through."""
        nodes = [
            redis.cluster.ClusterNode(HOST, srv.port)  # type: ignore[no-untyped-call]
            for srv in self._servers
        ]
        return redis.cluster.RedisCluster(startup_nodes=nodes, **kwargs)

    def async_client(self, **kwargs: Any) -> redis.asyncio.cluster.RedisCluster:
        """An asyncio ``RedisCluster`` knowing every node as a start-up node."""
        nodes = [redis.asyncio.cluster.ClusterNode(HOST, srv.port) for srv in self._servers]
        return redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **kwargs)

    def flushall(self) -> None:
        """FLUSHALL on every master (replicas follow)."""
        for srv in self.masters:
            with probe(srv.port) as conn:
                conn.flushall()

    # -- faults ------------------------------------------------------------------------------

    def kill_master_of(
        self, slot_or_key: int | str | bytes, *, timeout: float = FAILOVER_TIMEOUT
    ) -> tuple[RedisServer, RedisServer, float]:
        """SIGKILL the master of a slot/key and wait until a replica of it owns the slot.

        Returns ``(killed, promoted, seconds)``: ``seconds`` is the time from the kill until
        every live node agrees on the new owner and reports ``cluster_state:ok``. The killed
        node stays down until :meth:`heal`.
        """
        slot = self._slot(slot_or_key)
        old = self.master_of(slot)
        if not self.replicas_of(old):
            raise TopologyError(f"master {old!r} of slot {slot} has no replica to promote")
        old_id = self.node_id(old)
        began = time.monotonic()
        old.kill()

        def promoted() -> RedisServer | None:
            owners = set()
            for srv in self._running():
                with probe(srv.port) as conn:
                    if conn.cluster("INFO")["cluster_state"] != "ok":
                        return None
                for info in cluster_nodes(srv.port).values():
                    if info.is_master and not info.failed and owns(info, slot):
                        owners.add(info.node_id)
            if len(owners) != 1 or old_id in owners:
                return None
            return self._server_with_id(owners.pop())

        new = poll(f"a replica to take over slot {slot} from {old!r}", promoted, timeout)
        return old, new, time.monotonic() - began

    def failover_to(self, replica: RedisServer, *, timeout: float = FAILOVER_TIMEOUT) -> None:
        """Graceful ``CLUSTER FAILOVER`` on ``replica`` (it becomes master of its shard)."""
        poll(
            f"{replica!r} to be synced",
            lambda: True if replica_synced(replica.port) else None,
            timeout,
        )
        with probe(replica.port) as conn:
            conn.execute_command("CLUSTER FAILOVER")
        my_id = self.node_id(replica)

        def everyone_sees_it() -> bool | None:
            # Every node's view, not only its own: the old master learns it last, and a view
            # that still shows the old master can pass wait_healthy (it is consistent).
            for srv in self._running():
                if not cluster_nodes(srv.port)[my_id].is_master:
                    return None
            return True

        poll(f"every node to see {replica!r} as master", everyone_sees_it, timeout)
        self.wait_healthy(timeout=timeout)

    def heal(self, *, timeout: float = READY_TIMEOUT) -> None:
        """Resume paused nodes, restart dead ones, and wait until the cluster is healthy.

        A node killed by :meth:`kill_master_of` restarts from its ``nodes.conf`` and rejoins
        as a replica of the master that replaced it. Cheap when nothing is wrong.
        """
        for srv in self._servers:
            if srv.paused:
                srv.resume()
        parallel(srv.start for srv in self._servers if not srv.running)
        self.wait_healthy(timeout=timeout)
        if self._balance_replicas():
            poll("every master to have a replica again", self._balanced, timeout)
            self.wait_healthy(timeout=timeout)

    def _orphans_and_spares(self) -> tuple[list[str], list[int]]:
        """Masters with no replica, and the ports of replicas beyond a master's first: after
        failovers a restarted node can rejoin under a master that has one already."""
        view = self._view()
        orphans, spares = [], []
        for master in (i for i in view.values() if i.is_master and i.slots and not i.failed):
            ports = [i.port for i in view.values() if i.master_id == master.node_id]
            if not ports and self._n_replicas:
                orphans.append(master.node_id)
            spares += ports[1:]
        return orphans, spares

    def _balance_replicas(self) -> bool:
        """Move spare replicas to masters left with none; True if any moved."""
        orphans, spares = self._orphans_and_spares()
        for orphan, port in zip(orphans, spares, strict=False):
            with probe(port) as conn:
                conn.execute_command("CLUSTER REPLICATE", orphan)
        return bool(orphans and spares)

    def _balanced(self) -> bool | None:
        orphans, spares = self._orphans_and_spares()
        return None if orphans and spares else True

    def wait_healthy(self, *, timeout: float = READY_TIMEOUT) -> None:
        """Wait until every node is up, agrees on all slots, and every replica is synced."""
        want_masters = self._n_masters
        total = len(self._servers)

        def healthy() -> bool | None:
            for srv in self._servers:
                with probe(srv.port) as conn:
                    if conn.cluster("INFO")["cluster_state"] != "ok":
                        return None
                view = cluster_nodes(srv.port)
                if len(view) != total or any(
                    info.failed or "handshake" in info.flags or "noaddr" in info.flags
                    for info in view.values()
                ):
                    return None
                owners = [info for info in view.values() if info.is_master and info.slots]
                if len(owners) != want_masters:
                    return None
                if sum(hi - lo + 1 for info in owners for lo, hi in info.slots) != SLOTS:
                    return None
                if "slave" in view[self._ids[srv.port]].flags and not replica_synced(srv.port):
                    return None
            return True

        poll("the cluster to be healthy (state ok, all slots, replicas synced)", healthy, timeout)

    # -- slot migration ----------------------------------------------------------------------

    def begin_migration(self, slot_or_key: int | str | bytes, target: RedisServer) -> int:
        """Mark a slot IMPORTING on ``target`` and MIGRATING on its owner; returns the slot.

        Between this and :meth:`finish_migration`, commands on keys still on the source are
        served there; keys already moved answer ``-ASK`` (clients retry on the target).
        """
        slot = self._slot(slot_or_key)
        source = self.master_of(slot)
        if source is target:
            raise ValueError(f"target {target!r} already owns slot {slot}")
        with probe(target.port) as conn:
            conn.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", self.node_id(source))
        with probe(source.port) as conn:
            conn.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", self.node_id(target))
        return slot

    def migrate_keys(self, slot: int, target: RedisServer, *, batch: int = 100) -> int:
        """MIGRATE every key of ``slot`` from its owner to ``target``; returns how many moved."""
        source = self.master_of(slot)
        moved = 0
        with probe(source.port) as conn:
            for _ in range(SLOTS):  # bounded: each round moves up to ``batch`` keys
                keys = conn.execute_command("CLUSTER GETKEYSINSLOT", slot, batch)
                if not keys:
                    break
                conn.execute_command(
                    "MIGRATE", HOST, target.port, "", 0, 5000, "REPLACE", "KEYS", *keys
                )
                moved += len(keys)
        return moved

    def finish_migration(self, slot: int, target: RedisServer) -> None:
        """Assign ``slot`` to ``target`` on the target, the source, then every other master."""
        source = self.master_of(slot)
        target_id = self.node_id(target)
        order = [target, source] + [srv for srv in self.masters if srv not in (target, source)]
        for srv in order:
            with probe(srv.port) as conn:
                conn.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        poll(
            f"every node to see slot {slot} on {target!r}",
            lambda: (
                True
                if all(self._owner_seen_by(srv.port, slot) == target_id for srv in self._running())
                else None
            ),
            READY_TIMEOUT,
        )

    def migrate_slot(self, slot_or_key: int | str | bytes, target: RedisServer) -> int:
        """Move a slot and its keys to ``target`` (begin, migrate keys, finish); returns it."""
        slot = self.begin_migration(slot_or_key, target)
        self.migrate_keys(slot, target)
        self.finish_migration(slot, target)
        return slot

    # -- internals ---------------------------------------------------------------------------

    def _node_config(self) -> dict[str, str]:
        return {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": str(self._node_timeout_ms),
            "cluster-replica-validity-factor": "0",
            "cluster-port": str(free_port()),
            "repl-diskless-sync-delay": "0",
            **self._extra,
        }

    def _join(self) -> None:
        """Assign slots and epochs, MEET everyone, then attach the replicas."""
        masters = self._servers[: self._n_masters]
        for srv in self._servers:
            with probe(srv.port) as conn:
                self._ids[srv.port] = str(conn.execute_command("CLUSTER MYID"))
        bounds = [SLOTS * i // len(masters) for i in range(len(masters) + 1)]
        for i, srv in enumerate(masters):
            with probe(srv.port) as conn:
                # Distinct epochs up front (as redis-cli does), so no epoch collision to resolve.
                conn.execute_command("CLUSTER SET-CONFIG-EPOCH", i + 1)
                conn.execute_command("CLUSTER ADDSLOTSRANGE", bounds[i], bounds[i + 1] - 1)
        first = self._servers[0]
        with probe(first.port) as conn:
            for srv, bus_port in zip(self._servers[1:], self._bus_ports[1:], strict=True):
                conn.execute_command("CLUSTER MEET", HOST, srv.port, bus_port)
        total = len(self._servers)

        def all_known() -> bool | None:
            for srv in self._servers:
                view = cluster_nodes(srv.port)
                if len(view) != total or any("handshake" in i.flags for i in view.values()):
                    return None
            return True

        poll(f"all {total} nodes to know each other", all_known, READY_TIMEOUT)
        for index, srv in enumerate(self._servers[self._n_masters :]):
            master = masters[index % len(masters)]
            with probe(srv.port) as conn:
                conn.execute_command("CLUSTER REPLICATE", self._ids[master.port])

    def _view(self) -> dict[str, ClusterNodeInfo]:
        """CLUSTER NODES from the first running node that answers."""
        for srv in self._running():
            try:
                return cluster_nodes(srv.port)
            except (redis.RedisError, OSError):
                continue
        raise TopologyError("no cluster node answers")

    def _owner_seen_by(self, port: int, slot: int) -> str | None:
        for info in cluster_nodes(port).values():
            if info.is_master and owns(info, slot):
                return info.node_id
        return None

    def _running(self) -> list[RedisServer]:
        return [srv for srv in self._servers if srv.running and not srv.paused]

    def _server_on(self, port: int) -> RedisServer:
        for srv in self._servers:
            if srv.port == port:
                return srv
        raise TopologyError(f"no node of ours listens on port {port}")

    def _server_with_id(self, node_id: str) -> RedisServer:
        for port, known in self._ids.items():
            if known == node_id:
                return self._server_on(port)
        raise TopologyError(f"unknown node id {node_id}")

    @staticmethod
    def _slot(slot_or_key: int | str | bytes) -> int:
        if isinstance(slot_or_key, int):
            if not 0 <= slot_or_key < SLOTS:
                raise ValueError(f"slot must be in [0, {SLOTS}), got {slot_or_key!r}")
            return slot_or_key
        return key_slot(slot_or_key)
