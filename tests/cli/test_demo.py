"""``redlease demo`` against real servers: the counter demo and the flash sale."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from redlease.cli import main
from redlease.cli.demo.counter import handoff_latencies
from tests.cli.helpers import REFUSED_URL, cli
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


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
    assert "hand-offs" in out  # 2 workers on one fair lock take turns: never "none"
    assert not client.keys("redlease:*demo*")  # it cleaned up after itself


def test_handoffs_pair_each_holder_with_the_next_by_fence() -> None:
    # Fences are the server's microseconds: successive holders' fences are far apart.
    samples = [
        (1_700_000_000_000_000 + 250 * i, 1_000 * i, 1_000 * i + 900, i % 2) for i in range(4)
    ]
    assert handoff_latencies(samples) == [0.0001] * 3


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
