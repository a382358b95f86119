"""A stateful model of the Once scripts (``lua/once_*.lua``), on a real server.

Hypothesis interleaves start, finish, fail and renew of runs, an operator's force release
(of whichever run keeps the name, or of the one a token names), the end of a run's lease or
of a success's period (its ``until`` moved into the past, as if its time had run out) and
lost replies (the script ran; the caller never read the reply). A small pure model predicts
every reply. Checked at every step: at most one run is in progress and it is the server's;
a success keeps the name until its period ends; every fence is larger than all before;
finish, fail and renew of a run that is over (or was released) change nothing and say so.
The twins run the same machine on a finish, and on a force release, that do not compare the
token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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

from redlease._core.once import FAIL, FINISH, FORCE_RELEASE, RENEW, START, OnceKeys
from redlease._core.scripts import Script
from tests.lua.model_support import LOST, MODEL_SETTINGS, TWIN_SETTINGS, Runner, variant

pytestmark = pytest.mark.timeout(120)
KEYS = OnceKeys.build("model", b"once")
LEASE = EVERY = 60_000  # ms: nothing runs out but what a step lets run out
ACTORS = 3
Rule = Callable[..., None]
IDLE, RUNNING, UNKNOWN = "idle", "running", "unknown"


@dataclass
class Actor:
    state: str = IDLE
    token: bytes = b""


@dataclass
class Model:
    """The run hash as the scripts should leave it: its state, token, and whether its
    ``until`` is still ahead (a live run, or a success within its period)."""

    state: bytes | None = None
    token: bytes = b""
    live: bool = False

    def running(self, token: bytes) -> bool:
        return self.state == b"running" and self.live and self.token == token


def some(*states: str) -> Callable[[Rule], Rule]:
    """A rule's precondition: some actor is in one of ``states``."""
    found: Callable[[Rule], Rule] = precondition(
        lambda self: any(a.state in states for a in self.actors)
    )
    return found


