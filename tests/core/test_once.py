"""Once's pure part: durations, periods, keys and the decoding of its scripts' replies."""

from __future__ import annotations

import datetime

import pytest

from redlease._core.duration import parse_duration
from redlease._core.once import (
    BUSY,
    DONE_RECENTLY,
    STARTED,
    OnceKeys,
    OnceReleased,
    Start,
    decode_finish,
    decode_force_release,
    decode_inspect,
    decode_start,
    every_ms,
    lease_ms,
)
from redlease.errors import ForeignData

KEYS = OnceKeys.build("redlease", b"job")
KEY = KEYS.run


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("15m", 900.0),
        ("24h", 86400.0),
        ("7d", 604800.0),
        ("1w", 604800.0),
        ("1h30m", 5400.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (" 24H ", 86400.0),
        ("3600", 3600.0),
        ("0.5", 0.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "h", "24x", "1h1h", "-5s", "0", "0s", "-1", "nan", "inf", "1 h", "h24", "1h 30m"]
)
def test_bad_durations_name_the_argument(text: str) -> None:
    with pytest.raises(ValueError, match=r"^--every must be"):
        parse_duration(text, "--every")


def test_a_duration_is_text() -> None:
    with pytest.raises(TypeError, match=r"^every must be str"):
        parse_duration(5, "every")  # type: ignore[arg-type]


def test_periods() -> None:
    assert every_ms(60) == 60_000
    assert every_ms(0.0001) == 1
    assert every_ms(datetime.timedelta(minutes=15)) == 900_000
    assert every_ms("15m") == every_ms("900") == 900_000
    with pytest.raises(ValueError, match=r"^every "):
        every_ms(datetime.timedelta(0))
    with pytest.raises(ValueError, match=r"^every must be > 0 and at most 400 days"):
        every_ms(10**400)


def test_leases() -> None:
    assert lease_ms(10) == lease_ms("10s") == lease_ms(datetime.timedelta(seconds=10)) == 10_000
    assert lease_ms("1m30s") == 90_000
    with pytest.raises(ValueError, match=r"^ttl must be at least 0.05 seconds .*\(from '10ms'\)$"):
        lease_ms("10ms")
    with pytest.raises(ValueError, match=r"^ttl must be at most 30 days"):
        lease_ms(datetime.timedelta(days=31))
    with pytest.raises(TypeError, match=r"^ttl must be"):
        lease_ms(None)


def test_the_keys_follow_the_common_layout() -> None:
    assert KEYS.in_order() == [b"redlease:{job}:once:run", b"redlease:{job}:once:fence"]
    assert OnceKeys.build("app", b"a:b").run == b"app:{a:b}:once:run"


def test_start_replies() -> None:
    assert decode_start([1, 7, 1000], "job", KEYS) == Start(STARTED, 7, 1000)
    assert decode_start([0, 500, 1000], "job", KEYS).status == BUSY
    assert decode_start([2, 500, 1000], "job", KEYS).status == DONE_RECENTLY
    with pytest.raises(ForeignData) as info:
        decode_start([-3, 1], "job", KEYS)
    assert info.value.key == KEY
    with pytest.raises(ForeignData) as info:
        decode_start([-3, 2], "job", KEYS)
    assert info.value.key == KEYS.fence
    for raw in ([5, 1, 1], [1, 2], None, [b"x", 1, 1]):
        with pytest.raises(ValueError, match=r"once_start.lua"):
            decode_start(raw, "job", KEYS)


def test_finish_replies() -> None:
    assert decode_finish([1, 5]) == (True, 5)
    assert decode_finish([0, 5]) == (False, 5)
    with pytest.raises(ValueError):
        decode_finish([1])


TOKEN = b"p.0123456789abcdef0123456789abcdef.host-a:42:x"


def _raw(now: int, state: bytes | None, until: int, end: int | None = None) -> list[object]:
    return [now, state, b"3", b"1000", end, until, b"60000", b"host-a", b"42", TOKEN]


def test_inspect_replies() -> None:
    assert decode_inspect([5, *[None] * 9], "j", KEYS) is None
    running = decode_inspect(_raw(2000, b"running", 11000), "j", KEYS)
    assert running is not None
    assert (running.state, running.started, running.ended) == ("running", 1.0, None)
    assert (running.fence, running.host, running.pid, running.every) == (3, "host-a", 42, 60.0)
    assert running.free_in == 9.0 and running.token == "p.01234567"  # its start
    # A running run whose lease ran out: its holder died (or lost Redis) before finishing.
    lost = decode_inspect(_raw(12000, b"running", 11000), "j", KEYS)
    assert lost is not None and (lost.state, lost.free_in) == ("lost", 0.0)
    done = decode_inspect(_raw(2000, b"done", 61000, end=1500), "j", KEYS)
    assert done is not None and (done.state, done.ended, done.free_in) == ("done", 1.5, 59.0)
    released = decode_inspect(_raw(2000, b"released", 1500, end=1500), "j", KEYS)
    assert released is not None and (released.state, released.free_in) == ("released", 0.0)
    with pytest.raises(ValueError, match=r"once_inspect.lua"):
        decode_inspect(_raw(2000, b"odd", 1), "j", KEYS)
    with pytest.raises(ForeignData):
        decode_inspect([-3, 1], "j", KEYS)


def test_force_release_replies() -> None:
    fence = 1_700_000_000_000_000  # a start's fence: the server's time in us
    raw = [b"p.r.host-a:42:x", b"running", fence, fence + 5]
    result = decode_force_release(raw, "j", KEYS)
    assert isinstance(result, OnceReleased)
    assert (result.name, result.fence, result.state) == ("j", fence + 5, "running")
    (removed,) = result.removed
    assert (removed.host, removed.pid, removed.since) == ("host-a", 42, fence / 1e6)
    nothing = decode_force_release([b"", b"", 0, 7], "j", KEYS)
    assert (nothing.removed, nothing.fence, nothing.state) == ((), 7, None)
    with pytest.raises(ForeignData) as info:
        decode_force_release([-3, 2], "j", KEYS)
    assert info.value.key == KEYS.fence
    for bad in ([b"x", b"done"], None, [b"x", b"done", b"no", 1]):
        with pytest.raises(ValueError, match=r"once_force_release.lua"):
            decode_force_release(bad, "j", KEYS)
