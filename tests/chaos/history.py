"""The chaos history and its checker: pure, no I/O beyond parsing lines.

Each worker appends JSON lines to its own file, flushed one by one (a SIGKILLed worker loses at
most the line it was writing)::

    {"ev": "acq", "w": "w3", "h": 17, "name": "hot-1", "fence": 912, "t": 1732350000123456}
    {"ev": "write", "w": "w3", "h": 17, "name": "hot-1", "fence": 912, "ok": true,
     "version": 5031}               (a refused write has "ok": false and "high": the mark)
    {"ev": "rel", "w": "w3", "h": 17, "t": 1732350000125012, "outcome": "released"}

``t`` is the server's clock (``TIME`` on the never-faulted resource server, microseconds),
read right after the acquire returned and right before the release was sent: the recorded
interval lies inside the real hold, so an overlap of recorded intervals is a real overlap (the
check can miss overlaps, it cannot invent them). ``ok`` says whether the store accepted the
write; ``version`` is the store's count of accepted writes, which orders them as the store
applied them. The injector writes ``{"ev": "fault", "kind": ..., "start": t, "end": t}``.

The checker, Jepsen-style, reports anomalies with the events that show them:

* **overlapping holds**: two holds of one name whose intervals intersect. Expected for a
  lease lock when a holder pauses past its lease or the lock's data is lost; each overlap is
  attributed to the faults active around it.
* **stale writes accepted**: taking the accepted writes of a name in the store's order
  (``version``), a write whose fence is below the highest fence accepted before it, or equal
  to it but from another hold (two holders shared a fence). A fenced store must show 0.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Fault",
    "History",
    "Hold",
    "Overlap",
    "Report",
    "StaleWrite",
    "Write",
    "check",
    "parse",
]


@dataclass(frozen=True)
class Hold:
    """One acquisition of a name; ``end`` is None if the worker died holding it."""

    worker: str
    hold: int
    name: str
    fence: int
    start: int
    end: int | None = None
    outcome: str = "open"  # released | lost | unavailable | open (the worker was killed)


@dataclass(frozen=True)
class Write:
    """One write attempted under a hold."""

    worker: str
    hold: int
    name: str
    fence: int
    accepted: bool
    version: int | None  # the store's order of accepted writes; None if refused
    highest: int | None = None  # the store's mark after the write (what refused it)


@dataclass(frozen=True)
class Fault:
    """One injected fault, on the server's clock."""

    kind: str
    start: int
    end: int
    target: str = ""


@dataclass
class History:
    """Everything recorded in one run."""

    holds: list[Hold] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Overlap:
    """Two holds of one name at the same time, and the faults active around it."""

    first: Hold
    second: Hold
    causes: tuple[str, ...]


@dataclass(frozen=True)
class StaleWrite:
    """An accepted write whose fence was below (or shared with another hold at) the mark."""

    write: Write
    mark: int  # the highest fence accepted before it
    mark_hold: tuple[str, int]  # the hold that set that mark


@dataclass
class Report:
    """What the checker found."""

    holds: int = 0
    open_holds: int = 0
    lost: int = 0
    writes: int = 0
    accepted: int = 0
    refused: int = 0
    overlaps: list[Overlap] = field(default_factory=list)
    stale: list[StaleWrite] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    overlap_causes: Counter[str] = field(default_factory=Counter)
    refused_causes: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        """No stale write was accepted (overlaps are expected of a lease lock)."""
        return not self.stale


def parse(lines: Iterable[str]) -> History:
    """Build a :class:`History` from JSON lines; a torn last line (a killed worker) is skipped."""
    history = History()
    acquired: dict[tuple[str, int], dict[str, Any]] = {}
    released: dict[tuple[str, int], dict[str, Any]] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            history.errors["torn line"] += 1
            continue
        kind = event.get("ev")
        if kind == "acq":
            acquired[(event["w"], event["h"])] = event
        elif kind == "rel":
            released[(event["w"], event["h"])] = event
        elif kind == "write":
            history.writes.append(
                Write(
                    worker=event["w"],
                    hold=event["h"],
                    name=event["name"],
                    fence=event["fence"],
                    accepted=bool(event["ok"]),
                    version=event.get("version"),
                    highest=event.get("high"),
                )
            )
        elif kind == "fault":
            history.faults.append(
                Fault(event["kind"], event["start"], event["end"], event.get("target", ""))
            )
        elif kind == "error":
            history.errors[event["what"]] += 1
    for key, acq in acquired.items():
        rel = released.get(key)
        history.holds.append(
            Hold(
                worker=acq["w"],
                hold=acq["h"],
                name=acq["name"],
                fence=acq["fence"],
                start=acq["t"],
                end=None if rel is None else rel["t"],
                outcome="open" if rel is None else rel["outcome"],
            )
        )
    return history


