"""The Redlock benchmark's targets, settings and command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from harness import config

from suites.redlock.libs import LIBS

DESCRIPTION = (
    "Redlock benchmark: redlease's Redlock against pottery and aioredlock, 1 and 5 servers,"
    " one run."
)

# Targets (ratios of figures from the same run).
TARGET_VS_POTTERY = 5.0  # redlease contended acquisitions/s / pottery's
TARGET_VS_NOTHING = 1.1  # redlease p50 over 5 servers / the do-nothing Redlock's, same kind


@dataclass
class Config:
    urls: list[str]
    quick: bool
    libs: list[str]
    iters: int
    warm: int
    rounds: int
    workers: int
    contend_servers: tuple[int, ...]
    contend_seconds: float
    pause_iters: int
    pause_budget: float
    why: bool = False  # count rounds and their causes inside redlease's workers (Trace)


def settings(
    urls: list[str], quick: bool, libs: list[str], contend_servers: tuple[int, ...], why: bool
) -> Config:
    """The full run's settings, or the smoke run's (``quick``)."""
    if quick:
        return Config(urls, True, libs, 600, 100, 4, 16, contend_servers, 1.0, 3, 8.0, why)
    return Config(urls, False, libs, 3000, 300, 10, 16, contend_servers, 3.0, 5, 12.0, why)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = config.parser(DESCRIPTION)
    p.add_argument("--urls", help="five servers instead of starting them (comma-separated)")
    config.add_quick(p)
    config.add_json(p)
    p.add_argument("--libs", default=",".join(LIBS), help=f"subset of: {', '.join(LIBS)}")
    config.add_sections(p, "1,2,3", help="subset of the sections 1,2,3")
    p.add_argument(
        "--why",
        action="store_true",
        help="section 2: count redlease's rounds per acquisition and what started each",
    )
    p.add_argument(
        "--contend-servers",
        default="5",
        help="servers per lock in section 2, comma-separated (e.g. 1,5; default 5)",
    )
    return p.parse_args(argv)
