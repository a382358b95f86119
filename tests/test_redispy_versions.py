"""redlease._redispy_versions against real servers, on whichever redis-py is installed.

CI runs this file on the newest redis-py and on the declared minimum (see .ci/run). Each shim
has a twin that shows the redis-py behaviour it bridges on the installed version.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import redis.asyncio
from redis.exceptions import TimeoutError

import redlease._redispy_versions as versions
from redlease._redispy_versions import (
    DEFAULT_SOCKET_TIMEOUT,
    REDIS_FLOOR,
    AsyncConnections,
    Connections,
)
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)

SLACK = 3.0
"""A promised bound, with generous slack for a loaded machine (the reads wait 0.3 s)."""

INSTALLED = tuple(int(x) for x in re.findall(r"\d+", redis.__version__)[:2])


# -- the supported range --------------------------------------------------------------------
def test_floor_matches_pyproject() -> None:
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    declared = re.search(r'"redis>=([0-9.]+)', text)
    assert declared is not None, "pyproject.toml declares no redis>= floor"
    assert tuple(int(x) for x in declared.group(1).split(".")) == REDIS_FLOOR


def test_installed_redis_is_accepted() -> None:
    assert versions.redis_version_error() is None
    versions.check_redis_version()


@pytest.mark.parametrize("version", ["5.0.1", "5.3.1", "7.4.1", "8.1.0", "10.0.0b1", "dev"])
def test_supported_versions_are_accepted(version: str) -> None:
    assert versions.redis_version_error(version) is None


@pytest.mark.parametrize("version", ["5.0.0", "4.6.0", "3.5.3", "5.0.0rc2"])
def test_older_versions_are_refused_with_what_to_install(version: str) -> None:
    error = versions.redis_version_error(version)
    assert error is not None
    assert f"redis {version} is installed" in error
    assert "pip install 'redis>=5.0.1'" in error


def test_check_refuses_an_old_redis_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis, "__version__", "5.0.0")
    with pytest.raises(ImportError, match=r"redlease needs redis-py >= 5\.0\.1"):
        versions.check_redis_version()


# -- sync ---------------------------------------------------------------------------------------
def test_sync_round_trip_and_nil(server: RedisServer) -> None:
    client = server.client(db=3)  # the private pool keeps the client's settings
    pool = Connections.private_pool(client.connection_pool)
    try:
        conn = Connections.get(pool)
        try:
            Connections.send(conn, "SET", "compat:k", "v")
            assert Connections.read(conn, 1.0) == b"OK"
            Connections.send(conn, "GET", "compat:missing")
            assert Connections.read(conn, 1.0) is None  # a real nil, read in time
            Connections.send(conn, "GET", "compat:k")
            assert Connections.read(conn, None) == b"v"
            # the client's own socket timeout is back after a timed read
            assert conn._sock.gettimeout() == conn.socket_timeout
        finally:
            Connections.release(pool, conn)
        assert client.get("compat:k") == b"v"
        assert server.client(db=0).get("compat:k") is None
    finally:
        client.delete("compat:k")
        pool.disconnect()
        client.close()


def test_sync_get_asks_each_pool_the_way_it_wants(server: RedisServer) -> None:
    pool = Connections.private_pool(server.client().connection_pool)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # 5.3+ warns when given a command name
            conn = Connections.get(pool)
        Connections.release(pool, conn)
        # the twin: what redlease used to do, on this redis-py
        if INSTALLED < (5, 3):
            with pytest.raises(TypeError):
                pool.get_connection()
        else:
            with pytest.warns(DeprecationWarning):
                Connections.release(pool, pool.get_connection("EVALSHA"))
    finally:
        pool.disconnect()


def test_sync_private_pool_never_retries_and_takes_a_deadline(server: RedisServer) -> None:
    client = server.client(socket_timeout=7.0)
    timed = Connections.private_pool(client.connection_pool, 0.25)
    plain = Connections.private_pool(client.connection_pool)
    try:
        conn = timed.make_connection()
        assert conn.retry._retries == 0
        assert (conn.socket_timeout, conn.socket_connect_timeout) == (0.25, 1.0)
        assert plain.make_connection().socket_timeout == 7.0
        if INSTALLED >= (6, 0):  # the twin: the client's own connections retry
            assert client.connection_pool.make_connection().retry._retries > 0
    finally:
        timed.disconnect()
        plain.disconnect()
        client.close()


def test_sync_private_pool_has_timeouts_even_when_the_client_has_none(server: RedisServer) -> None:
    client = server.client(socket_timeout=None, socket_connect_timeout=None)
    pool = Connections.private_pool(client.connection_pool)
    try:
        conn = pool.make_connection()
        assert conn.socket_timeout == conn.socket_connect_timeout == DEFAULT_SOCKET_TIMEOUT
        assert client.connection_pool.make_connection().socket_timeout is None  # the twin
    finally:
        pool.disconnect()
        client.close()


def test_sync_connecting_to_a_hung_server_is_bounded(
    make_server: Callable[..., RedisServer],
) -> None:
    """The connect handshake (CLIENT SETINFO) reads with the pool's socket timeout."""
    srv = make_server()
    client = srv.client()
    pool = Connections.private_pool(client.connection_pool, 0.3)
    try:
        srv.pause()
        start = time.monotonic()
        with pytest.raises((TimeoutError, redis.exceptions.ConnectionError)):
            Connections.get(pool)
        assert time.monotonic() - start < 0.3 + SLACK
    finally:
        srv.resume()
        pool.disconnect()
        client.close()


