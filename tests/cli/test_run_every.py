"""``redlease run NAME --every DURATION -- COMMAND``: a cron job that runs once per period.

The skew and kill tests run ``python -m redlease`` as real processes (one per "host"); the
others call :func:`redlease.cli.main` in-process. No test asserts tight timings.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import redlease
from redlease.cli import main
from redlease.cli.top import snapshot
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(90)

PY = sys.executable
KEY = b"redlease:{job}:once:run"


def cli(server: RedisServer, *args: str) -> int:
    return main(["--url", server.url, *args])


def host(server: RedisServer, *args: str) -> list[str]:
    """The argv of ``python -m redlease --url <server> ARGS...``: one host's cron entry."""
    return [PY, "-m", "redlease", "--url", server.url, *args]


def appender(log: Path, *, sleep: float = 0.0, exit_code: int = 0) -> list[str]:
    """A command that appends its fence to ``log``, sleeps, and exits with ``exit_code``."""
    code = (
        "import os, sys, time\n"
        f"open({str(log)!r}, 'a').write(os.environ['REDLEASE_FENCE'] + '\\n')\n"
        f"time.sleep({sleep})\n"
        f"sys.exit({exit_code})\n"
    )
    return [PY, "-c", code]


def lines(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def wait_for(predicate: Any, limit: float = 15.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def test_two_hosts_started_two_seconds_apart_run_once(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    job = ["run", "job", "--every", "60", "--", *appender(log, sleep=0.5)]
    first = subprocess.Popen(host(server, *job), stderr=subprocess.PIPE)
    time.sleep(2.0)  # the second host's cron fires 2 s late (skew, a slow boot)
    second = subprocess.Popen(host(server, *job), stderr=subprocess.PIPE)
    results = [(p.wait(timeout=30), p.stderr.read() if p.stderr else b"") for p in (first, second)]
    assert results == [(0, b""), (75, b"")]  # the skip is silent
    assert len(lines(log)) == 1


def test_two_hosts_started_two_seconds_apart_run_twice_with_a_lock(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    # The twin: the old recipe (-n, a lock released when the command exits) runs it twice.
    log = tmp_path / "log"
    job = ["run", "job", "-n", "--", *appender(log, sleep=0.5)]
    first = subprocess.Popen(host(server, *job))
    time.sleep(2.0)
    second = subprocess.Popen(host(server, *job))
    assert [first.wait(timeout=30), second.wait(timeout=30)] == [0, 0]
    fences = [int(line) for line in lines(log)]
    assert len(fences) == 2 and fences[0] < fences[1]  # it ran twice


def test_a_failed_run_is_retried_by_the_next_host_at_once(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    assert cli(server, "run", "job", "--every", "24h", "--", *appender(log, exit_code=3)) == 3
    assert cli(server, "run", "job", "--every", "24h", "--", *appender(log)) == 0
    fences = [int(line) for line in lines(log)]
    assert len(fences) == 2 and fences[0] < fences[1]
    # After the success, the name is taken for the period: the next try is skipped.
    assert cli(server, "run", "job", "--every", "24h", "--", *appender(log)) == 75
    assert [int(line) for line in lines(log)] == fences
    last = redlease.Once(client, "job", every=86400).last()
    assert last is not None
    assert (last.state, last.fence, last.every) == ("done", fences[1], 86400.0)


def test_a_command_that_cannot_start_fails_the_run(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    assert cli(server, "run", "job", "--every", "1h", "--", str(tmp_path / "missing")) == 127
    last = redlease.Once(client, "job", every=3600).last()
    assert last is not None and last.state == "failed" and last.free_in == 0.0


@pytest.mark.parametrize("alive", [False, True])
def test_a_killed_run_frees_the_name_within_its_ttl(
    server: RedisServer, client: redis.Redis, tmp_path: Path, alive: bool
) -> None:
    """kill -9 of ``redlease run`` mid-run: the next host runs within the ttl (1 s).

    The twin (``alive``): while redlease lives its watchdog renews the run, so the name stays
    taken well past the ttl.
    """
    log, started = tmp_path / "log", tmp_path / "started"
    code = f"import os, time\nopen({str(started)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    argv = host(server, "run", "job", "--every", "1h", "--ttl", "1", "--", PY, "-c", code)
    proc = subprocess.Popen(argv)
    try:
        assert wait_for(lambda: started.exists() and started.read_text())
        if not alive:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        killed = time.monotonic()
        other = ["run", "job", "--every", "1h", "--ttl", "1", "--", *appender(log)]
        if alive:
            time.sleep(3.0)  # three ttls
            assert cli(server, *other) == 75
            assert lines(log) == []
        else:
            assert wait_for(lambda: cli(server, *other) == 0, limit=10)
            assert time.monotonic() - killed < 1.0 + 4  # the ttl, with generous slack
            last = redlease.Once(client, "job", every=3600).last()
            assert last is not None and lines(log) == [str(last.fence)]  # the second run's
    finally:
        proc.kill()
        proc.wait()
        if started.exists() and started.read_text():  # the orphaned command of a killed redlease
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(started.read_text()), signal.SIGKILL)


def test_the_skip_is_silent_unless_verbose_and_its_code_may_be_chosen(
    server: RedisServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log"
    job = ["job", "--every", "15m", "--", *appender(log)]
    assert cli(server, "run", *job) == 0
    capsys.readouterr()
    fence = lines(log)[0]
    assert cli(server, "run", *job) == 75
    assert capsys.readouterr() == ("", "")
    assert cli(server, "run", "-E", "0", *job) == 0
    assert cli(server, "run", "--conflict-exit-code", "9", *job) == 9
    assert capsys.readouterr() == ("", "")
    assert cli(server, "run", "-v", *job) == 75
    err = capsys.readouterr().err
    assert "'job' ran on" in err and f"(run {fence}, done)" in err and "command not run" in err
    assert lines(log) == [fence]


def test_a_run_in_progress_is_named_with_verbose(
    server: RedisServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = redlease.Once(client, "job", every=60).try_start()
    assert run is not None
    try:
        assert cli(server, "run", "-v", "job", "--every", "60", "-n", "--", "true") == 75
        assert "'job' is running on" in capsys.readouterr().err
    finally:
        run.finish()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--every", "0"], "--every must be a duration > 0"),
        (["--every", "5x"], "--every must be seconds or a duration"),
        (["--every", "500d"], "--every must be > 0 and at most 400 days"),
        (["--every", "1h", "--timeout", "5"], "--timeout has no meaning with --every"),
        (["-E", "256"], "-E must be an exit code"),
        (["-E", "x"], "not an integer"),
    ],
)
def test_bad_arguments(
    server: RedisServer, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert cli(server, "run", "job", *args, "--", "true") == 2
    assert needle in capsys.readouterr().err


def test_inspect_shows_the_last_run(
    server: RedisServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "inspect", "job", "--kind", "once", "--json") == 0
    never = {"name": "job", "kind": "once", "state": None, "held_by": None}
    assert json.loads(capsys.readouterr().out) == never
    log = tmp_path / "log"
    assert cli(server, "run", "job", "--every", "1h", "--", *appender(log)) == 0
    capsys.readouterr()
    assert cli(server, "inspect", "job", "--kind", "once", "--json") == 0
    state = json.loads(capsys.readouterr().out)
    assert (state["state"], state["fence"], state["every"]) == ("done", int(lines(log)[0]), 3600.0)
    assert state["started"].endswith("+00:00") and 0 < state.pop("free_in") <= 3600
    assert cli(server, "inspect", "job", "--kind", "once") == 0
    assert "state      done" in capsys.readouterr().out
    # Found by its keys, without --kind, and listed by --all.
    assert cli(server, "inspect", "job", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert found.pop("free_in") > 0 and found == state
    assert cli(server, "inspect", "--all", "--json") == 0
    assert json.loads(capsys.readouterr().out) == [
        {"name": "job", "kind": "once", "keys": ["once:fence", "once:run"]}
    ]
    client.set(KEY, b"x")
    assert cli(server, "inspect", "job", "--kind", "once") == 1


def test_top_shows_a_run_in_progress_and_the_last_run_when_idle(client: redis.Redis) -> None:
    run = redlease.Once(client, "job", every=60).try_start()
    assert run is not None
    client.set(b"redlease:{odd}:once:run", b"x")
    rows, scanned = snapshot(client, "redlease")
    cells = {row.name: row.cells()[1:] for row in rows}
    assert scanned == 2 and cells["job"][0] == "once"
    assert cells["job"][1].startswith("running on ") and cells["job"][3] == str(run.fence)
    assert cells["odd"][1] == "foreign data"
    run.finish()
    rows, _ = snapshot(client, "redlease")
    assert [row.name for row in rows] == ["odd"]  # a finished run is idle
    idle, _ = snapshot(client, "redlease", idle=True, match="j*")
    assert [(row.name, row.held_by.split()[0]) for row in idle] == [("job", "done")]
