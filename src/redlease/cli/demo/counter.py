"""``redlease demo --counter``: processes lose updates to a shared counter without a lock.

Several worker processes each add 1 to one Redis counter, M times, by read-modify-write: GET,
then SET to the value read plus one. Run concurrently without a lock, increments overwrite each
other and are lost; run again with :class:`redlease.Lock` around each GET/SET, none is. The demo
also measures how fast the lock passes from one process to the next.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import secrets
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import redlease

from ..._core.lock import LockKeys
from .._common import CliError, count
from .._connection import check_connection, close_client, make_client
from .crew import Crew, now_ns
from .report import Progress, percentile, table

__all__ = [
    "DEFAULT_INCREMENTS",
    "DEFAULT_WORKERS",
    "add_arguments",
    "command",
    "handoff_latencies",
    "run_demo",
    "selected",
]

DEFAULT_WORKERS = 4
DEFAULT_INCREMENTS = 200
PHASES = ("no lock", "redlease.Lock")
LOCK_TTL = 5.0
"""Lease of the demo's lock (seconds): only matters if a worker dies holding it."""
_WAIT = 120.0  # longest a worker waits for the parent's go, before it gives up


def add_arguments(group: Any) -> None:
    """Declare the counter demo's options on ``group`` (an argparse parser or group)."""
    group.add_argument(
        "--workers",
        type=count("workers"),
        default=None,
        metavar="N",
        help=f"worker processes (default: {DEFAULT_WORKERS})",
    )
    group.add_argument(
        "--increments",
        type=count("increments"),
        default=None,
        metavar="M",
        help=f"increments per worker and phase (default: {DEFAULT_INCREMENTS})",
    )


def selected(args: argparse.Namespace) -> bool:
    """Whether an option of the counter demo was given (which selects it)."""
    return args.workers is not None or args.increments is not None


def command(args: argparse.Namespace, url: str, label: str) -> int:
    """Run the counter demo against ``url`` (described as ``label``) with ``args``' options."""
    workers = DEFAULT_WORKERS if args.workers is None else args.workers
    increments = DEFAULT_INCREMENTS if args.increments is None else args.increments
    return run_demo(url, label, workers, increments, prefix=args.prefix)


# -- the worker processes ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    """What a worker needs: picklable, sent to the spawned process."""

    index: int
    url: str
    prefix: str
    lock_name: str
    counter: str
    increments: int


def _worker(job: _Job, go: Sequence[Any], progress: Any, messages: Any) -> None:
    """One worker process: both phases of read-modify-writes, reporting through ``messages``.

    Messages: ``("ready", i)``, ``("done", i, phase, start_ns, end_ns, samples)`` where samples
    are ``(fence, acquired_ns, releasing_ns)`` of each locked increment, ``("error", i, text)``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        client: Any = make_client(job.url)
        client.ping()
        messages.put(("ready", job.index))
        slot = job.index
        if not go[0].wait(_WAIT):
            return
        start = now_ns()
        for done in range(1, job.increments + 1):
            value = int(client.get(job.counter) or 0)
            client.set(job.counter, value + 1)
            progress[slot] = done
        messages.put(("done", job.index, 0, start, now_ns(), []))

        slot += len(progress) // 2
        lock = redlease.Lock(client, job.lock_name, ttl=LOCK_TTL, prefix=job.prefix)
        samples: list[tuple[int, int, int]] = []
        if not go[1].wait(_WAIT):
            return
        start = now_ns()
        for done in range(1, job.increments + 1):
            lock.acquire()
            acquired = now_ns()
            value = int(client.get(job.counter) or 0)
            client.set(job.counter, value + 1)
            fence = lock.fence
            assert fence is not None
            releasing = now_ns()
            lock.release()
            samples.append((fence, acquired, releasing))
            progress[slot] = done
        messages.put(("done", job.index, 1, start, now_ns(), samples))
        close_client(client)
    except Exception as exc:
        messages.put(("error", job.index, f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


# -- the parent ----------------------------------------------------------------------------------


@dataclass
class _Phase:
    """What the workers reported about one phase."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    samples: list[tuple[int, int, int, int]] = field(default_factory=list)  # + worker index
    final: int = 0

    @property
    def seconds(self) -> float:
        """From the first worker's start to the last one's end."""
        return (max(self.ends) - min(self.starts)) / 1e9 if self.ends else 0.0


