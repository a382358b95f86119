"""APScheduler on every host, each fire of a job run once: ``redlease.apscheduler``.

Start this on every host (or several times on one, as gunicorn starts workers): each runs a
``BackgroundScheduler`` with the job ``digest`` every ``--every`` seconds, and each fire (the
job id and its scheduled instant) runs on one of them. Run it::

    python examples/apscheduler_once.py --url redis://127.0.0.1:6379 --id host-a

Each run pushes ``"<id> <instant ms> <fence>"`` onto the Redis list ``<name>:fired``. The
twin, ``--plain``, uses APScheduler's thread pool alone: every process runs every fire.

The fires must be the same instants in every process: a ``cron`` trigger is; an ``interval``
trigger is only with a ``start_date`` every process shares (here 2026-01-01, UTC), since
without one each process counts from its own start.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from datetime import datetime, timezone
from types import FrameType

import redis
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

import redlease
from redlease.apscheduler import OnceExecutor, current_fire

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)  # the interval's instants, in every process


def main(argv: list[str] | None = None) -> int:
    """Schedule the job and run it until SIGINT or SIGTERM (or ``--for`` seconds)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379", help="Redis URL")
    parser.add_argument("--name", default="digest", help="the job's id")
    parser.add_argument("--id", default=f"pid-{os.getpid()}", help="this scheduler's name")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between fires")
    parser.add_argument("--for", dest="duration", type=float, help="stop after this long")
    parser.add_argument("--plain", action="store_true", help="the twin: no OnceExecutor")
    args = parser.parse_args(argv)
    client = redis.Redis.from_url(args.url)
    stop = threading.Event()

    def stopping(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)

    def digest() -> None:
        fire = current_fire()  # None under the twin
        when = fire.scheduled if fire else datetime.now(timezone.utc)
        fence = fire.fence if fire else 0
        instant = round(when.timestamp() / args.every) * args.every  # the twin: nearest
        client.rpush(f"{args.name}:fired", f"{args.id} {round(instant * 1000)} {fence}")

    executor = ThreadPoolExecutor() if args.plain else OnceExecutor(client, ttl=10)
    scheduler = BackgroundScheduler(executors={"default": executor}, timezone=timezone.utc)
    scheduler.add_job(digest, "interval", seconds=args.every, start_date=EPOCH, id=args.name)
    scheduler.start()
    stop.wait(args.duration)
    scheduler.shutdown(wait=True)
    redlease.close(client)
    client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
