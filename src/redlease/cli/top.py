"""``redlease top``: a live view of the primitives in use, redrawn every ``--interval`` seconds.

Each refresh finds the names with :func:`redlease.cli.inspect.scan_all` (the SCAN of
``redlease inspect --all``, every master of a Redis Cluster included) and reads each one
through its primitive's public ``inspect()`` (an inventory's ``snapshot()``): what a program
would see. The rows are built here without drawing anything (:func:`snapshot`); only
:func:`command` draws, with ``rich`` (the optional extra ``redlease[top]``), imported when
``top`` runs so that ``import redlease`` and ``redlease --help`` never load it.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from typing import Any

import redis

import redlease

from ._common import DEFAULT_URL, EX_USAGE, PROG, CliError, count, global_options, handler_defaults
from ._connection import check_connection, redact, unavailable
from .inspect import scan_all

__all__ = [
    "COLUMNS",
    "MAX_INTERVAL",
    "Row",
    "add_parser",
    "command",
    "describe",
    "interval_seconds",
    "snapshot",
]

MAX_INTERVAL = 3600.0
"""The longest ``--interval`` accepted, in seconds: longer is almost surely a unit mistake."""

COLUMNS = ("NAME", "KIND", "HELD BY", "LEASE LEFT", "FENCE", "WAITERS")
"""The table's columns, in order (the fields of :class:`Row`)."""

_DESCRIPTION = f"""\
A live view of the primitives in use under --prefix, redrawn every --interval seconds until
Ctrl-C: locks held (lease left, fencing token, waiters), semaphores (permits used of the
total), read/write locks (readers or the writer), latches (count left), elections (leader
and term), inventories (stock levels) and jobs run once per period (the run in progress).

Free primitives (a lock with only its fencing counter left, a latch at zero, a semaphore
with no holder) are hidden unless --idle. Each refresh SCANs for at most --limit names (every
master of a Redis Cluster) and reads each one atomically; at most --rows rows are drawn.

--once prints one table and exits (for scripts, or output that is not a terminal).

Needs the optional extra: pip install 'redlease[top]' (rich). Exit code 0 on Ctrl-C, 2 for
bad arguments or without rich, 69 if Redis cannot be reached at start (later failures are
shown in the view, which keeps retrying). At most {MAX_INTERVAL:.0f} s between refreshes.
"""