def test_sync_read_times_out_on_a_hung_server(make_server: Callable[..., RedisServer]) -> None:
    srv = make_server()
    client = srv.client()  # socket_timeout None before redis-py 8: a plain read would hang
    pool = Connections.private_pool(client.connection_pool)
    try:
        conn = Connections.get(pool)  # connected (and handshaken) before the server hangs
        srv.pause()
        Connections.send(conn, "GET", "compat:k")
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            Connections.read(conn, 0.3)
        assert 0.25 <= time.monotonic() - start < 0.3 + SLACK
        assert conn._sock is None  # redis-py disconnected it: nothing stale can be read later
        Connections.drop(conn)
        Connections.release(pool, conn)
        srv.resume()
        again = Connections.get(pool)  # reconnects
        Connections.send(again, "PING")
        assert Connections.read(again, 5.0) == b"PONG"
        Connections.release(pool, again)
    finally:
        srv.resume()
        pool.disconnect()
        client.close()


def test_sync_read_of_a_closed_connection_is_a_connection_error(server: RedisServer) -> None:
    pool = Connections.private_pool(server.client().connection_pool)
    try:
        conn = Connections.get(pool)
        Connections.drop(conn)
        with pytest.raises(redis.exceptions.ConnectionError):
            Connections.read(conn, 0.3)
        Connections.release(pool, conn)
    finally:
        pool.disconnect()


# -- asyncio ------------------------------------------------------------------------------------
async def test_async_round_trip_and_nil(server: RedisServer) -> None:
    client = redis.asyncio.Redis(host=server.host, port=server.port, db=3)
    pool = AsyncConnections.private_pool(client.connection_pool)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            conn = await AsyncConnections.get(pool)
        try:
            await AsyncConnections.send(conn, "SET", "compat:k", "v")
            assert await AsyncConnections.read(conn, 1.0) == b"OK"
            await AsyncConnections.send(conn, "GET", "compat:missing")
            assert await AsyncConnections.read(conn, 1.0) is None  # a real nil
            await AsyncConnections.send(conn, "GET", "compat:k")
            assert await AsyncConnections.read(conn, None) == b"v"
        finally:
            await AsyncConnections.release(pool, conn)
        assert await client.get("compat:k") == b"v"
        await client.delete("compat:k")
    finally:
        await pool.disconnect()
        await client.aclose()


async def test_async_private_pool_never_retries(server: RedisServer) -> None:
    client = redis.asyncio.Redis(host=server.host, port=server.port, socket_timeout=7.0)
    timed = AsyncConnections.private_pool(client.connection_pool, 0.25)
    try:
        conn = timed.make_connection()
        assert conn.retry._retries == 0
        assert isinstance(conn.retry, redis.asyncio.retry.Retry)  # not the sync one
        assert (conn.socket_timeout, conn.socket_connect_timeout) == (0.25, 1.0)
    finally:
        await timed.disconnect()
        await client.aclose()


