"""Redlock's fencing tokens under faults: a property test, and the twin that shows it can fail.

Between successive acquisitions a random minority of the five servers is affected: each
affected server is either unreachable during the acquisition (paused: it answers nothing) or
has lost its data since the previous one (flushed: the state of a server that restarted
empty). The guarantee under test (docs/safety.md): while the servers affected at each
acquisition are a minority, fencing tokens strictly increase and no two holders overlap.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import redlease
from redlease._core.lock import LockKeys
from tests.support import Tasks
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(300)
KEYS = LockKeys.build("redlease", b"fenced")

# One step: server -> "down" or "wiped", for at most two of the five servers.
steps = st.lists(
    st.dictionaries(st.integers(0, 4), st.sampled_from(["down", "wiped"]), max_size=2),
    min_size=1,
    max_size=5,
)


def apply(step: dict[int, str], servers: list[RedisServer], clients: list[Any]) -> None:
    for i, fault in step.items():
        if fault == "wiped":
            clients[i].flushall()
        else:
            servers[i].pause()


def heal(step: dict[int, str], servers: list[RedisServer]) -> None:
    for i, fault in step.items():
        if fault == "down":
            servers[i].resume()


def redlock_fences(plan: list[dict[int, str]], servers: list[RedisServer]) -> list[int]:
    """Run ``plan`` with redlease's Redlock: one acquisition per step."""
    clients = [s.client() for s in servers]
    fences: list[int] = []
    refused: list[dict[int, str]] = []
    try:
        for step in plan:
            apply(step, servers, clients)
            try:
                # A paused server runs the commands buffered for it when it resumes: stale
                # grants (ours, the rival's) then block it until their 1 s lease runs out.
                lock = redlease.Redlock(clients, "fenced", ttl=1.0, server_timeout=0.05)
                try:
                    assert lock.acquire(timeout=10)
                except redlease.QuorumUnavailable:
                    # Fewer than a quorum of the granting servers have the counter (the
                    # others lost it, or missed the name's first use): refused, not guessed.
                    refused.append(step)
                    continue
                rival = redlease.Redlock(clients, "fenced", ttl=1.0, server_timeout=0.05)
                # no two holders overlap (a rival thread: the holder's own try would raise)
                assert not Tasks.run(functools.partial(rival.acquire, blocking=False))
                fences.append(lock.fence or 0)
                lock.release()
            finally:
                heal(step, servers)
    finally:
        for c in clients:
            c.close()
    return fences


def naive_fences(plan: list[dict[int, str]], servers: list[RedisServer]) -> list[int]:
    """The obvious multi-server fence: INCR on every granting server, take the largest."""
    clients = [s.client() for s in servers]
    fences = []
    for step in plan:
        apply(step, servers, clients)
        try:
            up = [c for i, c in enumerate(clients) if step.get(i) != "down"]
            fences.append(max(int(c.incr(KEYS.fence)) for c in up))
        finally:
            heal(step, servers)
    for c in clients:
        c.close()
    return fences


def strictly_increasing(fences: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(fences))


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(plan=steps)
def test_fences_increase_while_a_majority_keeps_its_data(
    plan: list[dict[int, str]], redlock_servers: list[RedisServer]
) -> None:
    for s in redlock_servers:
        with s.client() as c:
            c.flushall()
    assert strictly_increasing(redlock_fences(plan, redlock_servers))


# A minority is affected at every step, yet the naive fence repeats itself at step 4:
# server 4 alone saw fence 3, and is the one unreachable when fence 4 is issued.
COUNTEREXAMPLE: list[dict[int, str]] = [
    {0: "down", 1: "down"},
    {},
    {2: "down", 3: "down"},
    {4: "down"},
]


def test_the_naive_fence_fails_where_redlock_does_not(redlock_servers: list[RedisServer]) -> None:
    """The twin: the check above catches a fence that is not written back to the majority."""
    assert not strictly_increasing(naive_fences(COUNTEREXAMPLE, redlock_servers))
    for s in redlock_servers:
        with s.client() as c:
            c.flushall()
    assert strictly_increasing(redlock_fences(COUNTEREXAMPLE, redlock_servers))


# Found by the chaos long run (docs/faults.md): one server restarts empty while the two that
# missed the last write-back are the only others up. Every step affects a minority, yet the
# granting majority {2, 3, 4} knows nothing of fence 4: server 2 lost it, 3 and 4 never saw it.
LAGGING_THEN_WIPED: list[tuple[list[int], list[int]]] = [  # (servers up, servers wiped before)
    ([0, 1, 2, 3, 4], []),
    ([0, 1, 2], []),
    ([0, 1, 2], []),
    ([0, 1, 2], []),
    ([2, 3, 4], [2]),
]


def test_twin_a_wiped_counter_that_counts_repeats_a_fence(
    redlock_servers: list[RedisServer],
) -> None:
    """The twin: merging the counters of any granting majority (a wiped one included, as
    before) issues fence 2 after fence 4 in this plan."""
    clients = [s.client() for s in redlock_servers]
    try:
        for c in clients:
            c.flushall()
        fences = []
        for up, wiped in LAGGING_THEN_WIPED:
            for i in wiped:
                clients[i].flushall()
            fence = max(int(clients[i].incr(KEYS.fence)) for i in up)
            for i in up:  # the write-back
                clients[i].set(KEYS.fence, max(fence, int(clients[i].get(KEYS.fence) or 0)))
            fences.append(fence)
        assert not strictly_increasing(fences), fences
    finally:
        for c in clients:
            c.close()


def test_a_wiped_server_does_not_count_until_written_back(
    redlock_servers: list[RedisServer],
) -> None:
    """The same plan with redlease's Redlock: the last step is refused (QuorumUnavailable)
    rather than given a repeated fence; once the others are back, the fence goes on above 4
    and the wiped server has its counter again."""
    clients = [s.client() for s in redlock_servers]
    fences: list[int] = []
    try:
        for c in clients:
            c.flushall()
        for step, (up, wiped) in enumerate(LAGGING_THEN_WIPED):
            for i in wiped:
                clients[i].flushall()
            down = [i for i in range(5) if i not in up]
            for i in down:
                redlock_servers[i].pause()
            try:
                lock = redlease.Redlock(clients, "fenced", ttl=1.0, server_timeout=0.05)
                if step < len(LAGGING_THEN_WIPED) - 1:
                    assert lock.acquire(timeout=10)
                    fences.append(lock.fence or 0)
                    lock.release()
                else:
                    with pytest.raises(redlease.QuorumUnavailable, match="no fencing counter"):
                        lock.acquire(timeout=10)
            finally:
                for i in down:
                    redlock_servers[i].resume()
            Tasks.sleep(1.1)  # a resumed server's buffered grants lapse (1 s leases)
        lock = redlease.Redlock(clients, "fenced", ttl=1.0, server_timeout=0.05)
        assert lock.acquire(timeout=10)
        fences.append(lock.fence or 0)
        lock.release()
        assert strictly_increasing(fences) and fences[-1] > 4, fences
        assert int(clients[2].get(KEYS.fence) or 0) >= fences[-1]  # caught up
    finally:
        for c in clients:
            c.close()
