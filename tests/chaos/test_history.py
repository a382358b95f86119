"""The history checker and the fault schedule: pure, no servers."""

from __future__ import annotations

import itertools
import json

from tests.chaos.history import Fault, Hold, Write, check, parse, stale_writes
from tests.chaos.schedule import KINDS, LANES, plan


def lines(*events: dict[str, object]) -> list[str]:
    return [json.dumps(e) for e in events]


def acq(w: str, h: int, name: str, fence: int, t: int) -> dict[str, object]:
    return {"ev": "acq", "w": w, "h": h, "name": name, "fence": fence, "t": t}


def rel(w: str, h: int, t: int, outcome: str = "released") -> dict[str, object]:
    return {"ev": "rel", "w": w, "h": h, "t": t, "outcome": outcome}


def wr(w: str, h: int, name: str, fence: int, version: int | None) -> dict[str, object]:
    return {
        "ev": "write",
        "w": w,
        "h": h,
        "name": name,
        "fence": fence,
        "ok": version is not None,
        "version": version,
        "high": None,
    }


def test_a_clean_history_has_no_anomaly() -> None:
    history = parse(
        lines(
            acq("a", 0, "x", 1, 100),
            wr("a", 0, "x", 1, 1),
            wr("a", 0, "x", 1, 2),
            rel("a", 0, 200),
            acq("b", 0, "x", 2, 300),
            wr("b", 0, "x", 2, 3),
            rel("b", 0, 400),
            acq("c", 0, "y", 1, 150),
            wr("c", 0, "y", 1, 1),
            rel("c", 0, 350),
        )
    )
    report = check(history)
    assert (report.holds, report.writes, report.accepted, report.refused) == (3, 4, 4, 0)
    assert report.overlaps == [] and report.stale == [] and report.ok


def test_overlapping_holds_are_found_and_attributed_to_the_pause_of_the_first() -> None:
    history = parse(
        lines(
            acq("a", 0, "x", 1, 100),
            rel("a", 0, 1_000, "lost"),  # paused past its lease
            acq("b", 0, "x", 2, 600),
            rel("b", 0, 700),
            acq("c", 0, "x", 3, 800),
            rel("c", 0, 900),
            acq("d", 0, "x", 4, 1_100),
            rel("d", 0, 1_200),  # after a: no overlap
            {"ev": "fault", "kind": "pause", "start": 150, "end": 950, "target": "a"},
            {"ev": "fault", "kind": "drop", "start": 500, "end": 500, "target": "server 0"},
        ),
    )
    report = check(history, slack_us=0)
    pairs = {(o.first.worker, o.second.worker) for o in report.overlaps}
    assert pairs == {("a", "b"), ("a", "c")}
    assert report.overlap_causes == {"pause": 2}  # the pause of a explains it, not the drop
    assert report.lost == 1 and report.ok


def test_overlap_without_a_fault_is_reported_as_none() -> None:
    history = parse(
        lines(
            acq("a", 0, "x", 1, 100), rel("a", 0, 500), acq("b", 0, "x", 2, 400), rel("b", 0, 600)
        )
    )
    report = check(history)
    assert len(report.overlaps) == 1 and report.overlap_causes == {"none": 1}


def test_a_stale_write_accepted_is_found_in_the_stores_order() -> None:
    history = parse(
        lines(
            acq("a", 0, "x", 1, 100),
            acq("b", 0, "x", 2, 600),
            wr("b", 0, "x", 2, 1),  # the newer holder writes first (version 1)
            wr("a", 0, "x", 1, 2),  # the paused one writes late and is accepted: stale
            rel("b", 0, 700),
            rel("a", 0, 1_000, "lost"),
        )
    )
    report = check(history)
    assert not report.ok
    [stale] = report.stale
    assert (stale.write.worker, stale.write.fence, stale.mark, stale.mark_hold) == (
        "a",
        1,
        2,
        ("b", 0),
    )


def test_a_refused_write_is_not_stale_and_counts_as_refused() -> None:
    history = parse(
        lines(
            acq("b", 0, "x", 2, 600),
            wr("b", 0, "x", 2, 1),
            rel("b", 0, 700),
            acq("a", 0, "x", 1, 100),
            wr("a", 0, "x", 1, None),
            rel("a", 0, 1_000, "lost"),
        )
    )
    report = check(history)
    assert report.ok and report.refused == 1 and report.accepted == 1


def test_a_shared_fence_from_two_holds_is_stale_but_one_holder_may_write_twice() -> None:
    writes = [
        Write("a", 0, "x", 5, True, 1),
        Write("a", 0, "x", 5, True, 2),  # the same hold again: fine
        Write("b", 3, "x", 5, True, 3),  # another hold with the same fence: a repeat
    ]
    [stale] = stale_writes(writes)
    assert stale.write.worker == "b" and stale.mark_hold == ("a", 0)


def test_open_holds_and_torn_lines_are_tolerated() -> None:
    text = [*lines(acq("a", 0, "x", 1, 100), wr("a", 0, "x", 1, 1)), '{"ev": "rel", "w"']
    history = parse(text)
    report = check(history)
    assert report.open_holds == 1 and report.errors == {"torn line": 1}
    assert report.overlaps == [] and report.ok


def test_causes_of_a_refusal_consider_only_faults_inside_the_hold() -> None:
    h = Hold("a", 0, "x", 1, 1_000, 2_000, "lost")
    faults = [Fault("stall", 1_500, 1_700, "server 0"), Fault("hang", 5_000, 6_000)]
    history = parse(
        lines(acq("a", 0, "x", 1, 1_000), wr("a", 0, "x", 1, None), rel("a", 0, 2_000, "lost"))
    )
    history.faults.extend(faults)
    assert check(history, slack_us=0).refused_causes == {"stall": 1}
    assert h.outcome == "lost"


def test_the_schedule_is_seeded_and_plays_every_kind_each_round() -> None:
    for lane, kinds in LANES.items():
        first = list(itertools.islice(plan(7, lane, 0.5), 3 * len(kinds)))
        again = list(itertools.islice(plan(7, lane, 0.5), 3 * len(kinds)))
        other = list(itertools.islice(plan(8, lane, 0.5), 3 * len(kinds)))
        assert first == again and first != other
        for i in range(3):
            round_ = first[i * len(kinds) : (i + 1) * len(kinds)]
            assert sorted(p.kind for p in round_) == sorted(kinds)
    assert set(KINDS) == {k for kinds in LANES.values() for k in kinds}
    pauses = [p for p in itertools.islice(plan(1, "process", 0.5), 40) if p.kind == "pause"]
    assert all(p.length > 0.5 for p in pauses)  # a pause outlives the lease
