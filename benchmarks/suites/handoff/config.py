"""The hand-off benchmark's targets, settings and command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from harness import config

from suites.handoff.libs import LIBS

DESCRIPTION = (
    "Hand-off benchmark: redlease against redis-py's Lock and python-redis-lock, in one run."
)

# Targets (all ratios of figures from the same run).
TARGET_UNCONTENDED = 1.05  # redlease p50 / raw floor p50 (asyncio: / the redis.asyncio floor)
TARGET_WAIT_CMDS = 0.0  # redlease commands per second per blocked waiter
TARGET_RECOVERY_SLACK = 0.050  # s: kill -> acquire within ttl + this
JOIN_AT = 0.4  # crash test: the waiter starts waiting this fraction of the ttl after the holder


@dataclass
class Config:
    url: str
    quick: bool
    libs: list[str]
    iters: int
    warm: int
    rounds: int
    contend_sizes: tuple[int, ...]
    contend_seconds: float
    waiters: int
    wait_window: float
    wait_settle: float
    crash_ttl: float


def settings(url: str, quick: bool, libs: list[str]) -> Config:
    """The full run's settings, or the smoke run's (``quick``)."""
    if quick:
        return Config(url, True, libs, 600, 100, 4, (4, 16), 1.0, 4, 1.5, 0.4, 2.0)
    return Config(url, False, libs, 3000, 300, 10, (4, 16), 3.0, 8, 2.5, 0.5, 3.0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = config.parser(DESCRIPTION)
    config.add_url(p)
    config.add_quick(p)
    config.add_json(p)
    p.add_argument(
        "--libs",
        default=",".join(LIBS),
        help=f"comma-separated subset of: {', '.join(LIBS)}",
    )
    p.add_argument(
        "--sizes",
        default=None,
        help="comma-separated numbers of processes for section 2 (default: 4,16)",
    )
    config.add_sections(p, "1,2,3,4", help="comma-separated subset of the sections 1,2,3,4 to run")
    return p.parse_args(argv)