class _Crew(Crew):
    """The worker processes of the counter demo and the messages they send."""

    def __init__(self, jobs: list[_Job], progress_out: Progress) -> None:
        super().__init__(
            _worker,
            jobs,
            phases=2,
            slots=2 * len(jobs),
            progress=progress_out,
            name="redlease-demo",
            noun="worker",
        )
        self.increments = [job.increments for job in jobs]
        self.phases = [_Phase(), _Phase()]
        self.done: list[set[int]] = [set(), set()]

    def finished(self, phase: int) -> bool:
        """Whether every worker reported the end of ``phase``."""
        return len(self.done[phase]) == len(self.procs)

    def bar(self, phase: int, name: str, width: int = 30) -> str:
        """A progress bar of ``phase``: increments done of all workers."""
        workers = len(self.procs)
        done = sum(self.progress[phase * workers : (phase + 1) * workers])
        total = sum(self.increments)
        filled = width * done // total if total else width
        return f"{name:<14} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind, index = message[0], message[1]
        if kind == "ready":
            self.ready.add(index)
        elif kind == "done":
            _, _, phase, start, end, samples = message
            result = self.phases[phase]
            result.starts.append(start)
            result.ends.append(end)
            result.samples.extend((f, a, r, index) for f, a, r in samples)
            self.done[phase].add(index)
        elif kind == "error":
            raise CliError(f"worker {index} failed: {message[2]}", 1)


def run_demo(
    url: str,
    label: str,
    workers: int,
    increments: int,
    *,
    prefix: str = "redlease",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run both phases against Redis at ``url`` and print the results; 0 if none was lost."""
    out = sys.stdout if out is None else out
    progress = Progress(sys.stderr if err is None else err)
    client: Any = make_client(url)  # a cluster client too
    check_connection(client, url)
    run_id = secrets.token_hex(4)
    lock_name = f"demo:{run_id}"
    counter = f"{prefix}:demo:{run_id}:counter"
    keys = LockKeys.build(prefix, lock_name.encode())
    total = workers * increments
    print(
        f"redlease demo: {workers} worker processes each add 1 to one shared counter "
        f"{increments} times (GET, then SET)\nserver: {label}\n",
        file=out,
        flush=True,
    )
    jobs = [_Job(i, url, prefix, lock_name, counter, increments) for i in range(workers)]
    crew = _Crew(jobs, progress)
    try:
        client.set(counter, 0)
        progress.line(f"starting {workers} worker processes...")
        crew.start()
        crew.wait_until(
            lambda: len(crew.ready) == workers,
            lambda: f"starting worker processes: {len(crew.ready)}/{workers} ready",
        )
        for phase, name in enumerate(PHASES):
            progress.line(f"{name}: {total} increments...")
            crew.go[phase].set()
            crew.wait_until(
                functools.partial(crew.finished, phase), functools.partial(crew.bar, phase, name)
            )
            result = crew.phases[phase]
            result.final = int(client.get(counter) or 0)
            progress.line(f"{name}: done in {result.seconds:.2f} s")
            client.set(counter, 0)
        if progress.tty:
            progress.line("")  # a blank line between the progress and the results
    finally:
        crew.stop()
        with contextlib.suppress(Exception):  # best effort: the keys are small and unique
            client.delete(counter, keys.lock, keys.fence, keys.queue, keys.handoff)
        close_client(client)
    return _report(crew.phases, total, out)


def handoff_latencies(samples: list[tuple[int, int, int, int]]) -> list[float]:
    """Milliseconds from ``release()`` being called to the next holder's ``acquire()``
    returning, for each pair of successive holders that are different workers.

    ``samples`` are ``(fence, acquired_ns, releasing_ns, worker)``; fences of one lock grow
    with each acquisition (by the server's time, not by one), so in fence order each holder
    follows the one before it.
    """
    ordered = sorted(samples)
    latencies = [
        (after[1] - before[2]) / 1e6
        for before, after in itertools.pairwise(ordered)
        if after[3] != before[3]
    ]
    return sorted(latencies)


def _report(phases: list[_Phase], total: int, out: TextIO) -> int:
    header = ("", "expected", "final", "lost", "time", "increments/s")
    rows = [header]
    for name, phase in zip(PHASES, phases, strict=True):
        rate = total / phase.seconds if phase.seconds > 0 else float("inf")
        rows.append(
            (
                name,
                f"{total:,}",
                f"{phase.final:,}",
                f"{total - phase.final:,}",
                f"{phase.seconds:.2f} s",
                f"{rate:,.0f}",
            )
        )
    table(rows, out)
    latencies = handoff_latencies(phases[1].samples)
    print(
        "\nlock hand-off between processes (release() called -> next acquire() returns):", file=out
    )
    if latencies:
        print(
            f"  {len(latencies):,} hand-off{'s' if len(latencies) != 1 else ''}   "
            f"p50 {percentile(latencies, 50):.2f} ms   "
            f"p99 {percentile(latencies, 99):.2f} ms   max {latencies[-1]:.2f} ms",
            file=out,
        )
    else:
        print("  none (no two workers took the lock one right after the other)", file=out)
    unlocked, locked = (total - p.final for p in phases)
    print(file=out)
    if locked == 0:
        print(
            f"OK: with the lock no increment was lost ({unlocked:,} of {total:,} lost without it).",
            file=out,
        )
        return 0
    print(f"FAILED: {locked:,} of {total:,} increments were lost with the lock.", file=out)
    return 1
