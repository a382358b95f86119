"""sync only: servers known not to answer, with no connection open, cost a Redlock round
nothing when the others give enough (they are probed in a thread of their own), and the
round its deadline once when they do not (however many hang).

The sync fan-out has no threads: it used to open a connection to each such server in turn,
each handshake waiting out ``server_timeout``, before the next server was even sent to (two
hung servers: two deadlines per call). redlock5 saw worse: with a long ``server_timeout``, a
waiter's acquire spent longer than the lease on them after its grant. asyncio opens its
connections in parallel and needs none of this.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import redlease
from redlease._fanout import LATE, FanOut
from redlease._fanout import blocking as fanout_blocking
from redlease._sync import redlock as sync_redlock
from redlease._sync import redlock_servers as sync_servers
from redlease._sync.one_server import Backend
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)
SERVER_TIMEOUT = 1.0
HUNG = (3, 4)


@contextlib.contextmanager
def hanging(servers: list[RedisServer]) -> Iterator[None]:
    """Servers HUNG paused (SIGSTOP) for the block, and resumed after it whatever happens."""
    for i in HUNG:
        servers[i].pause()
    try:
        yield
    finally:
        for i in HUNG:
            servers[i].resume()


def timed_with_two_hung(clients: list[Any], servers: list[RedisServer]) -> tuple[float, float]:
    """Seconds an acquire and a release took, once servers HUNG are known down (a late
    call's connection is closed after LATE; a new one's handshake then times out)."""
    lock = redlease.Redlock(clients, "unreachable", ttl=10.0, server_timeout=SERVER_TIMEOUT)
    assert lock.acquire(blocking=False)
    lock.release()  # every connection open
    with hanging(servers):
        assert lock.acquire(blocking=False)  # HUNG are late: known not to answer now
        lock.release()
        time.sleep(LATE + 0.2)  # their late calls' connections are closed at the next round
        # From that round on they are hung with no connection open: asked only when the others
        # do not give enough, or to probe them.
        assert lock.acquire(blocking=False)
        lock.release()
        start = time.monotonic()
        assert lock.acquire(blocking=False)
        acquired = time.monotonic()
        lock.release()
        released = time.monotonic()
    return acquired - start, released - acquired


def test_servers_known_not_to_answer_are_not_waited_for(
    redlock_clients: list[Any], redlock_servers: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between probes (a round that asks them in turn anyway costs a deadline each: see the
    tests below)."""
    monkeypatch.setattr(Backend, "probe", lambda self: False)
    took, released = timed_with_two_hung(redlock_clients, redlock_servers)
    # A majority answers at once: well under one deadline each (a generous bound).
    assert took < SERVER_TIMEOUT and released < SERVER_TIMEOUT, (took, released)


