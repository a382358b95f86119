"""``redlease release NAME --force`` of a ``run --every`` job, and what ``inspect`` says of it:
the same words and exit codes (held: evicted, kept: cleared, free: exit 1, nothing changed).

The job runs as a real ``python -m redlease`` process; no test asserts tight timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

import redlease
from redlease.cli import main
from tests.cli.helpers import wait_for
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(90)

PY = sys.executable
EX_LOST, EX_SKIPPED = 70, 75


def cli(server: RedisServer, *args: str) -> int:
    return main(["--url", server.url, *args])


def state(server: RedisServer, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    """``ARGS... --json``'s object (any exit code but 2)."""
    assert cli(server, *args, "--json") in (0, 1)
    return json.loads(capsys.readouterr().out)


def test_a_running_job_is_evicted_and_its_redlease_run_exits_70(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # It said "'job' is a once: it has no holder to release" (exit 2) while inspect showed it.
    started = tmp_path / "started"
    code = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(60)"
    argv = [PY, "-m", "redlease", "--url", server.url, "run", "job", "--every", "1h"]
    job = subprocess.Popen([*argv, "--ttl", "1", "--", PY, "-c", code], stderr=subprocess.PIPE)
    try:
        assert wait_for(started.exists, 30)
        held = state(server, capsys, "inspect", "job")
        assert held["state"] == "running" and held["held_by"]["pid"] == job.pid
        assert cli(server, "run", "job", "--every", "1h", "--", "true") == EX_SKIPPED  # held
        released = state(server, capsys, "release", "job", "--force")
        assert released["state"] == "running" and released["removed"] == [held["held_by"]]
        assert released["fence"] > held["fence"]
        assert job.wait(30) == EX_LOST  # its watchdog found out: the command was terminated
    finally:
        job.kill()
        _, err = job.communicate(30)
    assert b"the run of 'job' was lost" in err
    after = state(server, capsys, "inspect", "job")
    assert (after["state"], after["free_in"], after["held_by"]) == ("released", 0.0, None)
    assert cli(server, "run", "job", "--every", "1h", "--", "true") == 0  # free at once


def test_a_finished_job_is_cleared_so_it_runs_again(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "run", "job", "--every", "24h", "--", "true") == 0
    assert cli(server, "run", "job", "--every", "24h", "--", "true") == EX_SKIPPED
    kept = state(server, capsys, "inspect", "job")
    assert kept["state"] == "done" and kept["free_in"] > 0 and kept["held_by"] is None
    assert cli(server, "release", "job", "--force") == 0
    out = capsys.readouterr().out
    assert "cleared once 'job'" in out and "may run again now" in out
    assert cli(server, "run", "job", "--every", "24h", "--", "true") == 0


def test_a_free_job_changes_nothing_and_exits_1(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "run", "job", "--every", "24h", "--", "false") == 1  # failed: free
    free = state(server, capsys, "inspect", "job")
    assert (free["state"], free["free_in"], free["held_by"]) == ("failed", 0.0, None)
    assert cli(server, "release", "job", "--force") == 1
    assert "nothing removed" in capsys.readouterr().out
    assert state(server, capsys, "inspect", "job") == {**free, "free_in": 0.0}  # unchanged
    run = redlease.Once(client, "job", every="24h").try_start()
    assert run is not None
    stale = state(server, capsys, "release", "job", "--force", "--token", free["token"])
    assert (stale["removed"], stale["state"]) == ([], None) and run.active
    assert cli(server, "release", "job", "--force", "--token", "a b") == 2
    assert "argument --token" in capsys.readouterr().err
    assert cli(server, "release", "job", "--kind", "once", "--force") == 0
    with pytest.raises(redlease.RunLost):
        run.finish()
