"""A stateful model of the lock's scripts (``Lock``: fair "G" and barging "B"), on a real server.

Hypothesis interleaves acquire (joining the queue or not), retry, claim, release, renew,
extend, leave, expiry of the lease (1 ms left, on the server's clock) and lost replies (a
script that ran but whose reply the caller never read, undone later by leave, as the shell
does). A small pure model predicts every reply and the server's state after each step:
the lock's holder, the FIFO queue. Checked at every step: at most one caller holds the lock
and it is the server's holder; every fence is larger than all issued before; a release or
leave with waiters queued grants the lock to the first of them (fair; every process
listens) or wakes it (barging); renew, extend, claim and release with a released or expired
token change nothing and say so. The twins run the same machines on a release that does
not compare the token, and on one that tells no waiter.
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
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from redlease._core.lock import ACQUIRE, CLAIM, EXTEND, LEAVE, RELEASE, RENEW, LockKeys
from redlease._core.scripts import Script
from tests.lua.conftest import CHANNELS
from tests.lua.model_support import (
    LOST,
    MODEL_SETTINGS,
    TWIN_SETTINGS,
    Runner,
    expire_now,
    listening,
    variant,
)

pytestmark = pytest.mark.timeout(120)
KEYS = LockKeys.build("model", b"lock")
LEASE = WINDOW = 60_000  # ms: nothing runs out but what a step lets run out
ACTORS = 3
PROCESSES = [b"p%d" % i for i in range(ACTORS)]
Rule = Callable[..., None]
IDLE, WAITING, HOLDING, UNKNOWN = "idle", "waiting", "holding", "unknown"


@dataclass
class Actor:
    """One caller: what it knows (``state``) and its current token."""

    state: str = IDLE
    token: bytes = b""


@dataclass
class Model:
    """The server's state as the scripts should leave it."""

    owner: bytes | None = None  # the token in the lock key
    queue: list[bytes] = field(default_factory=list)  # FIFO


def some(*states: str) -> Callable[[Rule], Rule]:
    """A rule's precondition: some actor is in one of ``states``."""
    found: Callable[[Rule], Rule] = precondition(
        lambda self: any(a.state in states for a in self.actors)
    )
    return found


