"""Run examples/fenced_sqlite.py: the fenced UPDATE refuses a paused holder's late write,
and its twin (the same UPDATE without ``fence <= :fence``) lets it overwrite a newer one."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import fenced_sqlite
import pytest
import redis

from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(60)
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    with RedisServer() as server:
        conn = server.client()
        yield conn
        conn.close()


def test_the_fence_refuses_the_stale_write(client: redis.Redis) -> None:
    outcome = fenced_sqlite.scenario(client, fenced=True, name="fenced")
    assert outcome.fresh_write_applied
    assert not outcome.stale_write_applied
    assert outcome.final_total == 110


def test_twin_without_the_fence_the_stale_write_wins(client: redis.Redis) -> None:
    outcome = fenced_sqlite.scenario(client, fenced=False, name="unfenced")
    assert outcome.fresh_write_applied
    assert outcome.stale_write_applied
    assert outcome.final_total == 105  # B's +10 is lost


def test_upsert_inserts_then_guards() -> None:
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute(fenced_sqlite.SCHEMA)
    assert fenced_sqlite.fenced_upsert(db, 1, 10, 5)
    assert not fenced_sqlite.fenced_upsert(db, 1, 20, 4)
    assert fenced_sqlite.fenced_upsert(db, 1, 30, 5)  # equal fence: the same holder again
    assert fenced_sqlite.total_of(db, 1) == 30
    db.close()


def test_the_script_runs_as_documented() -> None:
    done = subprocess.run(
        [sys.executable, str(HERE / "fenced_sqlite.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert "final total 110" in lines[0] and "refused" in lines[0]
    assert "final total 105" in lines[1] and "STALE WRITE APPLIED" in lines[1]
