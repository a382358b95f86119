"""Celery beat on two "hosts" with redlease's scheduler: one sends, each instant once.

Real processes on a private server: one worker, two beats; the leader is killed (SIGKILL)
and the other takes over within the lease. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("celery")

import redis

from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0
APP = "tests.celery_beat.app"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with RedisServer() as srv:
        yield srv.url + "/0"


def start(url: str, *argv: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "REDLEASE_CELERY_URL": url,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    cmd = [sys.executable, "-m", "celery", "-A", APP, *argv, "-l", "warning"]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


def beat(url: str, scheduler: str) -> subprocess.Popen[bytes]:
    return start(url, "beat", "-S", scheduler, "--max-interval", "1", "-s", os.devnull)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def worker(url: str) -> Iterator[subprocess.Popen[bytes]]:
    argv = ["worker", "--pool=solo", "--without-gossip", "--without-mingle"]
    proc = start(url, *argv, "--without-heartbeat")
    yield proc
    stop(proc)


def fires(client: redis.Redis) -> dict[float, int]:
    return {float(k): int(v) for k, v in client.hgetall("fires").items()}


def wait_for(predicate: object, limit: float = 30.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_two_beats_send_each_instant_once_across_a_failover(url: str, worker: object) -> None:
    client = redis.Redis.from_url(url)
    client.delete("fires", "seen")
    first = beat(url, "redlease.celery_beat:BeatScheduler")
    second = None
    try:
        assert wait_for(lambda: len(fires(client)) >= 1, 40), "no fire from the first beat"
        second = beat(url, "redlease.celery_beat:BeatScheduler")
        time.sleep(3)  # both up: one sends
        stop(first)
        killed = time.time()
        assert wait_for(lambda: max(fires(client)) > killed + 0.5, LEASE + 10)
        time.sleep(2)
    finally:
        stop(first)
        if second is not None:
            stop(second)
    time.sleep(1)  # the last messages are run
    counted = fires(client)
    assert counted and all(n == 1 for n in counted.values()), counted
    after = min(i for i in counted if i > killed)
    before = max(i for i in counted if i <= killed)
    assert after - before <= LEASE + 1 + 1.5, (before, after)  # 1.5 s slack: a loaded machine
    eternal = [k for k in client.scan_iter("redlease:*") if client.pttl(k) == -1]
    assert not [k for k in eternal if b"celery-beat:fire" in k], eternal  # every fire key expires


def test_twin_two_plain_beats_send_instants_twice(url: str, worker: object) -> None:
    client = redis.Redis.from_url(url)
    client.delete("fires", "seen")
    beats = [beat(url, f"{APP}:PlainInstants") for _ in range(2)]
    try:
        assert wait_for(lambda: any(n >= 2 for n in fires(client).values()), 40), fires(client)
    finally:
        for proc in beats:
            stop(proc)


def test_instants_and_bad_settings() -> None:
    from datetime import timedelta

    from celery import Celery
    from celery.schedules import crontab, schedule

    from redlease.celery_beat import BeatScheduler, scheduled_instant

    assert scheduled_instant(schedule(timedelta(seconds=5)), 1003.7) == 1000.0
    assert scheduled_instant(crontab(), 125.0) == 120.0
    assert scheduled_instant(object(), 7.9) == 7.0
    app = Celery("bad", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.beat_redlease_lease = -1
    with pytest.raises(ValueError, match="beat_redlease_lease"):
        BeatScheduler(app)
    app.conf.beat_redlease_lease = 2
    app.conf.beat_redlease_url = "amqp://127.0.0.1//"
    with pytest.raises(ValueError, match="beat_redlease_url"):
        BeatScheduler(app)