class LockMachine(RuleBasedStateMachine):
    client: redis.Redis
    release_script: Script = RELEASE
    mode = b"G"

    def __init__(self) -> None:
        super().__init__()
        self.run = Runner(self.client)
        self.client.delete(*KEYS.in_order())
        self.model = Model()
        self.actors = [Actor() for _ in range(ACTORS)]
        self.fence = 0  # the last fence issued
        self.dead: list[bytes] = []  # tokens released, expired or given up
        self.issued = 0

    # The scripts, with the ARGV the Lock shell sends (its mode; a barging head's turn is
    # longer than any run, so a barging release only ever wakes the head).
    def _acquire(self, token: bytes, join: bool) -> list[int]:
        args = [token, LEASE, int(join), WINDOW, CHANNELS]
        return [int(x) for x in self.run(ACQUIRE[self.mode], KEYS.in_order(), args)]

    def _pass(self, script: Script, token: bytes) -> int:
        keys = KEYS.in_order()
        args = [token, WINDOW, CHANNELS, self.mode, LEASE, b"1", 0]
        if script is not LEAVE:  # release.lua: no requeue; a head granted within the window
            args += [b"", LEASE]  # gets the releaser's lease (here the window itself)
        return int(self.run(script, keys, args))

    def _pass_on(self) -> None:
        """After the lock became free: fair, the head is granted it; barging, the head is
        woken and crowned (its turn at the head starts), the lock stays free."""
        if self.mode == b"G":
            self._grant_head()
        elif self.model.queue:
            record = self.client.get(KEYS.handoff) or b""
            assert isinstance(record, bytes) and record.startswith(self.model.queue[0] + b" "), (
                record,
                self.model,
            )

    def _new_fence(self, fence: int) -> None:
        assert fence > self.fence, f"fence {fence} after {self.fence}"
        self.fence = fence

    def _grant_head(self) -> None:
        """The model of lock_lib's grant: the head (all listen) gets the lock, a new fence."""
        if self.model.queue:
            self.model.owner = self.model.queue.pop(0)
            owner = self.client.get(KEYS.lock)
            assert owner == self.model.owner, f"{self.model.owner!r} not granted: {owner!r}"
            self._new_fence(int(self.client.get(KEYS.fence) or 0))

    def _actor_of(self, token: bytes) -> Actor | None:
        return next((a for a in self.actors if a.token == token), None)

    # The rules.
    def _pick(self, data: st.DataObject, *states: str) -> int:
        """One of the actors in one of ``states`` (a precondition says there is one)."""
        fits = [i for i, a in enumerate(self.actors) if a.state in states]
        return data.draw(st.sampled_from(fits))

    @some(IDLE)
    @rule(data=st.data(), join=st.booleans(), lost=LOST)
    def acquire(self, data: st.DataObject, join: bool, lost: bool) -> None:
        i = self._pick(data, IDLE)
        actor = self.actors[i]
        self.issued += 1
        actor.token = PROCESSES[i] + b".%d" % self.issued
        self._attempt(actor, join, lost)

    @some(WAITING)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        self._attempt(self.actors[self._pick(data, WAITING)], True, False)

    def _attempt(self, actor: Actor, join: bool, lost: bool) -> None:
        m, token = self.model, actor.token
        head = m.queue[0] if m.queue else None
        fresh = regrant = False
        if m.owner == token:
            regrant = True  # granted, not heard: the next attempt claims it
        elif m.owner is None and (self.mode == b"B" or head in (None, token)):
            fresh = True  # barging: whoever comes while it is free takes it
        reply = self._acquire(token, join)
        if m.owner is None and not fresh and head not in (None, token):
            self._grant_head()
        if fresh:
            m.owner = token
            if token in m.queue:
                m.queue.remove(token)
        elif not regrant and join and token not in m.queue:
            m.queue.append(token)
        if lost:
            actor.state = UNKNOWN
            if fresh:
                self._new_fence(reply[1])
            return
        if fresh or regrant:
            assert reply[0] == 1, (reply, token, m)
            if fresh:
                self._new_fence(reply[1])
            else:
                assert reply[1] == self.fence, (reply, self.fence)
            actor.state = HOLDING
        else:
            assert reply[0] == 0, (reply, token, m)
            actor.state = WAITING if join else IDLE
            if not join:
                self.dead.append(token)

    @some(WAITING)
    @rule(data=st.data())
    def claim(self, data: st.DataObject) -> None:
        actor = self.actors[self._pick(data, WAITING)]
        claimed, _ = self.run(CLAIM, [KEYS.lock], [actor.token, LEASE])
        assert int(claimed) == (self.model.owner == actor.token)
        if claimed:
            actor.state = HOLDING

    @some(WAITING, HOLDING, UNKNOWN)
    @rule(data=st.data(), lost=LOST)
    def release(self, data: st.DataObject, lost: bool) -> None:
        self._release(self.actors[self._pick(data, WAITING, HOLDING, UNKNOWN)], lost)

    def _release(self, actor: Actor, lost: bool) -> None:
        leave = actor.state != HOLDING  # a waiter gives up; an unknown one undoes its attempt
        m, token = self.model, actor.token
        was_queued, was_owner = token in m.queue, m.owner == token
        replied = self._pass(LEAVE if leave else self.release_script, token)
        if was_queued:
            m.queue.remove(token)
        if was_owner:
            m.owner = None
            self._pass_on()
        elif self.mode == b"B" and leave and was_queued and m.owner is None:
            self._pass_on()  # a barging waiter that leaves a free lock wakes the next one
        if not lost:
            assert replied == int(was_owner or (leave and was_queued)), (replied, token, m)
        actor.state = IDLE
        self.dead.append(token)

    @some(HOLDING)
    @rule(data=st.data(), extend=st.booleans())
    def renew(self, data: st.DataObject, extend: bool) -> None:
        actor = self.actors[self._pick(data, HOLDING)]
        assert self._renew(actor.token, extend) == 1

    def _renew(self, token: bytes, extend: bool) -> int:
        if extend:
            return int(self.run(EXTEND, [KEYS.lock], [token, LEASE]))
        return int(self.run(RENEW, [KEYS.lock], [token, LEASE])[0])

    @precondition(lambda self: self.dead)
    @rule(data=st.data(), op=st.sampled_from(["renew", "extend", "claim", "release"]))
    def stale(self, data: st.DataObject, op: str) -> None:
        """A released, expired or abandoned token is refused by every script."""
        token = data.draw(st.sampled_from(self.dead))
        before = self.client.get(KEYS.lock)
        if op == "claim":
            assert int(self.run(CLAIM, [KEYS.lock], [token, LEASE])[0]) == 0
        elif op == "release":
            assert self._pass(self.release_script, token) == 0
        else:
            assert self._renew(token, op == "extend") == 0
        assert self.client.get(KEYS.lock) == before

    @precondition(lambda self: self.model.owner is not None)
    @rule()
    def expire(self) -> None:
        """The holder's (or an unclaimed grantee's) lease runs out; nobody is told."""
        expire_now(self.client, KEYS.lock)
        token, self.model.owner = self.model.owner, None
        actor = self._actor_of(token) if token else None
        if actor and actor.state == HOLDING:
            actor.state = IDLE
            self.dead.append(actor.token)

    # The checks, after every step.
    @invariant()
    def one_holder_and_it_is_the_servers(self) -> None:
        holding = [a.token for a in self.actors if a.state == HOLDING]
        assert len(holding) <= 1, holding
        owner = self.client.get(KEYS.lock)
        assert owner == self.model.owner, (owner, self.model)
        if holding:
            assert owner == holding[0]

    @invariant()
    def the_queue_is_the_models(self) -> None:
        assert self.client.zrange(KEYS.queue, 0, -1) == self.model.queue

    def teardown(self) -> None:
        """Everyone gives up: the queue empties, nobody holds the lock."""
        for actor in self.actors:
            if actor.state != IDLE:
                self._release(actor, False)
        assert not self.client.exists(KEYS.lock, KEYS.queue)
        self.client.delete(*KEYS.in_order())


