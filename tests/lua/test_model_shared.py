"""A stateful model of the shared scripts (``Semaphore``, ``ReadWriteLock``), on a real server.

Hypothesis interleaves acquire (joining the queue or not), retry, release, renew, leave,
expiry of a holder's lease (its score moved into the past, as if its time had run out) and
lost replies (the script ran, the caller undoes it with leave and release, as the shell
does). A small pure model predicts every reply and the server's holders, queue and
reservations. Checked at every step: the holders' units never pass the capacity (at most
``permits`` holders; one writer or any readers); every fence is larger than all issued
before; every queued waiter that fits (in FIFO order) is reserved, that is woken; renew and
release with a released or expired token change nothing and say so. The twins run the same
machines on an acquire that ignores the capacity, and on a release that wakes no waiter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from redlease._core.scripts import Script
from redlease._core.shared import ACQUIRE, EVERYTHING, LEAVE, RELEASE, RENEW, SharedKeys
from tests.lua.conftest import CHANNELS
from tests.lua.model_support import LOST, MODEL_SETTINGS, TWIN_SETTINGS, Runner, variant

pytestmark = pytest.mark.timeout(120)
LEASE = WINDOW = 60_000  # ms: nothing runs out but what a step lets run out
ACTORS = 4
Rule = Callable[..., None]
IDLE, WAITING, HOLDING, UNKNOWN = "idle", "waiting", "holding", "unknown"


@dataclass
class Actor:
    """One caller: what it knows (``state``), its token and the units it asks for."""

    state: str = IDLE
    token: bytes = b""
    want: int = 1


@dataclass
class Model:
    """The server's state as the scripts should leave it."""

    holders: dict[bytes, int] = field(default_factory=dict)  # live token -> units
    queue: list[bytes] = field(default_factory=list)  # FIFO
    wants: dict[bytes, int] = field(default_factory=dict)  # queued token -> units
    reserved: set[bytes] = field(default_factory=set)  # queued tokens woken to take theirs

    def walk(self, cap: int, me: bytes | None) -> tuple[bool, int, bool, bytes | None]:
        """shared_lib's walk: reserve every queued waiter that fits, in order."""
        n, mine = sum(self.holders.values()), False
        for t in self.queue:
            if n + self.wants[t] > cap:
                self.reserved.discard(t)
                return mine, n, False, t
            n += self.wants[t]
            if t == me:
                mine = True
            else:
                self.reserved.add(t)
        return mine, n, True, None

    def dequeue(self, token: bytes) -> bool:
        self.reserved.discard(token)
        self.wants.pop(token, None)
        if token in self.queue:
            self.queue.remove(token)
            return True
        return False


def some(*states: str) -> Callable[[Rule], Rule]:
    """A rule's precondition: some actor is in one of ``states``."""
    found: Callable[[Rule], Rule] = precondition(
        lambda self: any(a.state in states for a in self.actors)
    )
    return found


