"""Latency rounds: operations timed in interleaved rounds, so that bursts of load on the
machine hit every row alike, and their percentiles."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from harness.report import error_text

T = TypeVar("T")
Op = tuple[bool, Callable[[], Any]]  # (is it a coroutine function, one timed call)
Closers = list[Callable[[], Any]]
Build = Callable[[asyncio.AbstractEventLoop, Closers, dict[str, str]], dict[str, Op]]


def pct(sorted_values: list[float] | list[int], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (nan if empty)."""
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, math.ceil(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[k])


def alternate(names: Iterable[T], rnd: int) -> list[T]:
    """The order of round ``rnd``: as given in even rounds, reversed in odd ones."""
    order = list(names)
    return order if rnd % 2 == 0 else order[::-1]


def p50_us(step: Callable[[], None], calls: int) -> float:
    """The median of ``calls`` timed calls of ``step``, in microseconds."""
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        step()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


async def _timed_awaits(
    fn: Callable[[], Any], count: int, out: list[int], timeout: float | None
) -> None:
    pc = time.perf_counter_ns
    if timeout is None:
        for _ in range(count):
            t0 = pc()
            await fn()
            out.append(pc() - t0)
    else:
        for _ in range(count):
            t0 = pc()
            await asyncio.wait_for(fn(), timeout)
            out.append(pc() - t0)


def _timed_calls(
    loop: asyncio.AbstractEventLoop, op: Op, count: int, out: list[int], timeout: float | None
) -> int:
    """Run ``op`` ``count`` times, appending each call's ns to ``out``; all of them took (ns)."""
    is_async, fn = op
    pc = time.perf_counter_ns
    if is_async:
        t_start = pc()
        loop.run_until_complete(_timed_awaits(fn, count, out, timeout))
        return pc() - t_start
    t_start = pc()
    for _ in range(count):
        t0 = pc()
        fn()
        out.append(pc() - t0)
    return pc() - t_start


def time_interleaved(
    loop: asyncio.AbstractEventLoop,
    ops: dict[str, Op],
    errors: dict[str, str],
    warm: int,
    iters: int,
    rounds: int,
    async_timeout: float | None = None,
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Warm every op up, then time ``iters`` calls of each in ``rounds`` rounds, rotating the
    order every round so that bursts of load on the machine hit every op alike.

    An op that raises is dropped from ``ops`` and its error kept in ``errors``. Returns the
    latencies (ns) and the wall time spent in timed calls (ns), per op.
    """
    lat: dict[str, list[int]] = {k: [] for k in ops}
    wall: dict[str, int] = {k: 0 for k in ops}
    for key in list(ops):
        try:
            _timed_calls(loop, ops[key], warm, [], async_timeout)
        except Exception as exc:
            errors[key] = error_text(exc)
            del ops[key]
    per_round = max(1, iters // rounds)
    keys = list(ops)
    for rnd in range(rounds):
        order = keys[rnd % len(keys) :] + keys[: rnd % len(keys)]
        for key in order:
            if key not in ops:
                continue
            try:
                wall[key] += _timed_calls(loop, ops[key], per_round, lat[key], async_timeout)
            except Exception as exc:
                errors[key] = error_text(exc)
                del ops[key]
    return lat, wall


def latency_figures(values: list[int], wall_ns: int) -> dict[str, Any]:
    """ops/s and latency percentiles (us) of ``values`` (ns, sorted here)."""
    values.sort()
    return {
        "n": len(values),
        "ops_per_s": len(values) / (wall_ns / 1e9),
        "p50_us": pct(values, 50) / 1000,
        "p99_us": pct(values, 99) / 1000,
        "mean_us": sum(values) / len(values) / 1000,
        "samples_ns": values,
    }


def latency_rows(
    lat: dict[str, list[int]], wall: dict[str, int], errors: dict[str, str]
) -> dict[str, Any]:
    """The figures of every op that ran, then an ``{"error": ...}`` row for every op that failed."""
    out: dict[str, Any] = {}
    for key, values in lat.items():
        if key in errors or not values:
            continue
        out[key] = latency_figures(values, wall[key])
    for key, err in errors.items():
        out[key] = {"error": err}
    return out


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending (waiting at most 5 s for them), then close the loop."""
    with contextlib.suppress(Exception):
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(
                asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
            )
    loop.close()


def interleaved_rows(
    build: Build, warm: int, iters: int, rounds: int, async_timeout: float | None = None
) -> dict[str, Any]:
    """:func:`time_interleaved` on a private loop, as rows (:func:`latency_rows`).

    ``build(loop, closers, errors)`` makes the ops (one it cannot make goes into ``errors``)
    and appends to ``closers`` what closes their clients: each is called after the rounds, in
    order, and a coroutine it returns is run on the loop (at most 5 s); then the loop closes.
    """
    loop = asyncio.new_event_loop()
    errors: dict[str, str] = {}
    closers: Closers = []
    try:
        ops = build(loop, closers, errors)
        lat, wall = time_interleaved(loop, ops, errors, warm, iters, rounds, async_timeout)
    finally:
        for close in closers:
            with contextlib.suppress(Exception):
                result = close()
                if inspect.isawaitable(result):
                    loop.run_until_complete(asyncio.wait_for(result, 5))
        close_loop(loop)
    return latency_rows(lat, wall, errors)
