"""A forked child never uses its parent's connections, runtime or process id.

The hot path reads the process id once per process (``os.getpid()`` is a system call) and again
in a forked child (``os.register_at_fork``). If that failed, a child would send its scripts on
the sockets it inherited, which the parent also reads: replies would go to the wrong process.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import redis

import redlease
import redlease._core.lease as lease
from redlease._sync.runtime import runtime_for

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform"),
]


def _in_child(client: redis.Redis, *, stale_pid: int | None) -> dict[str, Any]:
    """Fork; the child takes and releases a lock on ``client`` and reports what it used.

    ``stale_pid``: the child first sets the cached process id back to it (the twin: what the
    child would see if the fork hook had not run)."""
    parent = runtime_for(client)
    parent_conns = {id(c) for c, _ in parent.backend._kept}
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
        code = 1
        try:
            if stale_pid is not None:
                lease._pid = stale_pid
            lock = redlease.Lock(client, "fork:child", ttl=5.0, renew=False)
            took = lock.acquire(timeout=5)
            runtime = runtime_for(client)
            mine = {id(c) for c, _ in runtime.backend._kept}
            lock.release()
            report = {
                "took": took,
                "own_runtime": runtime is not parent,
                "inherited_connections": bool(mine & parent_conns),
                "pid_is_mine": lease.pid() == os.getpid(),
            }
            os.write(write, json.dumps(report).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    result: dict[str, Any] = json.loads(text)
    return result


def _parent_uses_its_lock(client: redis.Redis) -> None:
    lock = redlease.Lock(client, "fork:parent", ttl=5.0)
    for _ in range(20):  # its kept connections still answer in order
        assert lock.acquire(timeout=5)
        assert lock.fence is not None
        lock.release()


def test_a_forked_child_uses_a_runtime_and_connections_of_its_own(client: redis.Redis) -> None:
    _parent_uses_its_lock(client)  # a runtime, a kept connection, a renewer thread
    seen = _in_child(client, stale_pid=None)
    assert seen == {
        "took": True,
        "own_runtime": True,
        "inherited_connections": False,
        "pid_is_mine": True,
    }
    _parent_uses_its_lock(client)


def test_twin_a_child_with_its_parents_pid_shares_the_parents_connections(
    client: redis.Redis,
) -> None:
    """The check above can fail: a child left with the parent's cached id takes the parent's
    runtime and its kept sockets."""
    _parent_uses_its_lock(client)
    seen = _in_child(client, stale_pid=os.getpid())
    assert seen["own_runtime"] is False
    assert seen["inherited_connections"] is True
    assert seen["pid_is_mine"] is False