def overlapping_holds(holds: Iterable[Hold]) -> list[tuple[Hold, Hold]]:
    """Pairs of closed holds of one name whose intervals intersect (first started first)."""
    by_name: dict[str, list[Hold]] = defaultdict(list)
    for h in holds:
        if h.end is not None:
            by_name[h.name].append(h)
    pairs: list[tuple[Hold, Hold]] = []
    for group in by_name.values():
        group.sort(key=lambda h: (h.start, h.end))
        active: list[Hold] = []  # holds that may still overlap later ones
        for h in group:
            active = [a for a in active if a.end is not None and a.end > h.start]
            pairs.extend((a, h) for a in active)
            active.append(h)
    return pairs


def stale_writes(writes: Iterable[Write]) -> list[StaleWrite]:
    """Accepted writes, in the store's order per name, below the mark (or sharing it)."""
    by_name: dict[str, list[Write]] = defaultdict(list)
    for w in writes:
        if w.accepted and w.version is not None:
            by_name[w.name].append(w)
    found: list[StaleWrite] = []
    for group in by_name.values():
        group.sort(key=lambda w: w.version or 0)
        mark, mark_hold = -1, ("", -1)
        for w in group:
            hold = (w.worker, w.hold)
            if w.fence < mark or (w.fence == mark and hold != mark_hold):
                found.append(StaleWrite(w, mark, mark_hold))
            elif w.fence > mark:
                mark, mark_hold = w.fence, hold
    return found


HOLDER_FAULTS = frozenset({"pause", "kill"})


def causes(hold: Hold, until: int, faults: Iterable[Fault], slack: int) -> tuple[str, ...]:
    """Kinds of the faults that could have cost ``hold`` its lock before ``until``.

    A fault counts if it was active at some time between the hold's start and ``until``
    (``slack`` us of clock-reading delay allowed either side); a pause or kill counts only if
    it hit this hold's worker. The most specific explanation wins: a pause or kill of this
    holder, else an empty restart, else every network or server fault in the window.
    ``("none",)`` if no fault qualifies.
    """
    kinds = {
        f.kind
        for f in faults
        if f.start - slack <= until
        and f.end + slack >= hold.start
        and (f.kind not in HOLDER_FAULTS or f.target == hold.worker)
    }
    if kinds & HOLDER_FAULTS:  # the fault that hit this very holder explains it best
        kinds &= HOLDER_FAULTS
    elif "restart-empty" in kinds:  # then the one that erased its lock
        kinds = {"restart-empty"}
    return tuple(sorted(kinds)) or ("none",)


def check(history: History, *, slack_us: int = 100_000) -> Report:
    """Check ``history``; ``slack_us`` widens faults when attributing overlaps and refusals."""
    report = Report(errors=Counter(history.errors))
    report.holds = len(history.holds)
    report.open_holds = sum(h.outcome == "open" for h in history.holds)
    report.lost = sum(h.outcome == "lost" for h in history.holds)
    report.writes = len(history.writes)
    report.accepted = sum(w.accepted for w in history.writes)
    report.refused = report.writes - report.accepted
    report.faults = Counter(f.kind for f in history.faults)
    for first, second in overlapping_holds(history.holds):
        why = causes(first, second.start, history.faults, slack_us)
        report.overlaps.append(Overlap(first, second, why))
        report.overlap_causes.update(why)
    report.stale = stale_writes(history.writes)
    holds = {(h.worker, h.hold): h for h in history.holds}
    for w in history.writes:
        if not w.accepted:
            h = holds.get((w.worker, w.hold))
            if h is None or h.end is None:
                report.refused_causes["unknown"] += 1
                continue
            near = causes(h, h.end, history.faults, slack_us)
            report.refused_causes.update(near)
    return report
