"""``redlease demo``: the flash-sale contest.

A stock of units goes on sale; buyers in several processes (each running many buyers at once)
click Buy, each a few times at once, with a limit of units per buyer. Four strategies sell the
same sale one after the other (see :mod:`.strategies`), and the report compares them:
units sold, oversold (sold beyond the stock), buyers over their limit, purchases per second,
latency of a purchase (p50 / p99) and retries. Optionally a share of payments fails: those
units are put back on sale and sold to later buyers, and the inventory's invariant
``available + reserved + sold == total`` is checked at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import secrets
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import redlease

from .._common import CliError
from .._connection import check_connection, close_client, make_client
from .crew import Crew
from .report import Progress, percentile, table
from .strategies import (
    EXPLAINED,
    OVER_LIMIT,
    RETURNED,
    SOLD,
    SOLD_OUT,
    STRATEGIES,
    Job,
    Result,
    SaleKeys,
    buyer_process,
)

__all__ = [
    "COLUMNS",
    "Row",
    "Sale",
    "add_arguments",
    "command",
    "given_options",
    "run_contest",
]

COLUMNS = ("sold", "oversold", "violations", "purchases_per_s", "p50_ms", "p99_ms", "retries")
"""The compared figures, in the order of the table; the JSON rows use these names."""


@dataclass(frozen=True)
class Sale:
    """The settings of one contest; the defaults take a few seconds on 2 loaded cores (WATCH's
    retries and the lock's turns grow with the stock sold under contention)."""

    stock: int = 100
    buyers: int = 400
    clicks: int = 2
    limit: int = 1
    processes: int = 4
    concurrency: int = 16
    gap_ms: float = 1.0
    fail_payments: float = 0.0
    strategies: tuple[str, ...] = STRATEGIES

    @property
    def attempts(self) -> int:
        """Purchase attempts in all: every click of every buyer."""
        return self.buyers * self.clicks


# -- options ------------------------------------------------------------------------------------


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low:,} to {high:,}, got {text}")
        return value

    return parse


def _number(low: float, high: float, *, high_open: bool = False) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if math.isnan(value) or value < low or value > high or (high_open and value == high):
            bound = f"below {high:g}" if high_open else f"at most {high:g}"
            raise argparse.ArgumentTypeError(f"must be >= {low:g} and {bound}, got {text}")
        return value

    return parse


def _strategies(text: str) -> tuple[str, ...]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in STRATEGIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"choose among {','.join(STRATEGIES)} (comma-separated), got {text!r}"
        )
    return tuple(name for name in STRATEGIES if name in names)


_D = Sale()
_OPTIONS: list[tuple[str, str, Any, str]] = [
    ("--stock", "N", _bounded_int(1, 10**6), f"units on sale (default: {_D.stock})"),
    ("--buyers", "N", _bounded_int(1, 100_000), f"buyers (default: {_D.buyers:,})"),
    (
        "--clicks",
        "N",
        _bounded_int(1, 10),
        f"times each buyer clicks Buy, at once (default: {_D.clicks})",
    ),
    ("--limit", "N", _bounded_int(1, 10**6), f"units allowed per buyer (default: {_D.limit})"),
    ("--processes", "N", _bounded_int(1, 16), f"buyer processes (default: {_D.processes})"),
    (
        "--concurrency",
        "N",
        _bounded_int(1, 128),
        f"buyers at once in each process (default: {_D.concurrency})",
    ),
    (
        "--gap",
        "MS",
        _number(0, 1000),
        "milliseconds a buyer spends between its read and its write (naive, watch, lock; "
        f"default: {_D.gap_ms:g})",
    ),
    (
        "--fail-payments",
        "SHARE",
        _number(0, 1, high_open=True),
        "share of payments that fail, e.g. 0.2: their units go back on sale (default: 0)",
    ),
    (
        "--strategies",
        "LIST",
        _strategies,
        f"comma-separated subset of {','.join(STRATEGIES)} (default: all)",
    ),
]


def add_arguments(group: Any) -> None:
    """Declare the flash sale's options on ``group`` (an argparse parser or group)."""
    for flag, metavar, kind, text in _OPTIONS:
        group.add_argument(flag, type=kind, default=None, metavar=metavar, help=text)
    group.add_argument("--json", action="store_true", help="print one JSON object, no table")