def interval_seconds(text: str) -> float:
    """argparse type of ``--interval``: seconds between refreshes, ``0 < s <= MAX_INTERVAL``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if math.isnan(value) or not 0 < value <= MAX_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"--interval must be > 0 and at most {MAX_INTERVAL:.0f} seconds, got {text!r}"
        )
    return value


def add_parser(subparsers: Any) -> None:
    """Add the ``top`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "top",
        parents=[global_options(url_default=DEFAULT_URL)],
        help="a live view of held locks, permits, leaders and waiters",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds between refreshes (default 1)",
    )
    parser.add_argument(
        "--match",
        default="*",
        metavar="GLOB",
        help="only names matching this glob (SCAN MATCH syntax; default *)",
    )
    parser.add_argument(
        "--limit",
        type=count("--limit"),
        default=1000,
        help="names scanned and read per refresh, at most (default 1000)",
    )
    parser.add_argument(
        "--rows",
        type=count("--rows"),
        default=50,
        help="rows drawn, at most (default 50)",
    )
    parser.add_argument(
        "--idle", action="store_true", help="also show primitives nobody holds or waits for"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="print one table and exit (for scripts, or output that is not a terminal)",
    )
    handler_defaults(parser, command)


@dataclass(frozen=True)
class Row:
    """One primitive as the view shows it: every field already text, ``active`` whether
    anyone holds it, waits for it or counts on it (an inventory always is)."""

    name: str
    kind: str
    held_by: str
    lease_left: str
    fence: str
    waiters: str
    active: bool

    def cells(self) -> tuple[str, ...]:
        """The row's cells, in the order of :data:`COLUMNS`."""
        return (self.name, self.kind, self.held_by, self.lease_left, self.fence, self.waiters)


def _seconds(values: Any) -> str:
    """``"9.8 s"`` for one lease, ``"4.1-9.8 s"`` for several, ``"-"`` for none."""
    listed = values if isinstance(values, (tuple, list)) else [values]
    leases = sorted(v for v in listed if v is not None)
    if not leases:
        return "-"
    if len(leases) == 1 or leases[0] == leases[-1]:
        return f"{leases[0]:.1f} s"
    return f"{leases[0]:.1f}-{leases[-1]:.1f} s"


def _lock(client: Any, name: str, prefix: str) -> Row:
    info = redlease.Lock(client, name, prefix=prefix).inspect()
    who = info.held_by  # host:pid thread (a token without an identity: "held")
    held = "held" if who is None or who.host is None else f"{who.host}:{who.pid} {who.thread}"
    held = held if info.held else "-"
    return Row(
        name,
        "lock",
        held,
        _seconds(info.remaining) if info.held else "-",
        str(info.fence or "-"),
        str(info.waiters),
        info.held or info.waiters > 0,
    )


def _semaphore(client: Any, name: str, prefix: str) -> Row:
    info = redlease.Semaphore(client, name, 1, prefix=prefix).inspect()
    return Row(
        name,
        "semaphore",
        f"{info.used}/{info.permits} permits",
        _seconds(info.holders),
        str(info.fence or "-"),
        str(info.waiters),
        info.used + info.waiters > 0,
    )


def _rwlock(client: Any, name: str, prefix: str, kind: str) -> Row:
    info = redlease.ReadWriteLock(client, name, prefix=prefix).inspect()
    if info.writer:
        held = "writer"
    elif info.readers:
        held = f"{info.readers} reader{'s' if info.readers > 1 else ''}"
    else:
        held = "-"
    active = info.writer or info.readers + info.waiters > 0
    return Row(
        name, kind, held, _seconds(info.leases), str(info.fence or "-"), str(info.waiters), active
    )


def _latch(client: Any, name: str, prefix: str) -> Row:
    info = redlease.CountDownLatch(client, name, prefix=prefix).inspect()
    return Row(
        name,
        "latch",
        f"count {info.count}",
        "-",
        "-",
        str(info.waiters),
        info.count + info.waiters > 0,
    )


def _election(client: Any, name: str, prefix: str) -> Row:
    info = redlease.Election(client, name, prefix=prefix).inspect()
    leader = info.leader
    held = "-" if leader is None else f"{leader.value} (term {leader.term})"
    return Row(
        name,
        "election",
        held,
        _seconds(info.remaining) if leader else "-",
        str(info.last_term or "-"),
        str(info.candidates),
        leader is not None or info.candidates > 0,
    )


def _inventory(client: Any, name: str, prefix: str) -> Row:
    stock = redlease.Inventory(client, name, prefix=prefix).snapshot()
    held = f"{stock.available} free, {stock.reserved} held, {stock.sold} sold of {stock.total}"
    return Row(name, "inventory", held, "-", "-", "-", True)


def _once(client: Any, name: str, prefix: str) -> Row:
    """A :class:`redlease.Once`: running (the lease left), or the last run's state."""
    info = redlease.Once(client, name, every=1, prefix=prefix).last()
    if info is None:  # only its fence counter is left
        return Row(name, "once", "-", "-", "-", "-", False)
    running = info.state == "running"
    held = f"{info.state} on {info.host} (pid {info.pid})"
    left = _seconds(info.free_in) if running else "-"
    return Row(name, "once", held, left, str(info.fence), "-", running)


def describe(client: Any, prefix: str, name: str, kind: str) -> Row:
    """The :class:`Row` of primitive ``name`` of ``kind`` (as :func:`scan_all` guessed it).

    A ``shared`` name (a read/write lock, or a semaphore or election showing no key that
    tells them apart) is read as a read/write lock: holders and waiters are the same data.
    A name whose keys hold data redlease did not write is shown, marked ``foreign data``, and
    one the library refuses (an empty name, from a key written by hand) ``not a valid name``.
    Redis errors propagate (``redlease.Unavailable`` or ``redis.RedisError``).
    """
    try:
        if kind == "lock":
            return _lock(client, name, prefix)
        if kind == "semaphore":
            return _semaphore(client, name, prefix)
        if kind in ("rwlock", "shared"):
            return _rwlock(client, name, prefix, kind)
        if kind == "latch":
            return _latch(client, name, prefix)
        if kind == "election":
            return _election(client, name, prefix)
        if kind == "inventory":
            return _inventory(client, name, prefix)
        if kind == "once":
            return _once(client, name, prefix)
    except redlease.ForeignData:
        return Row(name, kind, "foreign data", "-", "-", "-", True)
    except (TypeError, ValueError):  # a key written by hand, e.g. an empty name: ``p:{}:lock``
        return Row(name, kind, "not a valid name", "-", "-", "-", True)
    return Row(name, kind, "-", "-", "-", "-", False)  # a FencedStore: nothing is held


def snapshot(
    client: Any, prefix: str, *, match: str = "*", limit: int = 1000, idle: bool = False
) -> tuple[list[Row], int]:
    """The rows of one refresh, by name, and how many names were scanned.

    ``match`` filters the names (a SCAN MATCH glob), ``limit`` bounds the names scanned and
    read, ``idle`` keeps the primitives nobody holds, waits for or counts on.
    """
    found = scan_all(client, prefix, limit, match=match)
    rows = [describe(client, prefix, item["name"], item["kind"]) for item in found]
    return [row for row in rows if idle or row.active], len(found)


def _table(rows: list[Row], *, title: str, caption: str) -> Any:
    from rich.table import Table

    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for column in COLUMNS:
        right = column in ("LEASE LEFT", "FENCE", "WAITERS")
        table.add_column(column, justify="right" if right else "left", no_wrap=column == "NAME")
    for row in rows:
        table.add_row(*row.cells())
    return table


def command(args: argparse.Namespace) -> int:
    """Run ``redlease top`` until Ctrl-C (exit 0)."""
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        raise CliError(f"{PROG} top needs rich: pip install 'redlease[top]'", EX_USAGE) from None
    check_connection(args.client, args.url)
    where = f"{redact(args.url)}  prefix {args.prefix}"
    if args.match != "*":
        where += f"  match {args.match}"
    console = Console()
    if args.once:
        console.print(_frame(args, where, 1, once=True))
        return 0
    refresh = 0
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while True:
                refresh += 1
                live.update(_frame(args, where, refresh, once=False), refresh=True)
                time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def _frame(args: argparse.Namespace, where: str, refresh: int, *, once: bool) -> Any:
    """The table of one refresh. A Redis failure is shown in its caption (the view retries
    at the next refresh), or raised with ``--once``."""
    try:
        rows, scanned = snapshot(
            args.client, args.prefix, match=args.match, limit=args.limit, idle=args.idle
        )
        shown = rows[: args.rows]
        status = f"{sum(1 for row in rows if row.active)} in use of {scanned} names scanned"
        if scanned >= args.limit:
            status += f" (stopped at --limit {args.limit})"
        if len(shown) < len(rows):
            status += f"; {len(rows) - len(shown)} more not shown (--rows)"
    except (redlease.Unavailable, redis.RedisError) as exc:
        if once:
            raise unavailable(args.url, exc) from exc
        shown, status = [], f"{unavailable(args.url, exc)}; retrying"
    title = f"{PROG} top  {where}  {time.strftime('%H:%M:%S')}  refresh {refresh}"
    return _table(shown, title=title, caption=status)