async def test_async_connecting_to_a_hung_server_is_bounded(
    make_server: Callable[..., RedisServer],
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    pool = AsyncConnections.private_pool(client.connection_pool, 0.3)
    try:
        assert pool.make_connection().socket_timeout == 0.3
        srv.pause()
        start = time.monotonic()
        with pytest.raises((TimeoutError, redis.exceptions.ConnectionError)):
            await AsyncConnections.get(pool)
        assert time.monotonic() - start < 0.3 + SLACK
    finally:
        srv.resume()
        await pool.disconnect()
        await client.aclose()


async def test_async_read_times_out_on_a_hung_server(
    make_server: Callable[..., RedisServer],
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    pool = AsyncConnections.private_pool(client.connection_pool)
    try:
        conn = await AsyncConnections.get(pool)
        twin = await AsyncConnections.get(pool)
        srv.pause()
        # the twin: redis-py's own timed read answers None, as if the key were missing
        await twin.send_command("GET", "compat:k")
        assert await twin.read_response(timeout=0.3) is None
        await AsyncConnections.drop(twin)
        await AsyncConnections.release(pool, twin)

        await AsyncConnections.send(conn, "GET", "compat:k")
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            await AsyncConnections.read(conn, 0.3)
        assert 0.25 <= time.monotonic() - start < 0.3 + SLACK
        assert not conn.is_connected  # the cancelled read disconnected it: no stale reply
        start = time.monotonic()
        await AsyncConnections.drop(conn)  # does not wait for the hung server
        assert time.monotonic() - start < SLACK
        await AsyncConnections.release(pool, conn)
        srv.resume()
        again = await AsyncConnections.get(pool)
        await AsyncConnections.send(again, "PING")
        assert await AsyncConnections.read(again, 5.0) == b"PONG"
        await AsyncConnections.release(pool, again)
    finally:
        srv.resume()
        await pool.disconnect()
        await client.aclose()


async def test_the_shims_drive_a_valkey_py_pool_too(server: RedisServer) -> None:
    """valkey-py 6 (forked from redis-py 5.0) needs a command name and has no sync read timeout."""
    valkey = pytest.importorskip("valkey")
    avalkey = pytest.importorskip("valkey.asyncio")
    no_backoff = pytest.importorskip("valkey.backoff").NoBackoff

    client = valkey.Valkey(host=server.host, port=server.port)
    retry = pytest.importorskip("valkey.retry").Retry(no_backoff(), 0)
    pool = valkey.ConnectionPool(
        connection_class=client.connection_pool.connection_class,
        **versions.private_kwargs(client.connection_pool, retry, 0.5),
    )
    aclient = avalkey.Valkey(host=server.host, port=server.port)
    aretry = pytest.importorskip("valkey.asyncio.retry").Retry(no_backoff(), 0)
    apool = avalkey.ConnectionPool(
        connection_class=aclient.connection_pool.connection_class,
        **versions.private_kwargs(aclient.connection_pool, aretry),
    )
    try:
        conn = Connections.get(pool)
        Connections.send(conn, "PING")
        assert Connections.read(conn, 1.0) == b"PONG"
        Connections.release(pool, conn)
        aconn = await AsyncConnections.get(apool)
        await AsyncConnections.send(aconn, "PING")
        assert await AsyncConnections.read(aconn, 1.0) == b"PONG"
        await AsyncConnections.release(apool, aconn)
    finally:
        pool.disconnect()
        await apool.disconnect()
        client.close()
        await aclient.aclose()


# -- packing --------------------------------------------------------------------------------

PARTS = (b"EVALSHA", "a" * 40, 4, b"k\x00{x}", -3, 10**20, 0.1, 1e-7, 2.0, "é", b"")


def test_pack_command_writes_what_redis_py_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts' arguments (bytes, str, int, float) are packed byte for byte as redis-py's
    own pure-Python packer packs them: with hiredis (one C call) and without it."""
    serializer = getattr(redis.connection, "PythonRespSerializer", None)
    if serializer is None:  # pragma: no cover - an older redis-py keeps it elsewhere
        pytest.skip("this redis-py has no PythonRespSerializer")
    encode = redis.Redis().connection_pool.get_encoder().encode
    expected = b"".join(serializer(6000, encode).pack(*PARTS))
    assert versions.pack_command(PARTS) == expected
    monkeypatch.setattr(versions, "_hiredis_pack", None)
    assert versions.pack_command(PARTS) == expected


def test_packed_scripts_run(server: RedisServer) -> None:
    r = redis.Redis.from_url(server.url)
    conn = Connections.get(r.connection_pool)
    try:
        sha = r.script_load("return {ARGV[1], ARGV[2], ARGV[3], KEYS[1]}")
        conn.send_packed_command([versions.pack_command(("EVALSHA", sha, 1, b"k", 7, 0.5, "é"))])
        assert conn.read_response() == [b"7", b"0.5", "é".encode(), b"k"]
    finally:
        Connections.release(r.connection_pool, conn)
        r.close()
