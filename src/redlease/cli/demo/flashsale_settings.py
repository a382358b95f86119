"""The flash sale's settings: :class:`Sale` and the ``redlease demo`` options that describe one."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .strategies import STRATEGIES

__all__ = ["Sale", "add_arguments", "given_options", "sale_from"]


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
