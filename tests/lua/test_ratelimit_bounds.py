"""Each rate-limit algorithm's documented bound, checked on randomized runs on a real server.

Hypothesis draws limits (one or two, windows of tens of ms), a cost per hit and a short sleep
before each. The hits run through the algorithm's script, which returns the server's ``TIME``
of each call, so the check uses the very clock the script decided by. For every limit,
``units(a, b)`` is the cost admitted between the admitted hits at server times ``a <= b``:

* fixed: ``units`` in the first window (from the first hit) <= L; in any span of W, <= 2 L;
* sliding: ``units(a, b) <= L * (1 + (b - a) / W)`` for ``b - a <= W``; <= L per aligned window;
* gcra: ``units(a, b) <= L + L * (b - a + 1.5 us) / W`` (the script's 1 us slack, and rounding);
* token_bucket: ``units(a, b) <= burst + L * (b - a) / W``.

Each run is also replayed through the algorithm written again in Python
(``ratelimit_models.py``), which must agree with every answer away from rounding margins:
a script that refuses too much passes the bounds, but not the replay.

The twins show that the checks can fail: a synthetic fixed-window trace breaks the sliding
bound, and so does a real fixed-window run timed across a window's end; a refusal with units
left fails the replay.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from redlease._core import ratelimit as core
from redlease._core.ratelimit import RateLimit
from redlease._core.rates import Rate
from tests.lua.ratelimit_models import Model

pytestmark = pytest.mark.timeout(120)
TOLERANCE = 1e-6  # units: the scripts' own slack against floating-point rounding
GCRA_SLACK = 1.5e-6  # s: ratelimit_gcra.lua's 1 us SLACK, plus a double's rounding of server us
Hit = tuple[int, int]  # (server time us, cost) of an admitted hit


Call = tuple[int, int, RateLimit]  # (server time us, cost, answer) of each call


def run(client: redis.Redis, algorithm: str, rates: Sequence[Rate], sizes: Sequence[int],
        program: Sequence[tuple[float, int]], subject: str) -> list[Call]:  # fmt: skip
    """Every call of ``program`` ((sleep s, cost) per hit) with its server time and answer."""
    script = client.register_script(core.script(algorithm).source)  # type: ignore[arg-type]
    keys = core.keys("bounds", b"t", algorithm, subject.encode(), rates)  # type: ignore[arg-type]
    calls: list[Call] = []
    for pause, cost in program:
        time.sleep(pause)
        raw = script(keys=keys, args=[cost, 1, *core.limit_args(rates, sizes)])
        now, answer = core.decode_reply(raw, rates)
        calls.append((now, cost, answer))
    return calls


def admitted(calls: list[Call]) -> list[Hit]:
    return [(now, cost) for now, cost, answer in calls if answer.allowed]


def mismatches(algorithm: str, calls: list[Call], rates: Sequence[Rate],
               sizes: Sequence[int]) -> list[str]:  # fmt: skip
    """The calls whose answer, per limit, differs from the algorithm replayed in Python."""
    models = [Model(algorithm, rate, size) for rate, size in zip(rates, sizes, strict=True)]
    found = []
    for i, (now, cost, answer) in enumerate(calls):
        for model, got in zip(models, answer.limits, strict=True):
            expected = model.check(now, cost)
            if expected is not None and expected != got.allowed:
                found.append(f"call {i} (cost {cost}): {got.allowed}, model {expected}")
        if answer.allowed:
            for model, got in zip(models, answer.limits, strict=True):
                model.commit(now, cost, got)
    return found


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
            most = amount + amount * (span + GCRA_SLACK) / window
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
        calls = run(client, algorithm, rates, sizes, program, f"s{next(runs)}")
        hits = admitted(calls)
        assert hits  # the first hit always passes: it costs at most every limit
        for rate, size in zip(rates, sizes, strict=True):
            assert violations(algorithm, hits, rate, size) == []
        assert mismatches(algorithm, calls, rates, sizes) == []  # nor refuses too much

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


def test_twin_a_limiter_that_refuses_too_much_is_caught() -> None:
    """The replay's twin: a refusal with 4 of 5 units left fails every algorithm's model."""
    rate = Rate(0.1, 5)

    def answer(allowed: bool, reset: float) -> RateLimit:
        one = RateLimit(allowed, 4, 0.0 if allowed else 0.05, reset, 5, 0.1)
        return replace(one, limits=(one,))

    calls = [(0, 1, answer(True, 0.1)), (1_000, 1, answer(False, 0.099))]
    for algorithm in core.ALGORITHMS:
        assert mismatches(algorithm, calls, [rate], [5]) == ["call 1 (cost 1): False, model True"]