class OnceMachine(RuleBasedStateMachine):
    client: redis.Redis
    finish_script: Script = FINISH
    force_script: Script = FORCE_RELEASE

    def __init__(self) -> None:
        super().__init__()
        self.run = Runner(self.client)
        self.client.delete(*KEYS.in_order())
        self.model = Model()
        self.actors = [Actor() for _ in range(ACTORS)]
        self.fence = 0
        self.dead: list[bytes] = []
        self.issued = 0

    def _pick(self, data: st.DataObject, *states: str) -> Actor:
        return data.draw(st.sampled_from([a for a in self.actors if a.state in states]))

    @some(IDLE)
    @rule(data=st.data(), lost=LOST)
    def start(self, data: st.DataObject, lost: bool) -> None:
        actor = self._pick(data, IDLE)
        self.issued += 1
        actor.token = b"p%d.%d" % (self.actors.index(actor), self.issued)
        args = [actor.token, LEASE, EVERY, b"host", 1]
        reply = [int(x) for x in self.run(START, KEYS.in_order(), args)]
        m = self.model
        expected = 1
        if m.live and m.state == b"running":
            expected = 0
        elif m.live and m.state == b"done":
            expected = 2
        if expected == 1:
            assert reply[1] > self.fence, (reply, self.fence)
            self.fence = reply[1]
            self.model = Model(b"running", actor.token, True)
        if lost:
            actor.state = UNKNOWN
            return
        assert reply[0] == expected, (reply, expected, m)
        actor.state = RUNNING if expected == 1 else IDLE
        if expected != 1:
            self.dead.append(actor.token)

    @some(RUNNING, UNKNOWN)
    @rule(data=st.data(), ok=st.booleans())
    def end(self, data: st.DataObject, ok: bool) -> None:
        """The run succeeds (finish) or fails; one whose start was not heard ends all the
        same (it may not have started: then its end is refused)."""
        actor = self._pick(data, RUNNING, UNKNOWN)
        self._end(actor.token, ok)
        actor.state = IDLE
        self.dead.append(actor.token)

    def _end(self, token: bytes, ok: bool) -> bool:
        """Run finish (``ok``) or fail; the model's answer, checked against the reply."""
        script = self.finish_script if ok else FAIL
        replied = int(self.run(script, [KEYS.run], [token])[0])
        mine = self.model.running(token)
        if mine:
            self.model = Model(b"done" if ok else b"failed", token, ok)
        assert replied == mine, (replied, token, self.model)
        return mine

    @some(RUNNING)
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        assert self._renew(self._pick(data, RUNNING).token) == 1

    def _renew(self, token: bytes) -> int:
        return int(self.run(RENEW, [KEYS.run], [token, LEASE])[0])

    @precondition(lambda self: self.dead)
    @rule(data=st.data(), op=st.sampled_from(["finish", "fail", "renew"]))
    def stale(self, data: st.DataObject, op: str) -> None:
        """A run that is over (or never started) is refused by every script."""
        token = data.draw(st.sampled_from(self.dead))
        before = self.client.hgetall(KEYS.run)
        if op == "renew":
            assert self._renew(token) == 0
        else:
            assert self._end(token, op == "finish") is False
        assert self.client.hgetall(KEYS.run) == before

    @precondition(lambda self: self.model.live)
    @rule()
    def expire(self) -> None:
        """The run's lease, or the success's period, runs out; nobody is told."""
        self.client.hset(KEYS.run, b"until", 1)
        self.model.live = False
        self._over(self.model.token)

    def _over(self, token: bytes) -> None:
        """The run ``token`` is over, without its actor being told."""
        for actor in self.actors:
            if actor.state == RUNNING and actor.token == token:
                actor.state = IDLE
                self.dead.append(actor.token)

    @rule(data=st.data(), named=st.booleans())
    def force(self, data: st.DataObject, named: bool) -> None:
        """An operator's force release: of whichever run keeps the name, or of the run a
        token names (any token seen: the live run's, or one that is over)."""
        seen = [a.token for a in self.actors if a.token] + self.dead
        token = data.draw(st.sampled_from(seen)) if named and seen else b""
        reply = self.run(self.force_script, KEYS.in_order(), [token])
        m = self.model
        kept = m.live and m.state in (b"running", b"done") and token in (b"", m.token)
        assert (reply[0], reply[1]) == ((m.token, m.state) if kept else (b"", b"")), (reply, m)
        if not kept:
            assert int(reply[3]) == self.fence, (reply, self.fence)  # nothing changed
            return
        assert int(reply[3]) > self.fence, (reply, self.fence)  # the fence moved on
        self.fence = int(reply[3])
        self.model = Model(b"released", m.token, False)
        self._over(m.token)

    @invariant()
    def one_run_and_it_is_the_servers(self) -> None:
        running = [a.token for a in self.actors if a.state == RUNNING]
        assert len(running) <= 1, running
        state, token = self.client.hmget(KEYS.run, [b"state", b"token"])
        assert (state, token or b"") == (self.model.state, self.model.token), self.model
        if running:
            assert self.model.running(running[0])


class TokenBlindFinish(OnceMachine):
    """once_finish.lua recording whoever's run as a success."""

    finish_script = variant(
        FINISH,
        "if not ours(key) or not running(key, ARGV[1], now) then",
        "if not ours(key) then",
    )


class TokenBlindForce(OnceMachine):
    """once_force_release.lua releasing whichever run keeps the name, whatever token it is
    given: an operator's --token of a run that is over would evict the next one."""

    force_script = variant(
        FORCE_RELEASE,
        "if not kept or (ARGV[1] ~= '' and string.sub(run[2], 1, #ARGV[1]) ~= ARGV[1]) then",
        "if not kept then",
    )


def run_machine(client: redis.Redis, machine: type[OnceMachine], settings: Any) -> None:
    machine.client = client
    run_state_machine_as_test(machine, settings=settings)


def test_the_once_scripts_follow_the_model(client: redis.Redis) -> None:
    run_machine(client, OnceMachine, MODEL_SETTINGS)


def test_twin_a_finish_that_ignores_the_token_is_caught(client: redis.Redis) -> None:
    with pytest.raises(AssertionError):
        run_machine(client, TokenBlindFinish, TWIN_SETTINGS)


def test_twin_a_force_release_that_ignores_the_token_is_caught(client: redis.Redis) -> None:
    with pytest.raises(AssertionError):
        run_machine(client, TokenBlindForce, TWIN_SETTINGS)
