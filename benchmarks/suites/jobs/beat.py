"""Celery beat: ``BeatScheduler.apply_entry`` (redlease's per-fire decision) beside celery's
stock ``Scheduler.apply_entry``, the send left out of both.

What is timed is ``scheduler.apply_entry(entry)``, the call beat's ``tick()`` makes for each
due entry, on schedulers whose ``apply_async`` (the send to the broker) is a no-op: a broker
round trip would be the same in both and would hide the difference. ``PersistentScheduler``
(beat's default) inherits ``apply_entry`` from ``Scheduler`` unchanged. The glue's scheduler
leads (one campaign before the rounds): beat's leadership check per fire is a flag it reads;
the election's renewals run in the background, a few per lease, whatever the number of fires.

Rows: ``stock apply_entry`` (the bare path), ``BeatScheduler send`` (a new entry name each
call: the fire's ``Once`` started and finished, its two keys given an expiry), ``BeatScheduler
skip`` (an instant sent already: one ``Once`` try that starts nothing), and for scale
``stock, sent to memory://`` (the stock path with a real send, to kombu's in-process
transport: no network, celery's message building and publishing only).
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import redis
from celery import Celery
from celery import beat as celery_beat

from redlease.celery_beat import BeatScheduler
from suites.jobs.measure import Row

SECTION = "Celery beat"
BARE = "stock Scheduler.apply_entry"


_SENT = SimpleNamespace(id="not-sent")  # what apply_async returns: a result with an id


def _no_send(self: Any, entry: Any, producer: Any = None, advance: bool = True, **kw: Any) -> Any:
    """Beat's ``apply_async`` without the send (nothing is published)."""
    return _SENT


class StockNoSend(celery_beat.Scheduler):  # type: ignore[misc]
    apply_async = _no_send


class BeatNoSend(BeatScheduler):
    apply_async = _no_send


def rows(client: redis.Redis, closers: list[Any]) -> list[Row]:
    app = Celery("bench", broker="memory://", set_as_current=False)
    app.conf.beat_redlease_client = client
    app.conf.beat_redlease_prefix = "bench"
    stock, glued = StockNoSend(app), BeatNoSend(app)
    sending = celery_beat.Scheduler(app)
    closers.extend([glued.close, stock.close, sending.close, app.close])
    glued.tick()  # the first tick campaigns: it leads from here on
    if glued.election.term is None:
        raise RuntimeError("the BeatScheduler did not lead")
    names = (f"send-{n}" for n in itertools.count())

    def entry(name: str) -> Any:
        return celery_beat.ScheduleEntry(
            name=name, task="bench.noop", schedule=timedelta(days=1), app=app
        )

    fresh, sent, memory = entry("fresh"), entry("sent"), entry("memory")
    glued.apply_entry(sent)  # sent: every later fire of it this day skips

    def bare() -> None:
        fresh.name = next(names)
        stock.apply_entry(fresh)

    def send() -> None:
        fresh.name = next(names)
        glued.apply_entry(fresh)

    def skip() -> None:
        glued.apply_entry(sent)

    def to_memory() -> None:
        sending.apply_entry(memory)

    return [
        Row(SECTION, BARE, bare),
        Row(SECTION, "BeatScheduler: fire sent", send, bare=BARE),
        Row(SECTION, "BeatScheduler: fire skipped", skip, bare=BARE),
        Row(SECTION, "stock, sent to memory:// (for scale)", to_memory),
    ]
