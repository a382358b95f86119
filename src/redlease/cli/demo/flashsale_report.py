"""The flash sale's report: a strategy's figures, what went wrong, the table or the JSON."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

import redlease

from .flashsale_settings import Sale
from .report import percentile, table
from .strategies import EXPLAINED, OVER_LIMIT, RETURNED, SOLD, SOLD_OUT, Result

__all__ = [
    "COLUMNS",
    "Outcome",
    "Row",
    "failures_of",
    "intro",
    "invariant_holds",
    "print_json",
    "print_report",
    "row_of",
]

COLUMNS = ("sold", "oversold", "violations", "purchases_per_s", "p50_ms", "p99_ms", "retries")
"""The compared figures, in the order of the table; the JSON rows use these names."""


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


@dataclass
class Outcome:
    """Everything the report needs."""

    rows: list[Row] = field(default_factory=list)
    invariant: dict[str, Any] | None = None  # atomic: the inventory's counts at the end


def intro(sale: Sale, processes: int, label: str) -> str:
    """What is about to be sold, to whom, and on which server (before the contest)."""
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


def row_of(name: str, results: list[Result], sale: Sale, left: int) -> Row:
    """Strategy ``name``'s figures from its buyer processes' results (``left``: units unsold)."""
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


def invariant_holds(counts: redlease.Stock, row: Row, sale: Sale) -> bool:
    """available + reserved + sold == total == the stock, none negative, no hold left, and
    sold as many as the buyers were told."""
    parts = (counts.available, counts.reserved, counts.sold)
    return (
        sum(parts) == counts.total == sale.stock
        and min(parts) >= 0
        and counts.reserved == 0
        and counts.sold == row.sold
    )


def failures_of(outcome: Outcome, sale: Sale) -> list[str]:
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


def print_json(outcome: Outcome, sale: Sale, label: str, failures: list[str], out: TextIO) -> None:
    """The report as one JSON object on ``out``."""
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


def print_report(outcome: Outcome, sale: Sale, failures: list[str], out: TextIO) -> None:
    """The report as a table and its explanations on ``out``."""
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
