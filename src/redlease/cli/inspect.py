"""``redlease inspect NAME``: whether a lock is held, its lease, fencing counter and waiters.

Which primitive NAME is, it finds by itself (the keys that exist, :mod:`._kinds`); ``--kind``
says it: a read/write lock (readers, writer), a semaphore (permits used/free, holders' leases),
a count-down latch (count), an election (leader and term), an inventory (stock) or a fenced
store (fence, version), each through its own public ``inspect()`` (``snapshot()``, ``read()``).
Several ``--url``: the lock is a Redlock over those servers (:meth:`redlease.Redlock.inspect`).

It reads the lock through the public API, :meth:`redlease.Lock.inspect`: the command line sees
exactly what a program would, and refuses what the library refuses (a key of the lock that
holds data redlease did not write).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import redis

import redlease

from .._core.lock import LockKeys
from . import once, ratelimit
from ._common import DEFAULT_URL, EX_USAGE, CliError, global_options, handler_defaults, lock_name
from ._connection import check_connection, close_client, make_client, unavailable
from ._kinds import KINDS, kind_of_suffix, present
from ._report import family_report, format_family, holder_text, plain, since_text
from ._urls import all_urls

__all__ = [
    "EX_FOREIGN",
    "KINDS",
    "add_parser",
    "command",
    "family_report",
    "format_family",
    "format_text",
    "lock_key",
    "report",
    "scan_all",
]

CHOICES = (*KINDS, "ratelimit")
"""The values of ``--kind``: the kinds found from their keys, and the rate limiter, named only
by hand (its keys are per subject)."""

EX_FOREIGN = 1
"""A key of the lock holds data redlease did not write (another program uses the name)."""

_DESCRIPTION = """\
Show the state of lock NAME, read atomically: held or free, the lease left on it, the
fencing counter (the last fencing token issued: the next holder gets a larger one) and the
number of waiters queued for it (one that died stays counted until it is skipped).

Exit code 0 whether the lock is held or free; 1 if any of its keys (lock, fence, queue,
hand-off) holds data redlease did not write (the message names the key); 69 if Redis cannot
be reached.

--json prints one object:
  {"name": str, "key": str, "held": bool, "remaining": float | null, "fence": int,
   "waiters": int, "held_by": {"host", "pid", "thread", "since", "token"} | null,
   "servers": int}
"remaining" is the lease left in seconds: null when the lock is free (or, for a key set
outside redlease, has no expiry). "held_by" says who holds it: host, pid, thread or asyncio
task name, "since" (server time, seconds since the epoch; null when unknown), and the token
that `redlease release NAME --force --token` takes. "servers": how many servers report that
holder (several --url: a Redlock over them; held means a majority does).

The kind of NAME is found from the keys that exist; when none does, NAME is shown as a free
lock; when NAME is several kinds at once, exit 2 asking for --kind.
--kind semaphore|rwlock|election|latch|inventory|fenced inspects that primitive; --json
then prints {"name", "kind", ...} with the fields of its Info dataclass (SemaphoreInfo:
permits, used, available, waiters, holders, fence, held_by, units (the permits of each
holding, as holders); ReadWriteLockInfo: readers,
writer, waiters, fence, leases, held_by; ElectionInfo: leader {"value", "term"} | null,
remaining, candidates, last_term, held_by; LatchInfo: count, rounds, waiters; Stock:
available, reserved, sold, total; FencedRecord: fence, version, fields).

A Once (found from its keys, or --kind once) shows its last run: state (running, done,
failed, lost, released), started, ended (UTC, ISO 8601), fence, host, pid, free_in, every,
token and held_by; state null if it never ran. NAME is held by a run in progress (held_by
names its holder: `redlease release NAME --force` evicts it), kept by a success for free_in
seconds (release --force clears it), or free (free_in 0: release --force changes nothing).

--kind ratelimit --subject KEY --rate RATE [--algorithm A] shows what a hit of cost 1 by
KEY would get now from rate limiter NAME under each of its limits, taking nothing; --json:
{"name", "kind", "subject", "algorithm", "allowed", "limits": [{"rate", "limit", "window",
"allowed", "remaining", "retry_after", "reset_after"}, ...]}.

