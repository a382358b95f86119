"""The ``redlease`` command line against real servers: run, inspect, demo, errors.

Most tests call :func:`redlease.cli.main` in-process; the concurrency and signal tests run
``python -m redlease`` as real processes. No test asserts wall-clock timings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import redlease
from redlease._core.lock import LockKeys
from redlease.cli import main
from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(60)

PY = sys.executable
REFUSED_URL = "redis://127.0.0.1:1"  # nothing listens on port 1


def keys(name: str, prefix: str = "redlease") -> LockKeys:
    return LockKeys.build(prefix, name.encode())


def cli(server: RedisServer, *args: str) -> int:
    """``redlease --url <server> ARGS...`` in-process."""
    return main(["--url", server.url, *args])


def wait_for(predicate: Any, limit: float = 10.0) -> bool:
    """Poll ``predicate`` (bounded) until true; returns its last value."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def py(code: str) -> list[str]:
    """A command running Python ``code``."""
    return [PY, "-c", code]


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


# -- inspect ------------------------------------------------------------------------------------


def test_inspect_free_lock(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "inspect", "nobody") == 0
    text = capsys.readouterr().out
    assert "free" in text and "redlease:{nobody}:lock" in text
    assert cli(server, "inspect", "nobody", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {
        "name": "nobody",
        "key": "redlease:{nobody}:lock",
        "held": False,
        "remaining": None,
        "fence": 0,
        "waiters": 0,
        "held_by": None,
        "servers": 0,
    }


def test_inspect_held_lock_with_a_waiter(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = redlease.Lock(client, "held", ttl=20.0)
    assert holder.acquire()
    waiter_client = server.client()
    waiter = redlease.Lock(waiter_client, "held")
    results: list[bool] = []

    def wait_for_it() -> None:
        results.append(waiter.acquire(timeout=20))
        waiter.release()

    thread = threading.Thread(target=wait_for_it)
    thread.start()
    try:
        assert wait_for(lambda: client.zcard(keys("held").queue) == 1)
        assert cli(server, "inspect", "held", "--json") == 0
        state = json.loads(capsys.readouterr().out)
        assert state["held"] is True
        assert 0 < state["remaining"] <= 20.0
        assert state["fence"] == holder.fence and state["fence"] > 0
        assert state["waiters"] == 1
        assert cli(server, "inspect", "held") == 0
        text = capsys.readouterr().out
        assert "held" in text and f"{holder.fence} (last token issued)" in text
    finally:
        holder.release()
        thread.join(20)
        waiter_client.close()
    assert results == [True]


def _hash(client: redis.Redis, key: bytes) -> None:
    client.hset(key, "owner", "someone else")


def _text(client: redis.Redis, key: bytes) -> None:
    client.set(key, "not ours")


def _list(client: redis.Redis, key: bytes) -> None:
    client.rpush(key, "x")


@pytest.mark.parametrize(
    ("suffix", "write"),
    [
        ("lock", _hash),  # issue 8, item 9: exited 0 with "held, no expiry"
        ("fence", _hash),
        ("fence", _text),  # a string, but not a counter
        ("queue", _text),
        ("handoff", _list),  # was not read at all: exited 0
    ],
)
def test_inspect_foreign_data_in_any_key_exits_1_naming_the_key(
    server: RedisServer,
    client: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    suffix: str,
    write: Any,
) -> None:
    key: bytes = getattr(keys("alien"), suffix)
    write(client, key)
    try:
        for argv in (["inspect", "alien"], ["inspect", "alien", "--json"]):
            assert cli(server, *argv) == 1
            captured = capsys.readouterr()
            assert captured.out == ""  # no report of a state that is not redlease's
            assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
            assert key.decode() in captured.err  # which key
            assert "did not write" in captured.err
    finally:
        client.delete(key)
    assert cli(server, "inspect", "alien") == 0  # the same name, clean again: free
    assert "free" in capsys.readouterr().out


def test_inspect_names_the_key_redlease_uses(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key shown is the one the library writes (the CLI builds it from the documented
    layout, so a change of layout must show here)."""
    for name, prefix in [("orders:42", "redlease"), ("a{b}", "app"), ("zürich 1", "x.y")]:
        assert cli(server, "--prefix", prefix, "inspect", name, "--json") == 0
        shown = json.loads(capsys.readouterr().out)["key"]
        assert shown == keys(name, prefix).lock.decode()
        lock = redlease.Lock(client, name, prefix=prefix)
        with lock:
            assert client.exists(shown) == 1


def test_url_from_environment(
    server: RedisServer,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REDLEASE_URL", server.url)
    assert main(["inspect", "env", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["held"] is False
    # --url wins over the environment
    assert main(["inspect", "env", "--url", REFUSED_URL]) == 69


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("subcommand", [["inspect", "x"], ["demo", "--workers", "1"]])
def test_unreachable_url_exits_69_with_one_line(
    subcommand: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = "redis://user:s3cret@127.0.0.1:1/0"
    assert main(["--url", url, *subcommand]) == 69
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "redis://user:***@127.0.0.1:1/0" in err
    assert "s3cret" not in err


def test_unreachable_url_does_not_run_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    touch = py(f"open({str(marker)!r}, 'w').close()")
    assert main(["--url", REFUSED_URL, "run", "x", "--", *touch]) == 69
    assert REFUSED_URL in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "x", "--ttl", "-1", "--", "true"], "--ttl"),
        (["run", "x", "--ttl=0", "--", "true"], "--ttl"),
        (["run", "x", "--timeout", "-0.5", "--", "true"], "--timeout"),
        (["run", "x", "--timeout", "1", "-n", "--", "true"], "-n"),
        (["run", "x"], "COMMAND"),
        (["inspect", ""], "NAME"),
        (["inspect", "x", "--", "extra"], "unrecognized"),
        (["--prefix", "a{b}", "inspect", "x"], "--prefix"),
        (["--url", "http://example.com", "inspect", "x"], "--url"),
        (["demo", "--workers", "0"], "--workers"),
        (["demo", "--increments", "many"], "--increments"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and named in err


def test_help_documents_defaults_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "redis://127.0.0.1:6379" in capsys.readouterr().out
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    for needle in ("REDLEASE_FENCE", "SIGTERM", "75", "70", "127"):
        assert needle in text


# -- demo ---------------------------------------------------------------------------------------


def test_demo_loses_nothing_with_the_lock(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "demo", "--workers", "2", "--increments", "25") == 0
    out = capsys.readouterr().out
    rows = {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.strip().startswith(("no lock", "redlease.Lock"))
    }
    # columns: name..., expected, final, lost, time, "s", rate
    locked = rows["redlease.Lock"]
    assert locked[1:4] == ["50", "50", "0"]
    unlocked = rows["no"]  # "no lock" splits in two words
    assert unlocked[2] == "50" and int(unlocked[4]) >= 0  # racy: may or may not lose some
    assert "hand-offs" in out or "none" in out
    assert not client.keys("redlease:*demo*")  # it cleaned up after itself


def test_python_dash_m_entry_point(server: RedisServer, client: redis.Redis) -> None:
    done = subprocess.run(
        [PY, "-m", "redlease", "inspect", "entry", "--url", server.url, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "REDLEASE_URL": ""},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "entry"


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


# -- demo: the flash sale -------------------------------------------------------------------------

SMALL_SALE = ["--processes", "2", "--concurrency", "4", "--gap", "0"]
COLUMNS = ("sold", "oversold", "violations", "purchases_per_s", "p50_ms", "p99_ms", "retries")


def sale(server: RedisServer, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """``redlease demo --json ARGS...`` against ``server``: exit code 0, the parsed JSON."""
    assert cli(server, "demo", "--json", *args) == 0
    out = capsys.readouterr().out
    document: dict[str, Any] = json.loads(out)
    return document


def rows(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["strategy"]: row for row in document["strategies"]}


def test_flash_sale_json_has_one_row_per_strategy(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    document = sale(server, capsys, "--stock", "5", "--buyers", "20", *SMALL_SALE)
    assert document["ok"] is True and document["failures"] == []
    assert tuple(document["columns"]) == COLUMNS
    assert [row["strategy"] for row in document["strategies"]] == [
        "naive",
        "watch",
        "lock",
        "atomic",
    ]
    for row in document["strategies"]:
        assert set(COLUMNS) <= set(row)
        assert row["attempts"] == 40  # 20 buyers click twice
        assert row["p50_ms"] <= row["p99_ms"]
        assert row["oversold"] >= 0 and row["violations"] >= 0
        if row["strategy"] != "naive":
            assert (row["sold"], row["oversold"], row["violations"]) == (5, 0, 0)
            assert row["left"] == 0
    assert document["invariant"] == {
        "available": 0,
        "reserved": 0,
        "sold": 5,
        "total": 5,
        "ok": True,
    }
    assert not client.keys("redlease:*demo*")  # it cleaned up after itself


def test_flash_sale_naive_oversells_with_a_wide_gap(
    server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """8 buyers at once all read the stock of 2 before any of them writes (200 ms later)."""
    document = sale(
        server,
        capsys,
        *("--strategies", "naive", "--stock", "2", "--buyers", "8", "--clicks", "2"),
        *("--processes", "1", "--concurrency", "8", "--gap", "200"),
    )
    naive = rows(document)["naive"]
    assert naive["oversold"] > 0 and naive["sold"] == 2 + naive["oversold"]
    assert naive["violations"] > 0  # a buyer's two clicks both read "bought nothing yet"
    assert document["ok"] is True  # naive is expected to fail: it does not count


def test_flash_sale_failed_payments_go_back_on_sale(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    document = sale(
        server,
        capsys,
        *("--strategies", "lock,atomic", "--stock", "20", "--buyers", "100"),
        *("--fail-payments", "0.5", *SMALL_SALE),
    )
    for row in document["strategies"]:
        assert row["returned"] > 0  # payments failed and their units came back...
        assert row["sold"] + row["left"] == 20  # ...and were sold again or are still on sale
        assert row["oversold"] == 0 and row["violations"] == 0
    invariant = document["invariant"]
    assert invariant["ok"] is True and invariant["reserved"] == 0
    assert invariant["available"] + invariant["sold"] == invariant["total"] == 20
    assert invariant["sold"] == rows(document)["atomic"]["sold"]
    assert not client.keys("redlease:*demo*")


def test_flash_sale_table(server: RedisServer, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--strategies", "watch,atomic", "--stock", "3", "--buyers", "6", *SMALL_SALE]
    assert cli(server, "demo", *args) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("strategy"))
    header = lines[start].split()
    assert " ".join(header[1:]) == "sold oversold violations purchases/s p50 ms p99 ms retries"
    table = {line.split()[0]: line.split() for line in lines[start + 1 : start + 3]}
    assert table["watch"][1:4] == ["3", "0", "0"] and table["atomic"][1:4] == ["3", "0", "0"]
    assert "== total 3: OK" in captured.out and "OK: " in captured.out
    assert "atomic" in captured.err  # progress goes to stderr


def test_demo_counter_option_runs_the_counter_demo(
    server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(server, "demo", "--counter", "--workers", "2", "--increments", "10") == 0
    out = capsys.readouterr().out
    locked = next(line.split() for line in out.splitlines() if "redlease.Lock" in line)
    assert locked[1:4] == ["20", "20", "0"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["demo", "--strategies", "naive,fast"], "--strategies"),
        (["demo", "--fail-payments", "1"], "--fail-payments"),
        (["demo", "--stock", "0"], "--stock"),
        (["demo", "--gap", "-1"], "--gap"),
        (["demo", "--counter", "--json"], "--json"),
        (["demo", "--workers", "2", "--stock", "5"], "--stock"),
    ],
)
def test_demo_bad_arguments_exit_2_naming_the_argument(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--url", REFUSED_URL, *argv]) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and named in err