class SharedMachine(RuleBasedStateMachine):
    client: redis.Redis
    kind = "semaphore"
    stored = 1  # the Semaphore stores its permits; the ReadWriteLock passes its capacity
    acquire_script: Script = ACQUIRE
    release_script: Script = RELEASE

    def __init__(self) -> None:
        super().__init__()
        self.run = Runner(self.client)
        self.keys = SharedKeys.build("model", b"shared", self.kind)
        self.client.delete(*self.keys.in_order())
        self.model = Model()
        self.actors = [Actor() for _ in range(ACTORS)]
        self.cap = 1
        self.fence = 0
        self.dead: list[bytes] = []
        self.issued = 0
        self.purged = True  # False after an expiry, until a script walks the queue again

    def wants(self) -> st.SearchStrategy[int]:
        return st.just(1)

    @initialize(permits=st.integers(1, 3))
    def capacity(self, permits: int) -> None:
        self.cap = permits

    # The scripts, with the ARGV the shell sends.
    def _queue_args(self, token: bytes) -> list[Any]:
        return [token, WINDOW, CHANNELS, self.cap, self.stored]

    def _pick(self, data: st.DataObject, *states: str) -> Actor:
        fits = [a for a in self.actors if a.state in states]
        return data.draw(st.sampled_from(fits))

    def _new_fence(self, fence: int) -> None:
        assert fence > self.fence, f"fence {fence} after {self.fence}"
        self.fence = fence

    # The rules.
    @some(IDLE)
    @rule(data=st.data(), join=st.booleans(), lost=LOST)
    def acquire(self, data: st.DataObject, join: bool, lost: bool) -> None:
        actor = self._pick(data, IDLE)
        self.issued += 1
        actor.token = b"p%d.%d" % (self.actors.index(actor), self.issued)
        actor.want = data.draw(self.wants())
        self._attempt(actor, join, lost)

    @some(WAITING)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        self._attempt(self._pick(data, WAITING), True, False)

    def _attempt(self, actor: Actor, join: bool, lost: bool) -> None:
        m, token, want = self.model, actor.token, actor.want
        args = [token, LEASE, want, int(join), WINDOW, CHANNELS, self.cap, self.stored, b""]
        reply = [int(x) for x in self.run(self.acquire_script, self.keys.in_order(), args)]
        self.purged = True
        queued = token in m.queue
        mine, used, whole, blocked = m.walk(self.cap, token if queued else None)
        if mine or (not queued and whole and used + want <= self.cap):
            m.dequeue(token)
            m.holders[token] = want
            self._new_fence(int(self.client.get(self.keys.fence) or 0))
            expected = 1
        else:
            if join and not queued:
                m.queue.append(token)
                m.wants[token] = want
            checker = blocked == token or (whole and not queued)
            expected = 2 if checker and m.reserved else 0
        if self.stored:
            assert reply[2:] == [self.cap], reply
        if lost:
            actor.state = UNKNOWN
            return
        assert reply[0] == expected, (reply, expected, token, m)
        if expected == 1:
            assert reply[1] == self.fence
            actor.state = HOLDING
        elif join:
            actor.state = WAITING
        else:
            actor.state = IDLE
            self.dead.append(token)

    @some(WAITING, HOLDING, UNKNOWN)
    @rule(data=st.data(), lost=LOST)
    def release(self, data: st.DataObject, lost: bool) -> None:
        self._release(self._pick(data, WAITING, HOLDING, UNKNOWN), lost)

    def _release(self, actor: Actor, lost: bool) -> None:
        """A holder releases; a waiter leaves; an unknown attempt is undone by both."""
        token = actor.token
        if actor.state in (WAITING, UNKNOWN):
            left = int(self.run(LEAVE, self.keys.in_order(), self._queue_args(token)))
            queued = self.model.dequeue(token)
            assert lost or left == queued, (left, token, self.model)
            self.model.walk(self.cap, None)
        if actor.state in (HOLDING, UNKNOWN):
            args = self._queue_args(token)
            released = int(self.run(self.release_script, self.keys.in_order(), args))
            held = self.model.holders.pop(token, None) is not None
            assert lost or released == held, (released, token, self.model)
            self.model.walk(self.cap, None)
        self.purged = True
        actor.state = IDLE
        self.dead.append(token)

    @some(HOLDING)
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        assert self._renew(self._pick(data, HOLDING).token) == 1

    def _renew(self, token: bytes) -> int:
        return int(self.run(RENEW, [self.keys.holders], [token, LEASE])[0])

    @precondition(lambda self: self.dead)
    @rule(data=st.data(), release=st.booleans())
    def stale(self, data: st.DataObject, release: bool) -> None:
        """A released, expired or abandoned token is refused, and changes nothing."""
        token = data.draw(st.sampled_from(self.dead))
        if release:
            args = self._queue_args(token)
            assert int(self.run(self.release_script, self.keys.in_order(), args)) == 0
            self.model.walk(self.cap, None)  # a release walks the queue all the same
            self.purged = True
        else:
            assert self._renew(token) == 0

    @precondition(lambda self: self.model.holders)
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        """A holder's lease runs out (its end moved into the past); nobody is told."""
        token = data.draw(st.sampled_from(sorted(self.model.holders)))
        self.client.zadd(self.keys.holders, {token: 1}, xx=True)
        del self.model.holders[token]
        self.purged = False
        for actor in self.actors:
            if actor.token == token and actor.state == HOLDING:
                actor.state = IDLE
                self.dead.append(token)

    # The checks, after every step.
    @invariant()
    def within_capacity(self) -> None:
        assert sum(self.model.holders.values()) <= self.cap, self.model
        holding = {a.token for a in self.actors if a.state == HOLDING}
        assert holding <= set(self.model.holders), (holding, self.model)

    @invariant()
    def the_server_agrees(self) -> None:
        live = self.client.zrangebyscore(self.keys.holders, 2, "+inf")
        assert set(live) == set(self.model.holders), (live, self.model)
        assert self.client.zrange(self.keys.queue, 0, -1) == self.model.queue
        assert set(self.client.zrange(self.keys.granted, 0, -1)) == self.model.reserved

    @invariant()
    def every_waiter_that_fits_is_woken(self) -> None:
        if not self.purged:
            return  # nobody looked since a lease ran out: the next script does
        n = sum(self.model.holders.values())
        for t in self.model.queue:
            n += self.model.wants[t]
            if n > self.cap:
                break
            assert t in self.model.reserved, (t, self.model)

    def teardown(self) -> None:
        """Everyone gives up: no holder, no waiter, no reservation is left."""
        for actor in self.actors:
            if actor.state != IDLE:
                self._release(actor, False)
        for key in (self.keys.queue, self.keys.granted):
            assert not self.client.exists(key)
        assert not self.client.zrangebyscore(self.keys.holders, 2, "+inf")
        self.client.delete(*self.keys.in_order())