def given_options(args: argparse.Namespace) -> list[str]:
    """The flash-sale options present in ``args`` (to refuse them next to ``--counter``)."""
    given = [flag for flag, *_ in _OPTIONS if getattr(args, _dest(flag)) is not None]
    return [*given, "--json"] if args.json else given


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def sale_from(args: argparse.Namespace) -> Sale:
    """The :class:`Sale` described by the options (defaults for those not given)."""
    names = {"--gap": "gap_ms"}
    given = {
        names.get(flag, _dest(flag)): getattr(args, _dest(flag))
        for flag, *_ in _OPTIONS
        if getattr(args, _dest(flag)) is not None
    }
    return Sale(**given)


def command(args: argparse.Namespace, url: str, label: str) -> int:
    """Run the contest against ``url`` (described as ``label``) with ``args``' options."""
    return run_contest(url, label, sale_from(args), prefix=args.prefix, as_json=args.json)


# -- the parent -----------------------------------------------------------------------------------


@dataclass
class Row:
    """One strategy's figures (the JSON row): :data:`COLUMNS`, then the details."""

    strategy: str
    sold: int
    oversold: int
    violations: int
    purchases_per_s: float
    p50_ms: float
    p99_ms: float
    retries: int
    attempts: int
    refused_sold_out: int
    refused_over_limit: int
    returned: int
    left: int  # units left according to Redis at the end
    seconds: float


class _Crew(Crew):
    """The buyer processes of the flash sale and the messages they send."""

    def __init__(self, jobs: list[Job], sale: Sale, progress: Progress) -> None:
        count = len(sale.strategies)
        super().__init__(
            buyer_process,
            jobs,
            phases=count,
            slots=2 * count * len(jobs),
            progress=progress,
            name="redlease-demo-buyers",
            noun="buyer",
        )
        self.sale = sale
        self.results: list[dict[int, Result]] = [{} for _ in range(count)]

    def finished(self, k: int) -> bool:
        """Whether every buyer process reported the end of strategy ``k``."""
        return len(self.results[k]) == len(self.procs)

    def bar(self, k: int, width: int = 30) -> str:
        """Progress of strategy ``k``: clicks answered, units sold."""
        n = len(self.procs)
        figures = self.progress[2 * k * n : 2 * (k + 1) * n]
        done, sold = sum(figures[0::2]), sum(figures[1::2])
        total = self.sale.attempts
        filled = width * done // total if total else width
        name = self.sale.strategies[k]
        return (
            f"{name:<7}[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} clicks, "
            f"{sold:,} sold of {self.sale.stock:,}"
        )

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind, index = message[0], message[1]
        if kind == "ready":
            self.ready.add(index)
        elif kind == "done":
            self.results[message[2]][index] = message[3]
        elif kind == "error":
            raise CliError(f"buyer process {index} failed: {message[2]}", 1)


def _jobs(url: str, prefix: str, run: str, sale: Sale) -> list[Job]:
    users = [f"buyer-{n}" for n in range(sale.buyers)]
    count = min(sale.processes, sale.buyers)
    return [
        Job(
            index=i,
            url=url,
            prefix=prefix,
            run=run,
            strategies=sale.strategies,
            users=tuple(users[i::count]),
            clicks=sale.clicks,
            concurrency=sale.concurrency,
            limit=sale.limit,
            gap=sale.gap_ms / 1000,
            fail=sale.fail_payments,
            seed=run,
        )
        for i in range(count)
    ]


@dataclass
class _Outcome:
    """Everything the report needs."""

    rows: list[Row] = field(default_factory=list)
    invariant: dict[str, Any] | None = None  # atomic: the inventory's counts at the end


