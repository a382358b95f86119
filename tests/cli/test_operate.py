"""What an operator does from the command line: find a name's kind, see who holds it, break a
lock (``release --force``), inspect a Redlock, pipe ``--all`` into ``head``; real servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis

import redlease
from redlease.cli import EX_PIPE, main
from redlease.cli._kinds import KINDS
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


def cli_json(server: RedisServer, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["--url", server.url, *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_inspect_finds_a_semaphore_by_itself(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    # It said "free", exit 0, while a permit was held: it read the name as a lock.
    pool = redlease.Semaphore(client, "pool", 3)
    assert pool.acquire()
    try:
        state = cli_json(server, capsys, "inspect", "pool")
        assert main(["--url", server.url, "inspect", "pool"]) == 0
        text = capsys.readouterr().out
    finally:
        pool.release()
    assert state["kind"] == "semaphore" and state["used"] == 1
    assert [h["pid"] for h in state["held_by"]] == [os.getpid()]
    assert "semaphore" in text and "free" not in text
    # A name no kind uses is a free lock; a name two kinds use asks which one.
    assert cli_json(server, capsys, "inspect", "nothing")["held"] is False
    with redlease.Lock(client, "pool"):
        assert main(["--url", server.url, "inspect", "pool"]) == 2
    assert "--kind" in capsys.readouterr().err


def test_inspect_shows_who_holds_a_lock(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    with redlease.Lock(client, "job"):
        state = cli_json(server, capsys, "inspect", "job")
        assert main(["--url", server.url, "inspect", "job"]) == 0
        text = capsys.readouterr().out
    holder = state["held_by"]
    assert holder["pid"] == os.getpid() and holder["thread"] == threading.current_thread().name
    assert state["servers"] == 1
    assert f":{os.getpid()} " in text and holder["token"] in text


def test_every_kind_all_prints_is_accepted_by_kind_and_a_resigned_election_is_one(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    with redlease.Lock(client, "a-lock"):
        pass
    with redlease.Semaphore(client, "a-semaphore", 2):
        pass
    with redlease.ReadWriteLock(client, "a-rwlock").read:
        pass
    election = redlease.Election(client, "an-election")
    assert election.campaign("x")
    election.resign()  # only its fence is left: it was listed as a lock
    assert redlease.CountDownLatch(client, "a-latch").try_set_count(2)
    redlease.Inventory(client, "an-inventory").restock(3)
    redlease.FencedStore(client, "a-fenced").write(1, "v")
    run = redlease.Once(client, "a-once", every=60).try_start()
    assert run is not None
    run.fail()  # free at once: free_in stays 0, the same in both reports below
    rows = cli_json(server, capsys, "inspect", "--all")
    kinds = {row["name"]: row["kind"] for row in rows}
    assert kinds["an-election"] == "election"
    assert sorted(kinds.values()) == sorted(KINDS)
    for row in rows:
        state = cli_json(server, capsys, "inspect", row["name"], "--kind", row["kind"])
        assert state["name"] == row["name"]
        assert cli_json(server, capsys, "inspect", row["name"]) == state  # found by itself


def test_inspect_all_into_a_closed_pipe_exits_quietly(server: RedisServer) -> None:
    with server.client() as conn:
        conn.flushall()
        pipe = conn.pipeline(transaction=False)
        for i in range(12000):  # ~350 KB of rows: far more than a pipe and buffers hold
            pipe.set(f"redlease:{{name-{i:05}}}:fence", 1)
        pipe.execute()
        argv = [sys.executable, "-m", "redlease", "--url", server.url, "inspect", "--all"]
        argv += ["--limit", "20000"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith(b"NAME")  # what `head -1` reads
        proc.stdout.close()
        err = proc.stderr.read()
        assert (proc.wait(30), err) == (EX_PIPE, b"")  # no traceback, no message
        conn.flushall()


def test_top_counts_only_what_is_in_use(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("rich")
    for name in ("one", "two"):
        with redlease.Lock(client, name, prefix="counting"):
            pass
    top = ["--url", server.url, "--prefix", "counting", "top", "--once", "--idle"]
    assert main(top) == 0
    out = capsys.readouterr().out
    assert "0 in use of 2 names scanned" in out  # said "2 in use"
    with redlease.Lock(client, "one", prefix="counting"):
        assert main(top) == 0
    assert "1 in use of 2 names scanned" in capsys.readouterr().out


def test_release_needs_force_and_says_what_it_removed(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = redlease.Lock(client, "stuck")
    assert lock.acquire()
    assert main(["--url", server.url, "release", "stuck"]) == 2
    assert "--force" in capsys.readouterr().err
    assert lock.owned()  # refused: nothing was changed
    assert main(["--url", server.url, "release", "stuck", "--force", "--token", "x.00000000"]) == 1
    assert "nothing removed" in capsys.readouterr().out
    assert lock.owned()  # another token: nothing was changed
    state = cli_json(server, capsys, "release", "stuck", "--force")
    assert state["kind"] == "lock" and [h["pid"] for h in state["removed"]] == [os.getpid()]
    assert not lock.owned()
    assert main(["--url", server.url, "release", "stuck", "--force"]) == 1
    assert "nothing removed" in capsys.readouterr().out
    gate = redlease.CountDownLatch(client, "gate")
    assert gate.try_set_count(1)
    assert main(["--url", server.url, "release", "gate", "--force"]) == 2
    assert "no holder" in capsys.readouterr().err


def test_release_force_fences_out_the_holder_and_hands_the_lock_to_the_waiter(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    ttl = 4.0
    lost = threading.Event()
    store = redlease.FencedStore(client, "ledger")
    holder = redlease.Lock(client, "ledger", ttl=ttl, on_lost=lost.set)
    assert holder.acquire()
    evicted = holder.fence
    assert evicted is not None
    store.write(evicted, "the holder's")
    waiter = redlease.Lock(server.client(), "ledger", ttl=ttl)
    got: list[float] = []

    def wait() -> None:
        assert waiter.acquire(timeout=30)
        got.append(time.monotonic())
        store.write(waiter.fence, "the waiter's")  # type: ignore[arg-type]
        waiter.release()

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not holder.inspect().waiters and time.monotonic() < deadline:
            time.sleep(0.02)
        forced = time.monotonic()
        assert main(["--url", server.url, "release", "ledger", "--force"]) == 0
        assert "removed lock 'ledger'" in capsys.readouterr().out
    finally:
        thread.join(30)
    assert got and got[0] - forced < ttl / 2  # the waiter got it at once
    with pytest.raises(redlease.StaleFence):  # the evicted holder's fenced write is refused
        store.write(evicted, "late")
    assert lost.wait(3 * ttl)  # its watchdog found out: on_lost ran


def test_inspect_a_redlock_over_several_urls(
    redlock_servers: list[RedisServer],
    redlock_clients: list[redis.Redis],
    capsys: pytest.CaptureFixture[str],
) -> None:
    urls = [arg for srv in redlock_servers[:3] for arg in ("--url", srv.url)]
    lock = redlease.Redlock(redlock_clients[:3], "rl")
    assert main([*urls, "inspect", "rl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["held"] is False
    with lock:
        assert main([*urls, "inspect", "rl", "--json"]) == 0
        state = json.loads(capsys.readouterr().out)
        info = lock.inspect()
    assert state["held"] is True and state["servers"] == 3
    assert state["held_by"]["pid"] == os.getpid()
    assert info.held and info.mine and info.servers == 3 and info.held_by is not None
    assert main([*urls, "inspect", "--all"]) == 2  # one Redlock: a NAME