def test_twin_connecting_to_each_in_turn_costs_a_deadline_per_server(
    redlock_clients: list[Any], redlock_servers: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above catches a fan-out that opens their connections first, in turn."""
    monkeypatch.setattr(fanout_blocking, "hung", lambda backend: False)
    took, _ = timed_with_two_hung(redlock_clients, redlock_servers)
    assert took >= len(HUNG) * SERVER_TIMEOUT * 0.9  # fails the check above


def slowest_call_while_two_hang(clients: list[Any], servers: list[RedisServer]) -> float:
    """Seconds the slowest acquire or release took over 3 s of rounds while servers HUNG
    hang: back to back at first, so that their late calls fill their connections (CHAIN) and
    later rounds would connect to them anew, then probing them (PROBE, doubling)."""
    lock = redlease.Redlock(clients, "reconnect", ttl=10.0, server_timeout=SERVER_TIMEOUT)
    assert lock.acquire(blocking=False)
    lock.release()  # every connection open
    slowest = 0.0
    with hanging(servers):
        end = time.monotonic() + 3.0  # bounded: a few dozen rounds
        while time.monotonic() < end:
            start = time.monotonic()
            assert lock.acquire(blocking=False)
            acquired = time.monotonic()
            lock.release()
            slowest = max(slowest, acquired - start, time.monotonic() - acquired)
            time.sleep(0.05)
    return slowest


def test_hung_servers_are_probed_off_the_callers_path(
    redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    """Once their connections are given up, the rounds do without them, and connecting to
    them anew (a probe: their handshakes time out) happens in a thread of its own."""
    slowest = slowest_call_while_two_hang(redlock_clients, redlock_servers)
    assert slowest < 0.5 * SERVER_TIMEOUT, slowest


def test_twin_probing_each_in_turn_costs_a_call_a_deadline_per_server(
    redlock_clients: list[Any], redlock_servers: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above catches a fan-out that connects to every hung server due a probe in
    turn, in the caller's round (as it did): a call then waits a whole deadline per server
    probed, two when both probes fall due in one round, at least one (on a loaded machine
    they may fall due apart), where the check above allows half of one."""

    def hung_unless_probed(backend: Any) -> bool:
        return not backend.idle() and backend.hung() and not backend.probe()

    monkeypatch.setattr(fanout_blocking, "hung", hung_unless_probed)
    slowest = slowest_call_while_two_hang(redlock_clients, redlock_servers)
    assert slowest >= SERVER_TIMEOUT * 0.9, slowest  # fails the check above


def handoffs_while_two_hang(clients: list[Any], servers: list[RedisServer]) -> list[float]:
    """Seconds from each of 4 releases to the waiter's acquire returning, while servers HUNG
    hang (the first rounds fill their connections, CHAIN; then they are given up on)."""
    holder = redlease.Redlock(clients, "handoff", ttl=10.0, server_timeout=SERVER_TIMEOUT)
    assert holder.acquire(blocking=False)
    holder.release()  # every connection open
    gaps = []
    with hanging(servers):
        for _ in range(4):
            assert holder.acquire(blocking=False)
            waiter = redlease.Redlock(clients, "handoff", ttl=10.0, server_timeout=SERVER_TIMEOUT)
            acquired: list[float] = []

            def wait(waiter: Any = waiter, acquired: list[float] = acquired) -> None:
                if waiter.acquire(timeout=5.0):  # bounded
                    acquired.append(time.monotonic())
                    waiter.release()

            thread = threading.Thread(target=wait)
            thread.start()
            time.sleep(0.2)  # it is queued, waiting
            released = time.monotonic()
            holder.release()
            thread.join(10.0)
            assert acquired, "the waiter did not get the lock"
            gaps.append(acquired[0] - released)
    return gaps


def test_a_hand_off_does_not_wait_for_hung_servers(
    redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    """The waiter that got the lock leaves the queues it is still in, but not those of
    servers known hung: a hand-off then takes milliseconds, as with all servers up."""
    gaps = handoffs_while_two_hang(redlock_clients, redlock_servers)
    assert max(gaps[-2:]) < 0.5 * SERVER_TIMEOUT, gaps


def test_twin_leaving_the_hung_servers_queues_costs_each_hand_off_a_deadline(
    redlock_clients: list[Any], redlock_servers: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_redlock, "hung", lambda backend: False)  # leave waits for them
    gaps = handoffs_while_two_hang(redlock_clients, redlock_servers)
    assert min(gaps[-2:]) >= 0.9 * SERVER_TIMEOUT, gaps  # fails the check above


def first_and_next_acquire_with_two_hung(
    clients: list[Any], servers: list[RedisServer]
) -> tuple[float, float]:
    """Seconds a fresh process' first acquire took, and its next one, when servers HUNG hang
    from the start (never identified: its first contact with them is the first acquire)."""
    lock = redlease.Redlock(clients, "fresh", ttl=10.0, server_timeout=SERVER_TIMEOUT)
    assert lock.acquire(blocking=False)  # an old name: every server has its fence counter
    lock.release()
    took = []
    with hanging(servers):
        fresh = [server.client() for server in servers]  # nothing connected yet
        try:
            lock = redlease.Redlock(fresh, "fresh", ttl=10.0, server_timeout=SERVER_TIMEOUT)
            for _ in range(2):
                start = time.monotonic()
                assert lock.acquire(blocking=False)
                took.append(time.monotonic() - start)
                lock.release()
        finally:
            for client in fresh:
                client.close()
    return took[0], took[1]


CONNECT = max(SERVER_TIMEOUT, 1.0)  # a first connection's own timeout (handshake included)


def test_a_fresh_process_meets_hung_servers_once_and_in_parallel(
    redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    """Its servers are identified (one server given twice is refused) in parallel, and a
    server that did not answer is identified once it answers a round again: not before each
    acquire, at a deadline each while it hangs."""
    first, following = first_and_next_acquire_with_two_hung(redlock_clients, redlock_servers)
    assert first < 1.5 * CONNECT, first
    assert following < 0.5 * SERVER_TIMEOUT, following


def test_twin_identifying_in_turn_before_every_acquire(
    redlock_clients: list[Any], redlock_servers: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above catch identification one server at a time (each hung one's
    handshake waited out in turn), asked again before every acquire."""
    monkeypatch.setattr(sync_servers, "hung", lambda backend: False)
    monkeypatch.setattr(
        FanOut, "gather", staticmethod(lambda fn, items: [_outcome(fn, item) for item in items])
    )
    first, following = first_and_next_acquire_with_two_hung(redlock_clients, redlock_servers)
    assert first >= len(HUNG) * CONNECT * 0.9, first  # fails the first check
    assert following >= len(HUNG) * SERVER_TIMEOUT * 0.9, following  # and the second


def _outcome(fn: Any, item: Any) -> Any:
    try:
        return fn(item)
    except Exception as exc:
        return exc


def scripts_run(server: RedisServer) -> int:
    stats = server.client(decode_responses=True).info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def asked_again_after_one_late_reply(clients: list[Any], servers: list[RedisServer]) -> int:
    """Server 4 hangs past LATE once, then is healthy: scripts it ran over 3 s of rounds after
    that."""
    lock = redlease.Redlock(clients, "probed", ttl=10.0, server_timeout=SERVER_TIMEOUT)
    assert lock.acquire(blocking=False)
    lock.release()
    servers[4].pause()  # hangs for longer than LATE (a fork, a slow script), then is back
    try:
        assert lock.acquire(blocking=False)  # server 4 late: known not to answer
        lock.release()
        time.sleep(LATE + 0.2)
        assert lock.acquire(blocking=False)  # its late calls' connection is closed
        lock.release()
    finally:
        servers[4].resume()
    before = scripts_run(servers[4])
    end = time.monotonic() + 3.0  # bounded: about 60 rounds
    while time.monotonic() < end:
        assert lock.acquire(blocking=False)
        lock.release()
        time.sleep(0.05)
    return scripts_run(servers[4]) - before


def test_a_server_late_once_is_asked_again(
    redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    assert asked_again_after_one_late_reply(redlock_clients, redlock_servers) > 10


def test_twin_without_probes_a_server_late_once_is_left_out_for_good(
    redlock_clients: list[Any], redlock_servers: list[RedisServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its queue and lock keys would go stale while the others carry on: in a contended run,
    the servers' queues drift apart and reservations split (seen: 5 acquisitions/s, starved
    processes)."""
    monkeypatch.setattr(Backend, "probe", lambda self: False)
    assert asked_again_after_one_late_reply(redlock_clients, redlock_servers) == 0
