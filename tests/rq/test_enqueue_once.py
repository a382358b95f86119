"""redlease.rq.enqueue_once with a real ``rq worker`` on a private server: the same call
enqueued twice runs once (plain ``enqueue``: twice), and a worker killed mid-job frees the
call within the running lease. Every wait is bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

rq = pytest.importorskip("rq")

import redis  # noqa: E402

from redlease.rq import AlreadyQueued, enqueue_once, once_key  # noqa: E402
from tests.rq.jobs import record  # noqa: E402
from tests.topology import RedisServer  # noqa: E402

pytestmark = pytest.mark.timeout(90)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with RedisServer() as srv:
        yield srv.url + "/0"


@pytest.fixture
def queue(url: str) -> Iterator[Any]:
    conn = redis.Redis.from_url(url)
    conn.flushall()
    yield rq.Queue("once", connection=conn)
    conn.close()


def worker(url: str, *, burst: bool) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "rq.cli", "worker", "--url", url, "-w", "rq.worker.SimpleWorker"]
    argv += ["--burst", "once"] if burst else ["once"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


def runs(queue: Any, tag: str) -> list[str]:
    found = [r.decode().split() for r in queue.connection.lrange("runs", 0, -1)]
    return [fence for t, fence in found if t == tag]


def test_the_same_call_enqueued_twice_runs_once(url: str, queue: Any) -> None:
    first = enqueue_once(queue, record, "twice")
    with pytest.raises(AlreadyQueued):
        enqueue_once(queue, record, "twice")
    existing = enqueue_once(queue, record, "twice", return_existing=True)
    assert existing.id == first.id
    assert worker(url, burst=True).wait(timeout=60) == 0
    assert len(runs(queue, "twice")) == 1
    assert runs(queue, "twice")[0] != "None"  # the job held the lock: it saw its fence
    assert queue.connection.keys("*rq-job*") == []  # forgotten when it ended
    again = enqueue_once(queue, record, "twice")  # it ended: enqueued again
    assert again.id != first.id


def test_twin_plain_enqueue_runs_the_same_call_twice(url: str, queue: Any) -> None:
    queue.enqueue(record, "plain")
    queue.enqueue(record, "plain")
    assert worker(url, burst=True).wait(timeout=60) == 0
    assert len(runs(queue, "plain")) == 2


def test_a_killed_worker_frees_the_call_within_the_lease(url: str, queue: Any) -> None:
    enqueue_once(queue, record, "killed", 60.0, ttl=1.0)
    proc = worker(url, burst=False)
    try:
        deadline = time.monotonic() + 30
        while not runs(queue, "killed") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runs(queue, "killed")
        with pytest.raises(AlreadyQueued):
            enqueue_once(queue, record, "killed", 60.0, ttl=1.0)  # running: renewed
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        killed = time.monotonic()
        while time.monotonic() - killed < 10:  # bounded
            try:
                enqueue_once(queue, record, "killed", 60.0, ttl=1.0)  # the same call
                break
            except AlreadyQueued:
                time.sleep(0.05)
        freed = time.monotonic() - killed
        assert freed < 1.0 + 2.0  # within the lease, with slack
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_the_key_binds_arguments_and_names_missing_once_keys() -> None:
    assert once_key(record, ("a",), {}) == once_key(record, (), {"tag": "a", "seconds": 0.0})
    assert once_key(record, ("a", 1.0), {}, ["tag"]) == once_key(record, ("a", 2.0), {}, ["tag"])
    with pytest.raises(ValueError, match="once_keys"):
        once_key(record, ("a",), {}, ["tga"])
