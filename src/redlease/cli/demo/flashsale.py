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
import secrets
import sys
from dataclasses import asdict
from typing import Any, TextIO

import redlease

from .._common import CliError
from .._connection import check_connection, close_client, make_client
from .crew import Crew
from .flashsale_report import (
    Outcome,
    failures_of,
    intro,
    invariant_holds,
    print_json,
    print_report,
    row_of,
)
from .flashsale_settings import Sale, sale_from
from .report import Progress
from .strategies import Job, Result, SaleKeys, buyer_process

__all__ = ["command", "run_contest"]


def command(args: argparse.Namespace, url: str, label: str) -> int:
    """Run the contest against ``url`` (described as ``label``) with ``args``' options."""
    return run_contest(url, label, sale_from(args), prefix=args.prefix, as_json=args.json)


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
    opening = intro(sale, len(jobs), label)
    if as_json:
        progress.line(opening)
    else:
        print(opening + "\n", file=out, flush=True)
    crew = _Crew(jobs, sale, progress)
    outcome = Outcome()
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
            row = row_of(name, list(crew.results[k].values()), sale, left)
            outcome.rows.append(row)
            if counts is not None:
                outcome.invariant = {**asdict(counts), "ok": invariant_holds(counts, row, sale)}
            progress.line(f"{name}: {row.attempts:,} clicks in {row.seconds:.2f} s")
        if progress.tty and not as_json:
            progress.line("")
    finally:
        crew.stop()
        close_client(client)
    failures = failures_of(outcome, sale)
    code = 1 if failures else 0
    if as_json:
        print_json(outcome, sale, label, failures, out)
    else:
        print_report(outcome, sale, failures, out)
    return code