def run_machine(client: redis.Redis, machine: type[LockMachine], settings: Any) -> None:
    machine.client = client
    with listening(client, PROCESSES) as drain:

        class Draining(machine):  # type: ignore[valid-type,misc]
            def teardown(self) -> None:
                super().teardown()
                drain()

        run_state_machine_as_test(Draining, settings=settings)


class BargingMachine(LockMachine):
    """The same machine in barging mode ("B": ``Lock(fair=False)``)."""

    mode = b"B"


@pytest.mark.parametrize("machine", [LockMachine, BargingMachine], ids=["fair", "barging"])
def test_the_lock_scripts_follow_the_model(client: redis.Redis, machine: type[LockMachine]) -> None:
    run_machine(client, machine, MODEL_SETTINGS)


class TokenBlindRelease(LockMachine):
    """release.lua without its one safety-critical line: it deletes whoever's lock."""

    release_script = variant(
        RELEASE,
        "if redis.call('GET', lock) ~= token then return 0 end",
        "if false then return 0 end",
    )


class TokenBlindBargingRelease(TokenBlindRelease):
    mode = b"B"


@pytest.mark.parametrize(
    "machine", [TokenBlindRelease, TokenBlindBargingRelease], ids=["fair", "barging"]
)
def test_twin_a_release_that_ignores_the_token_is_caught(
    client: redis.Redis, machine: type[LockMachine]
) -> None:
    with pytest.raises(AssertionError):
        run_machine(client, machine, TWIN_SETTINGS)


SILENT = variant(
    RELEASE,
    "pass_on(lock, fence, queue, handoff, channels, window, ARGV[4] or 'R', barge_ms, "
    "rotation_ms,\n        lease_ms)",
    "",
)
"""release.lua that frees the lock and tells no waiter: the queue waits for nothing."""


class SilentRelease(LockMachine):
    release_script = SILENT


class SilentBargingRelease(BargingMachine):
    release_script = SILENT


@pytest.mark.parametrize("machine", [SilentRelease, SilentBargingRelease], ids=["fair", "barging"])
def test_twin_a_release_that_tells_no_waiter_is_caught(
    client: redis.Redis, machine: type[LockMachine]
) -> None:
    with pytest.raises(AssertionError):
        run_machine(client, machine, TWIN_SETTINGS)
