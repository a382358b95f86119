"""The cluster benchmark's targets, settings and command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from harness import config

DESCRIPTION = (
    "Cluster benchmark: redlease's Lock on a Redis Cluster against the same on one server,"
    " in one run."
)

TOPOS = ("server", "cluster")
LIBS = {"redlease": "redlease Lock", "redlease-async": "redlease.asyncio Lock"}
KINDS = {  # section 1's operations, each measured on both topologies
    "floor": "raw floor: SET NX PX + EVALSHA del",
    "floor-async": "raw floor, redis.asyncio",
    "redlease": "redlease Lock",
    "redlease-async": "redlease.asyncio Lock",
}
DIRECT_SUFFIX = "-direct"  # diagnostics: a plain client straight to the slot's master
DIRECTS = ("floor-direct", "redlease-direct")
TARGET_RATIO = 1.2  # cluster / server: uncontended p50 and 16-process hand-off p50 (acq/s: 1/1.2)
TARGET_N = 16  # the contended size the targets are judged on
TARGET_WAIT_CMDS = 0.0  # commands per second per blocked waiter on the cluster
WAIT_TTL = 30.0  # section 3's lease: its first renewal (ttl / 3 = 10 s) is after both windows
# Section 3 does not count these commands: the probe's INFO, replication (REPLCONF ACK every
# second, the master's PING to its replicas) and the cluster clients' topology queries.
NOT_COUNTED = ("info", "ping", "replconf", "cluster", "command")


@dataclass
class Config:
    quick: bool
    libs: list[str]  # section 2's libraries
    iters: int
    warm: int
    rounds: int
    contend_sizes: tuple[int, ...]
    contend_seconds: float
    repeats: int  # section 2: runs of each (size, library, topology), alternating the order
    waiters: int
    wait_settle: float
    wait_window: float


def settings(quick: bool, libs: list[str]) -> Config:
    """The full run's settings, or the smoke run's (``quick``)."""
    if quick:
        return Config(True, libs, 400, 50, 4, (16,), 1.0, 1, 4, 0.4, 1.0)
    return Config(False, libs, 3000, 300, 10, (4, 16), 3.0, 2, 8, 0.5, 3.0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = config.parser(DESCRIPTION)
    config.add_quick(p)
    config.add_json(p)
    p.add_argument(
        "--libs",
        default="redlease",
        help=f"section 2's libraries, comma-separated subset of: {', '.join(LIBS)}",
    )
    config.add_sections(p, "1,2,3")
    p.add_argument(
        "--repeats",
        type=int,
        help="section 2: runs of each configuration, server and cluster alternated"
        " (default 2, 1 with --quick); more runs average out a noisy machine",
    )
    return p.parse_args(argv)
