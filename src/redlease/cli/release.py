"""``redlease release NAME --force``: break-glass, evict the holder of a lock an operator cannot
wait for, through the library's ``force_release`` (:mod:`redlease._core.breakglass`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import redis

import redlease

from . import once
from ._common import DEFAULT_URL, EX_USAGE, CliError, global_options, handler_defaults, lock_name
from ._connection import check_connection, unavailable
from ._kinds import HOLDERS
from ._report import holder_text
from .inspect import kind_of

__all__ = ["EX_NOTHING", "add_parser", "command"]

EX_NOTHING = 1
"""Nothing was held (with the --token given): nothing was removed, as pkill finds no process."""

_DESCRIPTION = """\
Break-glass: evict whoever holds NAME, without being its holder. For when a holder hangs
(stuck on I/O, deadlocked) on a lock its watchdog keeps renewing, so its lease never ends.

In one step on the server: the holding is removed, the fencing counter moves on (every fence
the evicted holder has is below the next holder's, so its writes to a FencedStore are refused
once the next holder has written), and the first waiter is granted the lock at once, as a
release does. The evicted holder finds out at its next renewal (within ttl/3): its on_lost
runs. Logged as a WARNING (redlease_event "force_released") by this command's process.

Refused without --force. The kind of NAME is found from its keys, as inspect does, or given
with --kind: a lock, a semaphore (every permit, or the one of --token), a read/write lock (its
holds), an election (the leader's term) or a once (a `redlease run --every` job). --token
evicts only that holder (the token `redlease inspect NAME` shows): nothing is removed if
someone else holds it by then.

A once: its run in progress is evicted (its `redlease run` terminates the command and exits
70, as when its lease is lost), or the success that keeps NAME until its period ends is
cleared, so that the job runs again at its next start (after a fix, say).

Prints what it removed (--json: {"name", "kind", "removed": [{"host", "pid", "thread",
"since", "token"}, ...], "fence"}; a once adds "state": "running" (evicted), "done" (cleared)
or null). Exit code 0 removed, 1 nothing was held (nothing changed; a once: inspect shows it
free), 2 bad arguments or no --force, 69 Redis cannot be reached.
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``release`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "release",
        parents=[global_options(url_default=DEFAULT_URL)],
        help="break-glass: evict the holder of a lock (--force)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", type=lock_name, metavar="NAME", help="the primitive's name")
    parser.add_argument(
        "--force", action="store_true", help="required: evict a holder that is not you"
    )
    parser.add_argument(
        "--kind",
        choices=HOLDERS,
        default=None,
        help="which primitive NAME is (default: found from the keys that exist)",
    )
    parser.add_argument(
        "--token", default=None, metavar="TOKEN", help="evict only the holder with this token"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    handler_defaults(parser, command)


def command(args: argparse.Namespace) -> int:
    """Run ``redlease release --force``: evict, print what was removed."""
    if not args.force:
        raise CliError(
            f"release {args.name!r}: this evicts whoever holds it, who may still be working: "
            "add --force if that is what you want",
            EX_USAGE,
        )
    check_connection(args.client, args.url)
    name: str = args.name
    kind = kind_of(args, name)
    if kind not in HOLDERS:
        raise CliError(f"{name!r} is a {kind}: it has no holder to release", EX_USAGE)
    if kind == "once":
        return 0 if once.release(args) else EX_NOTHING
    cls: Any = {
        "lock": redlease.Lock,
        "semaphore": redlease.Semaphore,
        "rwlock": redlease.ReadWriteLock,
        "election": redlease.Election,
    }[kind]
    try:
        result = cls.force_release(args.client, name, prefix=args.prefix, token=args.token)
    except (TypeError, ValueError) as exc:
        raise CliError(f"argument --token: {exc}", EX_USAGE) from exc
    except (redlease.Unavailable, redis.RedisError) as exc:
        raise unavailable(args.url, exc) from exc
    removed = [
        {f: getattr(h, f) for f in ("host", "pid", "thread", "since", "token")}
        for h in result.removed
    ]
    if args.json:
        json.dump(
            {"name": name, "kind": kind, "removed": removed, "fence": result.fence}, sys.stdout
        )
        sys.stdout.write("\n")
    elif removed:
        for holder in removed:
            print(f"removed {kind} {name!r} holder {holder_text(holder)} ({holder['token']})")
        print(f"fence moved on to {result.fence}")
    else:
        held = "held with that token" if args.token else "held"
        print(f"{kind} {name!r} was not {held}: nothing removed")
    return 0 if removed else EX_NOTHING
