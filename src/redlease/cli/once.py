"""A :class:`redlease.Once` (a ``redlease run --every`` job) from the command line:
``redlease inspect NAME`` shows its last run, ``redlease release NAME --force`` frees it
(:meth:`redlease.Once.force_release`).

Both use the same words: the name is *held by* a run in progress (its holder, as a lock's),
*kept* by a success until its period ends, or *free*. What inspect shows held or kept, release
frees (exit 0); what it shows free, release leaves alone (exit 1, nothing changed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

import redlease

from ._common import EX_USAGE, CliError
from ._connection import unavailable
from ._report import family_report, format_family, holder_text, plain

__all__ = ["EX_FOREIGN", "inspect", "release"]

EX_FOREIGN = 1
"""A key of the Once holds data redlease did not write (as ``inspect`` of a lock)."""


def _foreign(name: str, exc: redlease.ForeignData) -> CliError:
    return CliError(f"once {name!r}: {exc} (choose another NAME or --prefix)", EX_FOREIGN)


def _utc(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def report(info: redlease.OnceInfo | None, name: str) -> dict[str, Any]:
    """The ``--json`` object of ``info`` (times in UTC, ISO 8601); ``held_by`` is the holder
    of a run in progress, as a lock's (``null`` otherwise); ``state`` null: never ran."""
    if info is None:
        return {"name": name, "kind": "once", "state": None, "held_by": None}
    state = family_report(info, "once")
    for field in ("started", "ended"):
        if state[field] is not None:
            state[field] = _utc(state[field])
    state["held_by"] = None if info.held_by is None else plain(info.held_by)
    return state


def inspect(args: argparse.Namespace) -> int:
    """``inspect NAME`` of a Once: its last run; exit 0 whether held, kept or free."""
    once = redlease.Once(args.client, args.name, every=1, prefix=args.prefix)
    try:
        info = once.last()
    except redlease.ForeignData as exc:
        raise _foreign(args.name, exc) from exc
    except redlease.Unavailable as exc:
        raise unavailable(args.url, exc) from exc
    state = report(info, args.name)
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_family(state))
    return 0


def release(args: argparse.Namespace) -> bool:
    """``release NAME --force`` of a Once: evict its run in progress or clear its success
    (``--token``: only that run's); prints what it did. Whether anything was changed."""
    name: str = args.name
    try:
        result = redlease.Once.force_release(
            args.client, name, prefix=args.prefix, token=args.token
        )
    except (TypeError, ValueError) as exc:
        raise CliError(f"argument --token: {exc}", EX_USAGE) from exc
    except redlease.ForeignData as exc:
        raise _foreign(name, exc) from exc
    except redlease.Unavailable as exc:
        raise unavailable(args.url, exc) from exc
    removed = [plain(h) for h in result.removed]
    if args.json:
        document = {"name": name, "kind": "once", "removed": removed, "fence": result.fence}
        json.dump({**document, "state": result.state}, sys.stdout)
        sys.stdout.write("\n")
    elif result.state == "running":
        (holder,) = removed
        print(f"removed once {name!r} holder {holder_text(holder)} ({holder['token']})")
        print("its run is over: the holder's on_lost runs at its next renewal")
        print(f"fence moved on to {result.fence}")
    elif result.state == "done":
        (holder,) = removed
        print(f"cleared once {name!r}: the success of {holder_text(holder)} no longer keeps it")
        print(f"it may run again now; fence moved on to {result.fence}")
    else:
        which = "the run with that token" if args.token else "a run in progress or a success"
        print(f"once {name!r} was not held or kept by {which}: nothing removed")
    return bool(removed)
