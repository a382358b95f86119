"""``redlease inspect`` against real servers: free and held locks, foreign data, the URL."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis

import redlease
from redlease.cli import main
from tests.cli.helpers import REFUSED_URL, cli, keys, wait_for
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


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
