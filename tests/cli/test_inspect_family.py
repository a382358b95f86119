"""``redlease inspect --kind``: the read/write lock, semaphore, latch and election, real server."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

import redlease
from redlease.cli import main
from tests.topology import RedisServer


def inspect(server: RedisServer, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """``redlease inspect ARGS --json``, parsed; the text form is checked to print too."""
    assert main(["--url", server.url, "inspect", *args]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["--url", server.url, "inspect", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_inspect_rwlock_shows_readers_and_writer(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    rw = redlease.ReadWriteLock(client, "rw", ttl=30)
    with rw.read, redlease.ReadWriteLock(client, "rw", ttl=30).read:
        state = inspect(server, capsys, "rw", "--kind", "rwlock")
    assert state["kind"] == "rwlock" and state["name"] == "rw"
    assert state["readers"] == 2 and state["writer"] is False
    assert len(state["leases"]) == 2 and all(0 < left <= 30 for left in state["leases"])
    with rw.write:
        state = inspect(server, capsys, "rw", "--kind", "rwlock")
    assert state["readers"] == 0 and state["writer"] is True
    assert inspect(server, capsys, "rw", "--kind", "rwlock")["writer"] is False  # released


def test_inspect_semaphore_shows_permits_and_holders(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    sem = redlease.Semaphore(client, "pool", 4, ttl=30)
    assert sem.acquire() and sem.acquire(permits=2)  # a weighted holding: one lease of 2
    try:
        state = inspect(server, capsys, "pool", "--kind", "semaphore")
        text_ok = main(["--url", server.url, "inspect", "pool", "--kind", "semaphore"]) == 0
        text = capsys.readouterr().out
    finally:
        sem.release()
        sem.release()
    assert (state["permits"], state["used"], state["available"]) == (4, 3, 1)
    assert len(state["holders"]) == 2 and "mine" not in state
    # holders by lease end, and two taken in one millisecond in either order: one of each
    assert sorted(state["units"]) == [1, 2]
    assert text_ok and "permits" in text
    units = [line.split() for line in text.splitlines() if line.startswith("units")]
    assert units in ([["units", "1,", "2"]], [["units", "2,", "1"]]), text


def test_inspect_latch_and_election(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    latch = redlease.CountDownLatch(client, "gate")
    assert latch.try_set_count(3)
    latch.count_down()
    assert inspect(server, capsys, "gate", "--kind", "latch")["count"] == 2
    assert inspect(server, capsys, "vote", "--kind", "election")["leader"] is None
    election = redlease.Election(client, "vote", ttl=30)
    assert election.campaign("node-a", timeout=5)
    try:
        state = inspect(server, capsys, "vote", "--kind", "election")
        assert main(["--url", server.url, "inspect", "vote", "--kind", "election"]) == 0
        assert "node-a" in capsys.readouterr().out
    finally:
        election.resign()
    assert state["leader"]["value"] == "node-a" and state["leader"]["term"] >= 1
    assert 0 < state["remaining"] <= 30


def test_inspect_kind_refuses_an_unknown_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "x", "--kind", "mutex"]) == 2
    assert "--kind" in capsys.readouterr().err


def test_inspect_all_lists_every_primitive_by_name_and_kind(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = "scanall"
    lock = redlease.Lock(client, "job", prefix=prefix, ttl=30)
    sem = redlease.Semaphore(client, "pool", 2, prefix=prefix, ttl=30)
    latch = redlease.CountDownLatch(client, "gate", prefix=prefix)
    assert latch.try_set_count(2)
    client.set("other:{job}:lock", "not ours")  # another prefix: not listed
    with lock, sem:
        assert main(["--url", server.url, "--prefix", prefix, "inspect", "--all", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert main(["--url", server.url, "--prefix", prefix, "inspect", "--all"]) == 0
        text = capsys.readouterr().out
    kinds = {row["name"]: row["kind"] for row in rows}
    assert kinds["job"] == "lock" and kinds["gate"] == "latch"
    assert kinds["pool"] in ("semaphore", "shared")
    assert set(kinds) == {"job", "pool", "gate"}
    assert "job" in text and "latch" in text
    limited = ["--url", server.url, "--prefix", prefix, "inspect", "--all", "--limit", "1"]
    assert main([*limited, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


def test_inspect_needs_name_or_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect"]) == 2
    assert "--all" in capsys.readouterr().err
