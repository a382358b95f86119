"""The rate notation (``"100/minute;5000/day"``) and the choice of the tightest limit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redlease._core import ratelimit as core
from redlease._core.rates import UNITS, Rate, parse, rates


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10/second", [(10, 1)]),
        ("5 per minute", [(5, 60)]),
        ("10/2 minutes", [(10, 120)]),
        ("1000 PER 30 Days", [(1000, 30 * 86400)]),
        ("100/minute;5000/day", [(100, 60), (5000, 86400)]),
        (" 5000/day , 100/minute ", [(100, 60), (5000, 86400)]),  # sorted by window
        ("1/second|2/hour", [(1, 1), (2, 3600)]),
        ("3/month", [(3, 30 * 86400)]),
    ],
)
def test_the_limits_notation(text: str, expected: list[tuple[int, int]]) -> None:
    assert [(r.amount, r.window) for r in parse(text)] == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "must be limits"),
        ("10", "must be limits"),
        ("10/fortnight", "must be limits"),
        ("ten/second", "must be limits"),
        ("10/second;", "must be limits"),
        ("-1/second", "must be limits"),
        ("1.5/second", "must be limits"),
        ("0/second", "of 0"),
        ("5/0 minutes", "of 0"),
        ("1/year", "30 days"),
        ("2/31 days", "30 days"),
        ("1/minute;2/60 seconds", "one window"),
    ],
)
def test_bad_notation_names_the_argument(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=rf"^rate .*{says}"):
        parse(text)


def test_rate_and_limit_window_are_exclusive() -> None:
    assert rates(None, None, None) == (Rate(60.0, 20),)
    assert rates(None, 3, 0.5) == (Rate(0.5, 3),)
    assert rates("3/second", None, None) == (Rate(1.0, 3),)
    for limit, window in ((3, None), (None, 1.0), (3, 1.0)):
        with pytest.raises(ValueError, match="rate and limit/window are exclusive"):
            rates("3/second", limit, window)
    with pytest.raises(TypeError, match=r"^rate must be a str"):
        parse(b"3/second")


_UNIT = st.sampled_from(sorted(u for u in UNITS if u != "year"))


@st.composite
def limit_texts(draw: Any) -> tuple[str, int, int]:
    amount = draw(st.integers(1, 10**6))
    multiple = draw(st.one_of(st.none(), st.integers(1, 30)))
    unit = draw(_UNIT)
    if multiple is not None and multiple * UNITS[unit] > 30 * 86400:
        multiple = 1
    plural = draw(st.sampled_from(["", "s"]))
    word = draw(st.sampled_from([unit, unit.upper(), unit.title()])) + plural
    sep = draw(st.sampled_from(["/", " / ", " per ", "per"]))
    count = "" if multiple is None else f"{multiple} "
    return f"{amount}{sep}{count}{word}", amount, (multiple or 1) * UNITS[unit]


@given(st.lists(limit_texts(), min_size=1, max_size=4), st.sampled_from([";", ",", "|", " ; "]))
def test_any_written_limits_parse_back(parts: list[tuple[str, int, int]], sep: str) -> None:
    windows = [w for _, _, w in parts]
    text = sep.join(t for t, _, _ in parts)
    if len(set(windows)) < len(windows):
        with pytest.raises(ValueError, match="one window"):
            parse(text)
        return
    parsed = parse(text)
    assert [r.window for r in parsed] == sorted(windows)
    assert sorted((r.window, r.amount) for r in parsed) == sorted((w, a) for _, a, w in parts)
    assert parse(";".join(map(str, parsed))) == parsed  # str() writes the notation back


@given(st.text(max_size=30))
def test_anything_else_is_a_value_error_naming_rate(text: str) -> None:
    try:
        parse(text)
    except ValueError as exc:
        assert str(exc).startswith("rate ")


def test_the_tightest_limit_decides() -> None:
    per_second, per_day = Rate(1.0, 10), Rate(86400.0, 1000)
    raw = [123, 1, 9, 0, 1_000_000, 0, 0, 5_000_000, 86_000_000_000]
    now, answer = core.decode_reply(raw, (per_second, per_day))
    assert now == 123
    assert (answer.allowed, answer.limit, answer.window, answer.retry_after) == (
        False, 1000, 86400.0, 5.0,
    )  # fmt: skip
    assert [r.allowed for r in answer.limits] == [True, False]
    allowed = core.decode_reply([1, 1, 9, 0, 1, 1, 3, 0, 2], (per_second, per_day))[1]
    assert (allowed.allowed, allowed.remaining, allowed.limit) == (True, 3, 1000)
    both = core.decode_reply([1, 0, 0, 7_000_000, 1, 0, 0, 2_000_000, 1], (per_second, per_day))
    assert both[1].retry_after == 7.0  # the longest wait among the refusals
    with pytest.raises(ValueError, match="rate limit script"):
        core.decode_reply([1, 1, 9, 0, 1], (per_second, per_day))


def test_keys_and_arguments_per_limit() -> None:
    two = (Rate(1.0, 10), Rate(86400.0, 1000))
    assert core.keys("p", b"api", "sliding", b"u", two) == [
        b"p:ratelimit:api:sliding:1000:{u}",
        b"p:ratelimit:api:sliding:86400000:{u}",
    ]
    assert core.keys("p", b"api", "gcra", b"u", two[:1]) == [b"p:ratelimit:api:gcra:1000:{u}"]
    sizes = core.bursts(None, two, "fixed")
    assert core.limit_args(two, sizes) == [10, 1000, 10, 1000, 86400000, 1000]
    assert core.bursts(5, two, "token_bucket") == (5, 5)
    assert core.bursts([5, 50], two, "token_bucket") == (5, 50)
    with pytest.raises(ValueError, match=r"^burst applies to algorithm='token_bucket'"):
        core.bursts(5, two, "gcra")
    with pytest.raises(ValueError, match=r"^burst must have one size per limit"):
        core.bursts([5], two, "token_bucket")
    with pytest.raises(TypeError, match=r"^burst must be"):
        core.bursts(5.0, two, "token_bucket")
    with pytest.raises(ValueError, match=r"^burst "):
        core.bursts(0, two, "token_bucket")
