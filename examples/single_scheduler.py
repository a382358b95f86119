"""One scheduler among many hosts: an Election picks the one that fires the periodic jobs.

Start this on every host (or several times on one); only the leader fires, every
``--interval`` seconds, and tags each firing with its term (a fencing token: a consumer that
remembers the highest term it saw can refuse a deposed leader's late firings). When the leader
dies, another takes over within ``--ttl``; when it stops cleanly (Ctrl-C, SIGTERM) it resigns
and the next takes over at once. Run it::

    python examples/single_scheduler.py --url redis://127.0.0.1:6379 --id host-a

Each firing is pushed onto the Redis list ``<name>:fired`` as ``"<id> <term>"``. The twin,
``--no-election``, fires from every process at once: what a scheduler on every host does.
Plug a real scheduler in the same way: start it (APScheduler's ``BackgroundScheduler``, Celery
beat) when ``campaign()`` returns, shut it down when ``on_lost`` fires or on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

import redis

import redlease


def lead(
    client: redis.Redis,
    name: str,
    me: str,
    fire: Callable[[int], None],
    stop: threading.Event,
    *,
    interval: float = 0.5,
    ttl: float = 2.0,
    elect: bool = True,
) -> None:
    """Until ``stop`` is set: campaign, then call ``fire(term)`` every ``interval`` while
    leading. ``elect=False`` (the twin) fires without an election, term 0."""
    lost = threading.Event()
    election = redlease.Election(client, name, ttl=ttl, on_lost=lost.set)
    while not stop.is_set():
        if elect and not election.campaign(me, timeout=0.5):
            continue  # not leading: look at stop again, then campaign on
        lost.clear()
        term = election.term or 0
        while not (stop.is_set() or lost.is_set()):
            fire(term)
            stop.wait(interval)
        if elect and not lost.is_set():
            with contextlib.suppress(redlease.LeadershipLost):  # lost at the last moment
                election.resign()  # a clean stop: the next candidate takes over at once


def main(argv: list[str] | None = None) -> int:
    """Campaign and fire until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379", help="Redis URL")
    parser.add_argument("--name", default="scheduler", help="the election's name")
    parser.add_argument("--id", default=f"pid-{os.getpid()}", help="this scheduler's name")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between firings")
    parser.add_argument("--ttl", type=float, default=2.0, help="the leader's lease (seconds)")
    parser.add_argument("--no-election", dest="elect", action="store_false", help="the twin")
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.url)
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)

    def fire(term: int) -> None:
        client.rpush(f"{args.name}:fired", f"{args.id} {term}")

    lead(
        client,
        args.name,
        args.id,
        fire,
        stop,
        interval=args.interval,
        ttl=args.ttl,
        elect=args.elect,
    )
    redlease.close(client)
    client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