class RWLockMachine(SharedMachine):
    """The ReadWriteLock: a reader asks one unit, a writer all of them."""

    kind, stored = "rwlock", 0

    def wants(self) -> st.SearchStrategy[int]:
        return st.sampled_from([1, EVERYTHING])

    @initialize()
    def capacity(self) -> None:
        self.cap = EVERYTHING


class WeightedSemaphore(SharedMachine):
    """The Semaphore, weighted: ``acquire(permits=n)`` asks n units, 1 to the cap (a plain
    ``acquire()`` is n = 1, drawn as well: one machine checks both, within the CI budget)."""

    def wants(self) -> st.SearchStrategy[int]:
        return st.integers(1, self.cap)

    @initialize(permits=st.integers(1, 5))
    def capacity(self, permits: int) -> None:
        self.cap = permits


WEIGHTLESS = variant(ACQUIRE, "used + want <= cap", "used + 1 <= cap")
"""shared_acquire.lua granting a newcomer when one unit is free, whatever its weight."""


class WeightlessSemaphore(WeightedSemaphore):
    acquire_script = WEIGHTLESS


BLIND = variant(
    ACQUIRE,
    "if mine or (not queued and whole and used + want <= cap) then",
    "if mine or not queued then",
)
"""shared_acquire.lua granting anyone not queued, whatever the units left."""


class BlindSemaphore(SharedMachine):
    acquire_script = BLIND


class BlindRWLock(RWLockMachine):
    acquire_script = BLIND


SILENT = variant(
    RELEASE, "walk(S, capacity(S, tonumber(ARGV[4]), ARGV[5] == '1'), now, window, nil)", ""
)
"""shared_release.lua that frees the units and wakes no waiter."""


class SilentSemaphore(SharedMachine):
    release_script = SILENT


class SilentRWLock(RWLockMachine):
    release_script = SILENT


def run_machine(client: redis.Redis, machine: type[SharedMachine], settings: Any) -> None:
    machine.client = client
    run_state_machine_as_test(machine, settings=settings)


@pytest.mark.parametrize(
    "machine",
    [WeightedSemaphore, RWLockMachine],
    ids=["semaphore", "rwlock"],
)
def test_the_shared_scripts_follow_the_model(
    client: redis.Redis, machine: type[SharedMachine]
) -> None:
    run_machine(client, machine, MODEL_SETTINGS)


@pytest.mark.parametrize(
    "machine",
    [BlindSemaphore, WeightlessSemaphore, BlindRWLock],
    ids=["semaphore", "weightless", "rwlock"],
)
def test_twin_an_acquire_that_ignores_the_capacity_is_caught(
    client: redis.Redis, machine: type[SharedMachine]
) -> None:
    with pytest.raises(AssertionError):
        run_machine(client, machine, TWIN_SETTINGS)


@pytest.mark.parametrize("machine", [SilentSemaphore, SilentRWLock], ids=["semaphore", "rwlock"])
def test_twin_a_release_that_wakes_no_waiter_is_caught(
    client: redis.Redis, machine: type[SharedMachine]
) -> None:
    with pytest.raises(AssertionError):
        run_machine(client, machine, TWIN_SETTINGS)
