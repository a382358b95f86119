"""Each rate-limit algorithm's documented bound, checked on randomized runs on a real server.

Hypothesis draws limits (one or two, windows of tens of ms), a cost per hit and a short sleep
before each. The hits run through the algorithm's script, which returns the server's ``TIME``
of each call, so the check uses the very clock the script decided by. For every limit,
``units(a, b)`` is the cost admitted between the admitted hits at server times ``a <= b``:

* fixed: ``units`` in the first window (from the first hit) <= L; in any span of W, <= 2 L;
* sliding: ``units(a, b) <= L * (1 + (b - a) / W)`` for ``b - a <= W``; <= L per aligned window;
* gcra: ``units(a, b) <= L + L * (b - a) / W``;
* token_bucket: ``units(a, b) <= burst + L * (b - a) / W``.

The twins show that the checks can fail: a synthetic fixed-window trace breaks the sliding
bound, and so does a real fixed-window run timed across a window's end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redlease._core import ratelimit as core
from redlease._core.rates import Rate

pytestmark = pytest.mark.timeout(120)
TOLERANCE = 1e-6  # units: the scripts' own slack against floating-point rounding
Hit = tuple[int, int]  # (server time us, cost) of an admitted hit


def run(client: redis.Redis, algorithm: str, rates: Sequence[Rate], sizes: Sequence[int],
        program: Sequence[tuple[float, int]], subject: str) -> tuple[list[Hit], int]:  # fmt: skip
    """The admitted hits of ``program`` ((sleep s, cost) per hit), and how many were refused."""
    script = client.register_script(core.script(algorithm).source)  # type: ignore[arg-type]
    keys = core.keys("bounds", b"t", algorithm, subject.encode(), rates)  # type: ignore[arg-type]
    admitted: list[Hit] = []
    refused = 0
    for pause, cost in program:
        time.sleep(pause)
        raw = script(keys=keys, args=[cost, 1, *core.limit_args(rates, sizes)])
        now, answer = core.decode_reply(raw, rates)
        if answer.allowed:
            admitted.append((now, cost))
        else:
            refused += 1
    return admitted, refused


def spans(hits: list[Hit]) -> list[tuple[float, int]]:
    """(b - a in s, units admitted between) for every pair of admitted hits a <= b."""
    found = []
    for i, (start, _) in enumerate(hits):
        units = 0
        for end, cost in hits[i:]:
            units += cost
            found.append(((end - start) / 1e6, units))
    return found


def violations(algorithm: str, hits: list[Hit], rate: Rate, size: int) -> list[str]:
    """The breaches of ``algorithm``'s documented bound in ``hits`` for limit ``rate``."""
    amount, window = rate.amount, rate.window
    bad = []
    for span, units in spans(hits):
        if algorithm == "fixed":
            most = 2 * amount if span < window else None
        elif algorithm == "sliding":
            most = amount * (1 + span / window) if span <= window else None
        elif algorithm == "gcra":
            most = amount + amount * span / window
        else:
            most = size + amount * span / window
        if most is not None and units > most + TOLERANCE:
            bad.append(f"{units} units in {span * 1000:.3f} ms, bound {most:.3f}")
    if algorithm == "fixed" and hits:  # the first window starts at the first hit (1 ms: PX)
        first = sum(c for t, c in hits if t - hits[0][0] < window * 1e6 - 1000)
        if first > amount:
            bad.append(f"{first} units in the first window, limit {amount}")
    if algorithm == "sliding":
        per_window: dict[int, int] = {}
        for t, c in hits:
            index = int(t // round(window * 1e6))
            per_window[index] = per_window.get(index, 0) + c
        bad += [f"{u} units in aligned window {i}" for i, u in per_window.items() if u > amount]
    return bad


@st.composite
def scenarios(draw: Any) -> tuple[list[Rate], list[int], list[tuple[float, int]]]:
    window_ms = draw(st.sampled_from([20, 40, 70]))
    rates = [Rate(window_ms / 1000, draw(st.integers(1, 6)))]
    if draw(st.booleans()):  # a second, longer limit checked in the same call
        rates.append(Rate(3 * window_ms / 1000, draw(st.integers(rates[0].amount, 12))))
    sizes = [draw(st.integers(1, 8)) for _ in rates]
    most = min(min(r.amount for r in rates), min(sizes))
    program = draw(
        st.lists(
            st.tuples(st.sampled_from([0.0, 0.0, 0.001, 0.003, 0.008]), st.integers(1, most)),
            min_size=10,
            max_size=40,
        )
    )
    return rates, sizes, program


@pytest.mark.parametrize("algorithm", core.ALGORITHMS)
def test_admitted_units_stay_within_the_documented_bound(
    client: redis.Redis, algorithm: str
) -> None:
    runs = iter(range(10**6))

    @settings(
        max_examples=25,
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(scenarios())
    def check(scenario: tuple[list[Rate], list[int], list[tuple[float, int]]]) -> None:
        rates, sizes, program = scenario
        if algorithm != "token_bucket":
            sizes = [r.amount for r in rates]
        admitted, _ = run(client, algorithm, rates, sizes, program, f"s{next(runs)}")
        assert admitted  # the first hit always passes: it costs at most every limit
        for rate, size in zip(rates, sizes, strict=True):
            assert violations(algorithm, admitted, rate, size) == []

    check()


def test_twin_a_fixed_window_trace_breaks_the_sliding_bound() -> None:
    """L by a window's end and L just after: the fixed window admits it, the check sees it."""
    rate = Rate(0.1, 5)
    trace = [(0, 1)] + [(99_000 + i, 1) for i in range(4)] + [(101_000 + i, 1) for i in range(5)]
    assert violations("fixed", trace, rate, 5) == []  # within fixed's own bound (2 L)
    assert violations("sliding", trace, rate, 5)
    assert violations("gcra", trace, rate, 5)
    assert violations("token_bucket", trace, rate, 5)


def test_twin_a_real_fixed_window_run_breaks_the_sliding_bound(client: redis.Redis) -> None:
    """The same on the server: fill a fixed window just before it ends, then again after."""
    rate, amount = Rate(0.4, 10), 10
    script = client.register_script(core.FIXED.source)
    keys = core.keys("bounds", b"twin", "fixed", b"s", [rate])
    args = [1, 1, *core.limit_args([rate], [amount])]
    hits: list[Hit] = []
    now, first = core.decode_reply(script(keys=keys, args=args), [rate])
    hits.append((now, 1))
    time.sleep(max(first.reset_after - 0.03, 0))  # near the window's end
    for attempt in range(6 * amount):  # bounded: a burst fills it, then the next one fills
        if len(hits) == 2 * amount:
            break
        if attempt >= amount - 1:
            time.sleep(0.005)
        now, answer = core.decode_reply(script(keys=keys, args=args), [rate])
        if answer.allowed:
            hits.append((now, 1))
    assert len(hits) == 2 * amount  # both windows filled
    assert violations("fixed", hits, rate, amount) == []
    assert violations("sliding", hits, rate, amount)
