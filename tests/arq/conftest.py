"""One private server and three real ``arq`` workers (tests.arq.jobs.WorkerSettings: the cron
jobs and the enqueue_once functions) for all of tests/arq."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.topology import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def spawn(url: str, settings: str) -> subprocess.Popen[bytes]:
    """A real arq worker process running ``tests.arq.jobs.<settings>`` on ``url``."""
    env = {**os.environ, "REDLEASE_ARQ_URL": url}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "arq", f"tests.arq.jobs.{settings}"]
    return subprocess.Popen(
        argv,
        env=env,
        cwd=ROOT,
        stderr=None if os.environ.get("REDLEASE_ARQ_LOGS") else subprocess.DEVNULL,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:  # nothing to keep: no graceful stop to wait for
        proc.kill()
    proc.wait(timeout=15)


def wait_for(check: Callable[[], object], seconds: float = 30.0) -> None:
    """Wait, bounded, until ``check()`` is true."""
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert check()


@pytest.fixture(scope="session")
def arq_url() -> Iterator[str]:
    with RedisServer() as srv:
        yield srv.url + "/0"


@pytest.fixture(scope="session")
def conn(arq_url: str) -> Iterator[redis.Redis]:
    """A client of the server that three workers serve."""
    client = redis.Redis.from_url(arq_url)
    procs = [spawn(arq_url, "WorkerSettings") for _ in range(3)]
    try:
        yield client
    finally:
        for proc in procs:
            stop(proc)
        client.close()
