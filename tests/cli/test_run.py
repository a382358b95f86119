"""``redlease run`` against real servers: the fence, exit codes, a lost lock, signals.

Most tests call :func:`redlease.cli.main` in-process; the concurrency and signal tests run
``python -m redlease`` as real processes. No test asserts wall-clock timings.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

import redlease
from tests.cli.helpers import PY, cli, keys, py, wait_for
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


# -- run ----------------------------------------------------------------------------------------


def test_run_passes_fence_name_and_exit_code(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "env.json"
    code = (
        "import json, os, sys; "
        f"json.dump({{k: os.environ.get(k) for k in ('REDLEASE_FENCE', 'REDLEASE_LOCK')}}, "
        f"open({str(out)!r}, 'w')); sys.exit(3)"
    )
    assert cli(server, "run", "job", "--ttl", "5", "--", *py(code)) == 3
    seen = json.loads(out.read_text())
    assert seen["REDLEASE_LOCK"] == "job" and int(seen["REDLEASE_FENCE"]) > 0
    assert client.exists(keys("job").lock) == 0  # released
    # the next holder gets the next fencing token
    assert cli(server, "run", "job", "--", *py(code.replace("sys.exit(3)", "None"))) == 0
    assert int(json.loads(out.read_text())["REDLEASE_FENCE"]) > int(seen["REDLEASE_FENCE"])


def test_run_options_and_command_arguments_are_kept_apart(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    out = tmp_path / "argv.json"
    code = f"import json, sys; json.dump(sys.argv[1:], open({str(out)!r}, 'w'))"
    # options after NAME belong to run; everything after -- to the command, verbatim
    argv = ["run", "--prefix", "app", "job", "--ttl", "5", "--", *py(code), "--ttl", "--", "x"]
    assert cli(server, *argv) == 0
    assert json.loads(out.read_text()) == ["--ttl", "--", "x"]
    assert int(client.get(keys("job", prefix="app").fence) or 0) > 0


def test_run_held_lock_times_out_without_running_the_command(
    server: RedisServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    holder = redlease.Lock(client, "busy")
    assert holder.acquire()
    try:
        touch = py(f"open({str(marker)!r}, 'w').close()")
        assert cli(server, "run", "busy", "--timeout", "0.2", "-v", "--", *touch) == 75
        assert "held by another" in capsys.readouterr().err
        assert cli(server, "run", "busy", "-n", "--", *touch) == 75
        assert capsys.readouterr().err == ""  # silent without -v, like flock -n
        assert cli(server, "run", "busy", "-n", "-E", "0", "--", *touch) == 0
        assert not marker.exists()
        assert client.zcard(keys("busy").queue) == 0  # gave up its place in the queue
    finally:
        holder.release()


def test_run_command_not_found_releases_the_lock(
    server: RedisServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "run", "job", "--", str(tmp_path / "no-such-command")) == 127
    assert "command not found" in capsys.readouterr().err
    assert client.exists(keys("job").lock) == 0
    not_executable = tmp_path / "data.txt"
    not_executable.write_text("x")
    assert cli(server, "run", "job", "--", str(not_executable)) == 126
    assert client.exists(keys("job").lock) == 0


def test_run_lost_lock_terminates_the_command(
    server: RedisServer, client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = tmp_path / "started"
    code = f"import time; open({str(started)!r}, 'w').close(); time.sleep(50)"

    def take_the_lock_away() -> None:
        if wait_for(started.exists):
            client.delete(keys("lost").lock)  # as if the lease ran out and another took it

    thief = threading.Thread(target=take_the_lock_away)
    thief.start()
    try:
        assert cli(server, "run", "lost", "--ttl", "0.6", "--", *py(code)) == 70
    finally:
        thief.join()
    assert "was lost" in capsys.readouterr().err


def test_concurrent_runs_never_overlap(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    """Three ``python -m redlease run`` processes: the command's critical sections are serial."""
    inside, log = tmp_path / "inside", tmp_path / "log"
    code = (
        "import os, sys, time\n"
        f"try: os.mkdir({str(inside)!r})\n"
        "except FileExistsError: sys.exit(99)\n"  # someone else is inside: overlap
        "time.sleep(0.2)\n"
        f"os.rmdir({str(inside)!r})\n"
        f"open({str(log)!r}, 'a').write(os.environ['REDLEASE_FENCE'] + '\\n')\n"
    )
    argv = [PY, "-m", "redlease", "--url", server.url, "run", "shared", "--", *py(code)]
    procs = [subprocess.Popen(argv, stderr=subprocess.PIPE) for _ in range(3)]
    results = [(p.wait(timeout=30), p.stderr.read() if p.stderr else b"") for p in procs]
    assert [code for code, _ in results] == [0, 0, 0], results
    fences = [int(line) for line in log.read_text().split()]
    assert len(fences) == 3 and fences == sorted(set(fences))  # in order, each larger
    assert client.exists(keys("shared").lock) == 0


def test_run_forwards_sigterm_and_releases(
    server: RedisServer, client: redis.Redis, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(5))\n"
        f"open({str(started)!r}, 'w').close()\n"
        "time.sleep(50)\n"
    )
    argv = [PY, "-m", "redlease", "--url", server.url, "run", "sig", "--", *py(code)]
    proc = subprocess.Popen(argv)
    try:
        assert wait_for(started.exists)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 5  # the command's handler ran; its code passed through
    finally:
        proc.kill()
        proc.wait()
    assert client.exists(keys("sig").lock) == 0


def test_run_terminates_the_command_when_redis_hangs(
    make_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The watchdog cannot renew on a hung server: once the lease is surely over, the command
    is terminated and run exits 70 (it does not hang on the server itself)."""
    srv: RedisServer = make_server()
    started = tmp_path / "started"
    code = f"import time; open({str(started)!r}, 'w').close(); time.sleep(50)"

    def hang_the_server() -> None:
        if wait_for(started.exists):
            srv.pause()

    pauser = threading.Thread(target=hang_the_server)
    pauser.start()
    try:
        assert cli(srv, "run", "hung", "--ttl", "1", "--", *py(code)) == 70
    finally:
        pauser.join()
    assert "was lost" in capsys.readouterr().err
