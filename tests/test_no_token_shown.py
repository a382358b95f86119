"""What is printed never lets its reader act as the holder: a live lease's token is a
capability (``release``, ``extend``, ``adopt`` take it whole), so ``inspect()``'s results,
``redlease inspect`` (text and JSON), ``redlease top`` and the library's logs show only its
start (docs/safety.md, "What is shown of a token")."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import redlease
from redlease._core import holder
from redlease.cli import main
from redlease.cli.top import snapshot
from tests.topology import RedisServer

SECRET = re.compile(rb"[0-9a-f]{12}\.([0-9a-f]{32})")  # <process id>.<128 random bits>
NAMES = ("t:lock", "t:sem", "t:rw", "t:leader", "t:job")


def secrets_in_redis(client: redis.Redis) -> set[str]:
    """The random part of every token stored anywhere, whatever the kind of key."""
    found: set[str] = set()
    for key in client.scan_iter("*"):
        kind = client.type(key)
        if kind == b"string":
            values = [client.get(key) or b""]
        elif kind == b"hash":
            values = [*client.hkeys(key), *client.hvals(key)]
        elif kind == b"zset":
            values = list(client.zrange(key, 0, -1))
        elif kind == b"list":
            values = list(client.lrange(key, 0, -1))
        else:
            values = []
        for value in values:
            found.update(m.decode() for m in SECRET.findall(value))
    return found


def leaks(text: str, secrets: set[str]) -> list[str]:
    """The secrets of which ``text`` shows any 12 hex digits past the first 8 (the part never
    shown: 12 digits, 48 bits, do not turn up by chance)."""
    hidden = {s: [s[i : i + 12] for i in range(8, len(s) - 11)] for s in secrets}
    return sorted(s for s, runs in hidden.items() if any(run in text for run in runs))


@pytest.fixture
def everything_held(server: RedisServer, client: redis.Redis) -> Iterator[list[Any]]:
    """A lock, two permits, a read share, a leadership and a running Once, all live."""
    lock = redlease.Lock(client, "t:lock", ttl=10)
    sem = redlease.Semaphore(client, "t:sem", 2, ttl=10)
    other = redlease.Semaphore(client, "t:sem", 2, ttl=10)
    rw = redlease.ReadWriteLock(client, "t:rw", ttl=10)
    leader = redlease.Election(client, "t:leader", ttl=10)
    once = redlease.Once(client, "t:job", every="1h", ttl=10)
    assert lock.acquire() and sem.acquire() and other.acquire()
    assert rw.read.acquire()
    assert leader.campaign("node-1", timeout=5)
    run = once.try_start()
    assert run is not None
    yield [lock, sem, other, rw, leader, once]
    run.finish()
    leader.resign()
    rw.read.release()
    other.release()
    sem.release()
    lock.release()
    redlease.close(client)


def everything_shown(
    server: RedisServer, client: redis.Redis, handles: list[Any], capsys: Any
) -> str:
    lock, sem, _, rw, leader, once = handles
    shown = [repr(h.inspect()) for h in (lock, sem, rw, leader)] + [repr(once.last())]
    shown += [str(h.inspect()) for h in (lock, sem, rw, leader)]
    for name in NAMES:
        main(["--url", server.url, "inspect", name])
        main(["--url", server.url, "inspect", name, "--json"])
    main(["--url", server.url, "top", "--once", "--idle"])
    shown.append(capsys.readouterr().out)
    shown.append(repr(snapshot(client, "redlease", idle=True)))
    return "\n".join(shown)


def test_no_output_shows_a_live_token(
    server: RedisServer,
    client: redis.Redis,
    everything_held: list[Any],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secrets = secrets_in_redis(client)
    assert len(secrets) >= 6  # one per holding at least
    with caplog.at_level(logging.DEBUG, logger="redlease"):
        text = everything_shown(server, client, everything_held, capsys)
        extra = redlease.Lock(client, "t:forced", ttl=10)
        assert extra.acquire()
        secrets |= secrets_in_redis(client)
        shown = extra.inspect().held_by
        assert shown is not None
        # an operator names the holder by what inspect shows, and the log says whom it removed
        assert redlease.Lock.force_release(client, "t:forced", token=shown.token).removed
    assert "t:job" in text and "node-1" in text
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "force_released" in logged
    assert leaks(text, secrets) == []
    assert leaks(logged, secrets) == []


def test_twin_showing_whole_tokens_is_caught(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: with inspect() showing whole tokens (as it once did), the
    lock's ``repr`` leaks its secret; and a token cut after its first digits is caught too."""
    monkeypatch.setattr(holder, "shown", lambda token: token)
    lock = redlease.Lock(client, "t:whole", ttl=10)
    assert lock.acquire()
    secrets = secrets_in_redis(client)
    assert leaks(repr(lock.inspect()), secrets)
    (secret,) = secrets
    assert leaks(f"token ...{secret[10:]}", secrets)
    lock.release()
    redlease.close(client)
