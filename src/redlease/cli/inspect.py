"""``redlease inspect NAME``: whether a lock is held, its lease, fencing counter and waiters.

It reads the lock through the public API, :meth:`redlease.Lock.inspect`: the command line sees
exactly what a program would, and refuses what the library refuses (a key of the lock that
holds data redlease did not write).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import redlease

from ._common import (
    DEFAULT_URL,
    CliError,
    check_connection,
    global_options,
    handler_defaults,
    lock_name,
    unavailable,
)

__all__ = ["EX_FOREIGN", "add_parser", "command", "format_text", "lock_key", "report"]

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
    parser.add_argument("name", type=lock_name, metavar="NAME", help="the lock's name")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
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


def command(args: argparse.Namespace) -> int:
    """Run ``redlease inspect``: print the state; exit 0 whether held or free."""
    name: str = args.name
    check_connection(args.client, args.url)
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
