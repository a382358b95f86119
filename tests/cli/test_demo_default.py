"""``redlease demo`` with no option: the counter first (what the lock is for), then the flash
sale, its table explained in one line, with progress on stderr in every phase."""

from __future__ import annotations

import io
import time

import pytest
import redis

from redlease.cli import main
from redlease.cli.demo import report
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(120)


def test_the_default_demo_starts_with_the_counter_and_shows_every_phase(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    assert main(["--url", server.url, "demo"]) == 0
    took = time.monotonic() - began
    captured = capsys.readouterr()
    out = captured.out
    assert out.index("1/2: the counter") < out.index("2/2: a flash sale")
    locked = next(line.split() for line in out.splitlines() if "redlease.Lock " in line)
    assert locked[1:4] == ["800", "800", "0"]  # expected, final, lost: none with the lock
    assert "naive oversells; the others never do" in out  # the table, in one line
    assert out.index("OK: with the lock") < out.index("strategy")
    phases = ["no lock: ", "redlease.Lock: ", "naive: ", "watch: ", "lock: ", "atomic: "]
    for phase in phases:  # each phase says it starts and how long it took
        assert f"\n{phase}" in "\n" + captured.err, phase
    assert took < 90, f"the default demo took {took:.0f} s"  # ~10 s on a quiet machine
    assert not client.keys("redlease:*demo*")  # it cleaned up after itself


def test_progress_off_a_terminal_is_a_line_every_few_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not a terminal (a log, a pipe): no line per update, but never silent for long."""
    stream = io.StringIO()
    progress = report.Progress(stream)
    progress.update("watch 1/800")  # just started: nothing yet
    assert stream.getvalue() == ""
    monkeypatch.setattr(report, "EVERY", 0.0)  # as if EVERY seconds had passed
    progress.update("watch 2/800")
    progress.update("watch 3/800")
    assert stream.getvalue() == "watch 2/800\nwatch 3/800\n"
