"""``redlease inspect NAME``: whether a lock is held, its lease, fencing counter and waiters.

``--kind`` inspects the coordination family instead: a read/write lock (readers, writer), a
semaphore (permits used/free, holders' leases), a count-down latch (count) or an election
(leader and term), each through its own public ``inspect()``.

It reads the lock through the public API, :meth:`redlease.Lock.inspect`: the command line sees
exactly what a program would, and refuses what the library refuses (a key of the lock that
holds data redlease did not write).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from typing import Any

import redis

import redlease

from . import ratelimit
from ._common import (
    DEFAULT_URL,
    CliError,
    check_connection,
    global_options,
    handler_defaults,
    lock_name,
    unavailable,
)

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

KINDS = ("lock", "rwlock", "semaphore", "latch", "election", "once", "ratelimit")
"""The values of ``--kind``: which primitive NAME is."""

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
   "waiters": int}
"remaining" is the lease left in seconds: null when the lock is free (or, for a key set
outside redlease, has no expiry).

--kind rwlock|semaphore|latch|election inspects that primitive instead; --json then prints
{"name", "kind", ...} with the fields of its Info dataclass (ReadWriteLockInfo:
readers, writer, waiters, fence, leases; SemaphoreInfo: permits, used, available, waiters,
holders, fence; LatchInfo: count, rounds, waiters; ElectionInfo: leader {"value", "term"} |
null, remaining, candidates, last_term; once, the last run: state, started, ended (UTC,
ISO 8601), fence, host, pid, free_in, every; state null if it never ran).

--kind ratelimit --subject KEY --rate RATE [--algorithm A] shows what a hit of cost 1 by
KEY would get now from rate limiter NAME under each of its limits, taking nothing; --json:
{"name", "kind", "subject", "algorithm", "allowed", "limits": [{"rate", "limit", "window",
"allowed", "remaining", "retry_after", "reset_after"}, ...]}.

--all lists every primitive with a key under --prefix instead (SCAN COUNT 500, at most
--limit names; on a Redis Cluster, every master): a table, or with
--json a list of {"name": str, "kind": str, "keys": [suffix, ...]}. The kind is guessed from
the key names; "shared" is a read/write lock, semaphore or election that shows no key telling
them apart.
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
        choices=KINDS,
        default="lock",
        help="which primitive NAME is (default: lock)",
    )
    ratelimit.add_arguments(parser)
    handler_defaults(parser, command)


def lock_key(prefix: str, name: str) -> str:
    """The lock's own key, as ``redlease.Lock`` documents its layout: ``<prefix>:{<name>}:lock``.

    Shown to say where to look; nothing is read through it.
    """
    return f"{prefix}:{{{name}}}:lock"


def report(info: redlease.LockInfo, key: str) -> dict[str, Any]:
    """The documented ``--json`` object for ``info``; ``key`` is the lock's key."""
    return {
        "name": info.name if isinstance(info.name, str) else info.name.decode(errors="replace"),
        "key": key,
        "held": info.held,
        "remaining": info.remaining,
        "fence": info.fence,
        "waiters": info.waiters,
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
    ]
    return "\n".join(f"{label:<10} {value}" for label, value in rows)


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: bytes decoded, tuples as lists, a Leader as an object."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {key: _plain(item) for key, item in value._asdict().items()}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def family_report(info: Any, kind: str) -> dict[str, Any]:
    """The ``--json`` object of a family primitive's Info dataclass ``info`` (``kind`` named).

    ``mine`` is left out: the command line holds nothing.
    """
    fields = {f.name: _plain(getattr(info, f.name)) for f in dataclasses.fields(info)}
    fields.pop("mine", None)
    name = fields.pop("name")
    return {"name": name, "kind": kind, **fields}


def format_family(state: dict[str, Any]) -> str:
    """The human-readable report of :func:`family_report`'s ``state``: ``label  value`` lines."""
    rows: list[tuple[str, str]] = []
    for label, value in state.items():
        if isinstance(value, float):
            text = f"{value:.3f} s"
        elif isinstance(value, list):
            text = ", ".join(f"{item:.3f} s" for item in value) if value else "-"
        elif isinstance(value, dict):
            text = f"{value['value']} (term {value['term']})"
        elif value is None:
            text = "-"
        else:
            text = str(value)
        rows.append((label, text))
    return "\n".join(f"{label:<10} {text}" for label, text in rows)