def run_contest(
    url: str,
    label: str,
    sale: Sale,
    *,
    prefix: str = "redlease",
    as_json: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run every strategy of ``sale`` against Redis at ``url`` and print the report.

    Returns the exit code: 0 if no strategy but ``naive`` oversold or let a buyer pass the
    limit (and the inventory's invariant held), 1 otherwise.
    """
    out = sys.stdout if out is None else out
    progress = Progress(sys.stderr if err is None else err)
    client: Any = make_client(url)  # a cluster client too
    check_connection(client, url)
    run = secrets.token_hex(4)
    jobs = _jobs(url, prefix, run, sale)
    intro = _intro(sale, len(jobs), label)
    if as_json:
        progress.line(intro)
    else:
        print(intro + "\n", file=out, flush=True)
    crew = _Crew(jobs, sale, progress)
    outcome = _Outcome()
    try:
        progress.line(f"starting {len(jobs)} buyer processes...")
        crew.start()
        crew.wait_until(
            lambda: len(crew.ready) == len(jobs),
            lambda: f"starting buyer processes: {len(crew.ready)}/{len(jobs)} ready",
        )
        for k, name in enumerate(sale.strategies):
            keys = SaleKeys.build(prefix, run, name)
            inventory = redlease.Inventory(client, keys.inventory, prefix=prefix)
            counts: redlease.Stock | None = None  # atomic: the inventory's, at the end
            try:
                if name == "atomic":
                    inventory.restock(sale.stock)
                else:
                    client.set(keys.stock, sale.stock)
                progress.line(f"{name}: {sale.attempts:,} clicks for {sale.stock:,} units...")
                crew.go[k].set()
                crew.wait_until(functools.partial(crew.finished, k), functools.partial(crew.bar, k))
                if name == "atomic":
                    counts = inventory.snapshot()
                    left = counts.available
                else:
                    left = int(client.get(keys.stock) or 0)
            finally:
                with contextlib.suppress(Exception):  # best effort: small, unique keys
                    client.delete(*keys.all_keys(prefix))
            row = _row(name, list(crew.results[k].values()), sale, left)
            outcome.rows.append(row)
            if counts is not None:
                outcome.invariant = {**asdict(counts), "ok": _invariant_holds(counts, row, sale)}
            progress.line(f"{name}: {row.attempts:,} clicks in {row.seconds:.2f} s")
        if progress.tty and not as_json:
            progress.line("")
    finally:
        crew.stop()
        close_client(client)
    failures = _failures(outcome, sale)
    code = 1 if failures else 0
    if as_json:
        _print_json(outcome, sale, label, failures, out)
    else:
        _report(outcome, sale, failures, out)
    return code


def _intro(sale: Sale, processes: int, label: str) -> str:
    clicks = "once" if sale.clicks == 1 else f"{sale.clicks} times at once"
    failing = f"; {sale.fail_payments:.0%} of payments fail" if sale.fail_payments else ""
    return (
        f"redlease demo: a flash sale of {sale.stock:,} units, at most {sale.limit:,} per "
        f"buyer{failing}\n"
        f"{sale.buyers:,} buyers click Buy {clicks}, {sale.concurrency} at a time in each of "
        f"{processes} processes;\n"
        f"a buyer spends {sale.gap_ms:g} ms between its read and its write (naive, watch, "
        f"lock)\nserver: {label}"
    )


def _row(name: str, results: list[Result], sale: Sale, left: int) -> Row:
    outcomes: Counter[str] = Counter()
    bought: Counter[str] = Counter()
    latencies: list[float] = []
    for result in results:
        outcomes.update(result.outcomes)
        bought.update(result.bought)
        latencies.extend(result.latencies)
    latencies.sort()
    seconds = (max(r.end_ns for r in results) - min(r.start_ns for r in results)) / 1e9
    attempts = sum(outcomes.values())
    sold = outcomes[SOLD]
    return Row(
        strategy=name,
        sold=sold,
        oversold=max(0, sold - sale.stock),
        violations=sum(1 for units in bought.values() if units > sale.limit),
        purchases_per_s=round(attempts / seconds, 1) if seconds > 0 else 0.0,
        p50_ms=round(percentile(latencies, 50), 3) if latencies else 0.0,
        p99_ms=round(percentile(latencies, 99), 3) if latencies else 0.0,
        retries=sum(r.retries for r in results),
        attempts=attempts,
        refused_sold_out=outcomes[SOLD_OUT],
        refused_over_limit=outcomes[OVER_LIMIT],
        returned=outcomes[RETURNED],
        left=left,
        seconds=round(seconds, 3),
    )


def _invariant_holds(counts: redlease.Stock, row: Row, sale: Sale) -> bool:
    """available + reserved + sold == total == the stock, none negative, no hold left, and
    sold as many as the buyers were told."""
    parts = (counts.available, counts.reserved, counts.sold)
    return (
        sum(parts) == counts.total == sale.stock
        and min(parts) >= 0
        and counts.reserved == 0
        and counts.sold == row.sold
    )


def _failures(outcome: _Outcome, sale: Sale) -> list[str]:
    """What went wrong for the strategies that must be correct (all but naive)."""
    failures = []
    for row in outcome.rows:
        if row.strategy == "naive":
            continue
        if row.oversold or row.violations:
            failures.append(
                f"{row.strategy} oversold {row.oversold:,} units and let "
                f"{row.violations:,} buyers pass the limit"
            )
        if row.left + row.sold != sale.stock:
            failures.append(
                f"{row.strategy}: Redis has {row.left:,} units left after {row.sold:,} sold "
                f"of {sale.stock:,} (an update was lost)"
            )
    if outcome.invariant is not None and not outcome.invariant["ok"]:
        failures.append("atomic: the inventory's invariant does not hold")
    return failures


def _print_json(
    outcome: _Outcome, sale: Sale, label: str, failures: list[str], out: TextIO
) -> None:
    document = {
        "settings": {**asdict(sale), "strategies": list(sale.strategies)},
        "server": label,
        "columns": list(COLUMNS),
        "strategies": [asdict(row) for row in outcome.rows],
        "invariant": outcome.invariant,
        "failures": failures,
        "ok": not failures,
    }
    json.dump(document, out, indent=2)
    out.write("\n")
    out.flush()


def _report(outcome: _Outcome, sale: Sale, failures: list[str], out: TextIO) -> None:
    failing = sale.fail_payments > 0
    header = ["strategy", "sold", "oversold", "violations", "purchases/s", "p50 ms", "p99 ms"]
    header += ["retries", *(["returned"] if failing else [])]
    rows = [header]
    print(
        "  The same sale, sold four ways: naive oversells; the others never do, and differ in "
        "what that costs.",
        file=out,
    )
    for row in outcome.rows:
        cells = [row.strategy, f"{row.sold:,}", f"{row.oversold:,}", f"{row.violations:,}"]
        cells += [f"{row.purchases_per_s:,.0f}", f"{row.p50_ms:.2f}", f"{row.p99_ms:.2f}"]
        cells += [f"{row.retries:,}", *([f"{row.returned:,}"] if failing else [])]
        rows.append(cells)
    table(rows, out)
    print(file=out)
    for row in outcome.rows:
        print(f"  {row.strategy:<7} {EXPLAINED[row.strategy]}", file=out)
    print(
        "\n  oversold: units sold beyond the stock; violations: buyers who got more than "
        f"{sale.limit};\n  latency: from a click to its answer; retries: transactions "
        "run again after a conflict",
        file=out,
    )
    if outcome.invariant is not None:
        inv = outcome.invariant
        print(
            f"\natomic, at the end: available {inv['available']:,} + reserved "
            f"{inv['reserved']:,} + sold {inv['sold']:,} == total {inv['total']:,}: "
            f"{'OK' if inv['ok'] else 'BROKEN'}",
            file=out,
        )
    if failing:
        print(file=out)
        for row in outcome.rows:
            if row.strategy == "naive":
                continue  # its counts mean nothing
            fate = "all sold again to later buyers"
            if row.left:
                fate = f"{row.left:,} left unsold (no buyer left)"
            print(
                f"  {row.strategy:<7} {row.returned:,} units back from failed payments, {fate} "
                f"({row.sold:,} of {sale.stock:,} sold)",
                file=out,
            )
    print(file=out)
    if failures:
        for failure in failures:
            print(f"FAILED: {failure}.", file=out)
        return
    correct = [row for row in outcome.rows if row.strategy != "naive"]
    text = "OK"
    if correct:
        names = ", ".join(row.strategy for row in correct)
        text += f": {names} sold {max(row.sold for row in correct):,} units at most, none "
        text += "beyond the stock or a buyer's limit"
    for row in outcome.rows:
        if row.strategy == "naive":
            text += (
                f";\n    naive oversold {row.oversold:,} units and let {row.violations:,} "
                "buyers pass the limit"
            )
    print(text + ".", file=out)