--all lists every primitive with a key under --prefix instead (SCAN COUNT 500, at most
--limit names; on a Redis Cluster, every master): a table, or with --json a list of
{"name": str, "kind": str, "keys": [suffix, ...]}, one row per name and kind. Every kind it
prints is a --kind.
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``inspect`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "inspect",
        parents=[global_options(url_default=DEFAULT_URL)],
        help="show whether a lock is held, its lease, fence and waiters",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "name", type=lock_name, metavar="NAME", nargs="?", help="the primitive's name"
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="list every primitive under --prefix (SCAN, bounded by --limit) instead of NAME",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=1000,
        help="with --all: stop after this many primitives (default 1000)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--kind",
        choices=CHOICES,
        default=None,
        help="which primitive NAME is (default: found from the keys that exist)",
    )
    ratelimit.add_arguments(parser)
    handler_defaults(parser, command)


def lock_key(prefix: str, name: str) -> str:
    """The lock's own key, as ``redlease.Lock`` documents its layout: ``<prefix>:{<name>}:lock``.

    Shown to say where to look; nothing is read through it.
    """
    return LockKeys.build(prefix, name.encode()).lock.decode(errors="replace")


def report(info: redlease.LockInfo, key: str) -> dict[str, Any]:
    """The documented ``--json`` object for ``info``; ``key`` is the lock's key."""
    return {
        "name": info.name if isinstance(info.name, str) else info.name.decode(errors="replace"),
        "key": key,
        "held": info.held,
        "remaining": info.remaining,
        "fence": info.fence,
        "waiters": info.waiters,
        "held_by": plain(info.held_by),
        "servers": info.servers,
    }


def format_text(state: dict[str, Any]) -> str:
    """The human-readable report of :func:`report`'s ``state``: one ``label  value`` line each."""
    if not state["held"]:
        status, remaining = "free", "-"
    elif state["remaining"] is None:
        status, remaining = "held", "no expiry (the key was not set by redlease?)"
    else:
        status, remaining = "held", f"{state['remaining']:.3f} s"
    fence = f"{state['fence']} (last token issued)" if state["fence"] else "0 (never acquired)"
    rows = [
        ("lock", state["name"]),
        ("key", state["key"]),
        ("state", status),
        ("remaining", remaining),
        ("fence", fence),
        ("waiters", str(state["waiters"])),
        ("held by", holder_text(state["held_by"])),
        ("since", since_text(state["held_by"])),
    ]
    if state["held_by"] is not None:
        rows.append(("token", state["held_by"]["token"]))
    if state.get("of", 1) > 1:  # a Redlock
        rows.append(("servers", f"{state['servers']} of {state['of']} report that holder"))
    return "\n".join(f"{label:<10} {value}" for label, value in rows)


def _family(args: argparse.Namespace) -> int:
    """``inspect --kind`` for the read/write lock, semaphore, latch and election."""
    name: str = args.name
    client, prefix = args.client, args.prefix
    info: Any
    try:
        if args.kind == "rwlock":
            info = redlease.ReadWriteLock(client, name, prefix=prefix).inspect()
        elif args.kind == "semaphore":
            info = redlease.Semaphore(client, name, 1, prefix=prefix).inspect()
        elif args.kind == "latch":
            info = redlease.CountDownLatch(client, name, prefix=prefix).inspect()
        elif args.kind == "election":
            info = redlease.Election(client, name, prefix=prefix).inspect()
        elif args.kind == "inventory":
            info = redlease.Inventory(client, name, prefix=prefix).snapshot()
        else:
            info = redlease.FencedStore(client, name, prefix=prefix).read()
    except redlease.ForeignData as exc:
        key = exc.key.decode(errors="replace")
        raise CliError(
            f"{args.kind} {name!r}: key {key} holds data redlease did not write (another "
            "program uses this name? choose another NAME or --prefix)",
            EX_FOREIGN,
        ) from exc
    except redlease.Unavailable as exc:
        raise unavailable(args.url, exc) from exc
    state = family_report(info, args.kind)
    state["name"] = state["name"] or name  # (a Stock or a FencedRecord has no name)
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_family(state))
    return 0


def scan_all(
    client: Any, prefix: str, limit: int, count: int = 500, *, match: str = "*"
) -> list[dict[str, Any]]:
    """Every primitive with a key under ``<prefix>:{...}:``, one row per name and kind (SCAN
    COUNT), sorted by name.

    The kind is read from the key names: each kind writes keys of its own
    (:func:`._kinds.kind_of_suffix`); keys no kind writes are left out. Stops after
    ``limit`` names; ``match`` (a SCAN MATCH glob) keeps only the names it matches.

    ``client`` may be a ``redis.cluster.RedisCluster``: its ``scan_iter`` SCANs every master
    to the end, one cursor each (redis-py 5.0.1 onwards), and a primitive's keys all live in
    the slot of its ``{name}`` hash tag, so each name is found whole on one master.
    """
    kinds = kind_of_suffix(prefix)
    found: dict[bytes, dict[str, set[bytes]]] = {}
    start = prefix.encode() + b":{"
    for key in client.scan_iter(match=f"{prefix}:{{{match}}}:*", count=count):
        raw = key if isinstance(key, bytes) else str(key).encode()
        close = raw.rfind(b"}:")
        if not raw.startswith(start) or close < len(start):
            continue
        name, suffix = raw[len(start) : close], raw[close + 2 :]
        kind = kinds.get(suffix.split(b":")[0])
        if kind is None:
            continue
        if name not in found and len(found) >= limit:
            break
        found.setdefault(name, {}).setdefault(kind, set()).add(suffix)
    return [
        {
            "name": name.decode(errors="replace"),
            "kind": kind,
            "keys": sorted(s.decode(errors="replace") for s in suffixes),
        }
        for name in sorted(found)
        for kind, suffixes in sorted(found[name].items(), key=lambda item: KINDS.index(item[0]))
    ]


def _all(args: argparse.Namespace) -> int:
    """``inspect --all``: one row per primitive found under the prefix."""
    if args.limit < 1:
        raise CliError(f"--limit must be at least 1, got {args.limit}", 2)
    try:
        rows = scan_all(args.client, args.prefix, args.limit)
    except redis.RedisError as exc:
        raise unavailable(args.url, exc) from exc
    if args.json:
        json.dump(rows, sys.stdout)
        sys.stdout.write("\n")
        return 0
    width = max([len(row["name"]) for row in rows] + [4])
    print(f"{'NAME':<{width}}  {'KIND':<10} KEYS")
    for row in rows:
        print(f"{row['name']:<{width}}  {row['kind']:<10} {','.join(row['keys'])}")
    return 0


def kind_of(args: argparse.Namespace, name: str) -> str:
    """``--kind``, or the one kind whose keys exist for ``name`` (a lock when none does);
    :class:`CliError` (exit 2) when several do. A fenced store named like the primitive that
    guards it (as the docs advise) is not counted beside it."""
    if args.kind is not None:
        return str(args.kind)
    try:
        kinds = present(args.client, args.prefix, name.encode())
    except redis.RedisError as exc:
        raise unavailable(args.url, exc) from exc
    kinds = [k for k in kinds if k != "fenced"] or kinds
    if len(kinds) > 1:
        raise CliError(
            f"{name!r} is a {' and a '.join(kinds)} under prefix {args.prefix!r}: choose one "
            "with --kind",
            EX_USAGE,
        )
    return kinds[0] if kinds else "lock"


def command(args: argparse.Namespace) -> int:
    """Run ``redlease inspect``: print the state; exit 0 whether held or free."""
    if args.all == (args.name is not None):
        raise CliError("give either NAME or --all", 2)
    urls = all_urls(args)
    if len(urls) > 1:
        if args.all or args.kind not in (None, "lock"):
            raise CliError("several --url inspect one Redlock: give NAME (a lock)", EX_USAGE)
        return _redlock(args, urls)
    check_connection(args.client, args.url)
    if args.all:
        return _all(args)
    name: str = args.name
    if args.kind == "ratelimit":
        return ratelimit.command(args)
    args.kind = kind_of(args, name)
    if args.kind == "once":
        return once.inspect(args)
    if args.kind != "lock":
        return _family(args)
    lock = redlease.Lock(args.client, name, prefix=args.prefix)
    try:
        info = lock.inspect()
    except redlease.ForeignData as exc:
        raise _foreign(name, exc) from exc
    except redlease.LockUnavailable as exc:
        raise unavailable(args.url, exc) from exc
    _print_lock(args, report(info, lock_key(args.prefix, name)))
    return 0


def _redlock(args: argparse.Namespace, urls: list[str]) -> int:
    """``inspect NAME --url A --url B --url C``: the Redlock over those servers."""
    clients: list[Any] = []
    try:
        for url in urls:
            clients.append(make_client(url))
            check_connection(clients[-1], url)
        lock = redlease.Redlock(clients, args.name, prefix=args.prefix, allow_small_quorum=True)
        try:
            info = lock.inspect()
        except redlease.ForeignData as exc:
            raise _foreign(args.name, exc) from exc
        except redlease.LockUnavailable as exc:
            raise unavailable(", ".join(urls), exc) from exc
        state = report(info, lock_key(args.prefix, args.name))
        state["of"] = len(clients)
        _print_lock(args, state)
        return 0
    finally:
        for client in clients:
            close_client(client)


def _foreign(name: str, exc: redlease.ForeignData) -> CliError:
    key = exc.key.decode(errors="replace")
    return CliError(
        f"lock {name!r}: key {key} holds data redlease did not write (another program "
        "uses this name? choose another NAME or --prefix)",
        EX_FOREIGN,
    )


def _print_lock(args: argparse.Namespace, state: dict[str, Any]) -> None:
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_text(state))