def _family(args: argparse.Namespace) -> int:
    """``inspect --kind`` for the read/write lock, semaphore, latch and election."""
    name: str = args.name
    primitive: Any
    if args.kind == "rwlock":
        primitive = redlease.ReadWriteLock(args.client, name, prefix=args.prefix)
    elif args.kind == "semaphore":
        primitive = redlease.Semaphore(args.client, name, 1, prefix=args.prefix)
    elif args.kind == "latch":
        primitive = redlease.CountDownLatch(args.client, name, prefix=args.prefix)
    else:
        primitive = redlease.Election(args.client, name, prefix=args.prefix)
    try:
        info = primitive.inspect()
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
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_family(state))
    return 0


def _once(args: argparse.Namespace) -> int:
    """``inspect --kind once``: the last run of a :class:`redlease.Once` (times in UTC)."""
    once = redlease.Once(args.client, args.name, every=1, prefix=args.prefix)
    try:
        info = once.last()
    except redlease.ForeignData as exc:
        raise CliError(f"once {args.name!r}: {exc}", EX_FOREIGN) from exc
    except redlease.Unavailable as exc:
        raise unavailable(args.url, exc) from exc
    if info is None:
        state: dict[str, Any] = {"name": args.name, "kind": "once", "state": None}
    else:
        state = family_report(info, "once")
        for field in ("started", "ended"):
            if state[field] is not None:
                moment = datetime.datetime.fromtimestamp(state[field], datetime.timezone.utc)
                state[field] = moment.isoformat(timespec="milliseconds")
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_family(state))
    return 0


_KIND_OF_SUFFIX = {
    b"lock": "lock",
    b"handoff": "lock",
    b"count": "latch",
    b"generation": "latch",
    b"stock": "inventory",
    b"fenced": "fenced",
    b"capacity": "semaphore",
    b"payload": "election",
    b"holders": "shared",
    b"units": "shared",
    b"granted": "shared",
}
_RANK = ("semaphore", "election", "shared", "inventory", "latch", "fenced", "lock")


def scan_all(
    client: Any, prefix: str, limit: int, count: int = 500, *, match: str = "*"
) -> list[dict[str, Any]]:
    """Every primitive with a key under ``<prefix>:{...}:``, grouped by name (SCAN COUNT).

    The kind is guessed from the key names: read/write locks, semaphores and elections share
    one layout (``shared`` when nothing tells them apart); a name with only a fence or queue
    left is reported as ``lock``. Stops after ``limit`` names; ``match`` (a SCAN MATCH glob)
    keeps only the names it matches.

    ``client`` may be a ``redis.cluster.RedisCluster``: its ``scan_iter`` SCANs every master
    to the end, one cursor each (redis-py 5.0.1 onwards), and a primitive's keys all live in
    the slot of its ``{name}`` hash tag, so each name is found whole on one master.
    """
    found: dict[bytes, set[bytes]] = {}
    start = prefix.encode() + b":{"
    for key in client.scan_iter(match=f"{prefix}:{{{match}}}:*", count=count):
        raw = key if isinstance(key, bytes) else str(key).encode()
        close = raw.rfind(b"}:")
        if not raw.startswith(start) or close < len(start):
            continue
        name, suffix = raw[len(start) : close], raw[close + 2 :].split(b":")[0]
        if name not in found and len(found) >= limit:
            break
        found.setdefault(name, set()).add(suffix)
    rows = []
    for name in sorted(found):
        kinds = {_KIND_OF_SUFFIX.get(suffix, "lock") for suffix in found[name]}
        kind = next((k for k in _RANK if k in kinds), "lock")
        rows.append(
            {
                "name": name.decode(errors="replace"),
                "kind": kind,
                "keys": sorted(s.decode(errors="replace") for s in found[name]),
            }
        )
    return rows


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


def command(args: argparse.Namespace) -> int:
    """Run ``redlease inspect``: print the state; exit 0 whether held or free."""
    if args.all == (args.name is not None):
        raise CliError("give either NAME or --all", 2)
    check_connection(args.client, args.url)
    if args.all:
        return _all(args)
    name: str = args.name
    if args.kind == "ratelimit":
        return ratelimit.command(args)
    if args.kind == "once":
        return _once(args)
    if args.kind != "lock":
        return _family(args)
    lock = redlease.Lock(args.client, name, prefix=args.prefix)
    try:
        info = lock.inspect()
    except redlease.ForeignData as exc:
        key = exc.key.decode(errors="replace")
        raise CliError(
            f"lock {name!r}: key {key} holds data redlease did not write (another program "
            "uses this name? choose another NAME or --prefix)",
            EX_FOREIGN,
        ) from exc
    except redlease.LockUnavailable as exc:
        raise unavailable(args.url, exc) from exc
    state = report(info, lock_key(args.prefix, name))
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_text(state))
    return 0
