"""What the stateful model tests share: running a script by SHA, expiry, listening processes."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from redlease._core.scripts import Script
from tests.lua.conftest import CHANNELS

MODEL_SETTINGS = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
"""A bounded run of one machine: a second or two on a loaded 2-core machine."""

TWIN_SETTINGS = settings(MODEL_SETTINGS, max_examples=300, phases=[Phase.generate])
"""A twin's run: long enough to find the planted bug, which stops it (no shrinking)."""


LOST = st.sampled_from([False, False, False, True])
"""Whether a step's reply is lost (the script ran; its caller never reads the reply)."""


def variant(script: Script, old: str, new: str) -> Script:
    """A broken copy of ``script``: ``old`` replaced by ``new`` (once), under its own SHA."""
    assert script.source.count(old) == 1, f"{old!r} not found once in {script.name}"
    source = script.source.replace(old, new)
    return Script(name=script.name + "_broken", source=source, sha="")


class Runner:
    """Runs scripts on ``client`` by EVALSHA (each loaded once, under the server's SHA)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._shas: dict[str, str] = {}

    def __call__(self, script: Script, keys: Sequence[bytes], args: Sequence[Any]) -> Any:
        sha = self._shas.get(script.source)
        if sha is None:
            sha = self._shas[script.source] = str(self.client.script_load(script.source))
        return self.client.evalsha(sha, len(keys), *keys, *args)


def expire_now(client: redis.Redis, key: bytes) -> None:
    """Let ``key``'s lease run out on the server's own clock: 1 ms left, then wait for it."""
    client.pexpire(key, 1)
    for _ in range(200):  # bounded: the server's clock moves on its own
        time.sleep(0.002)
        if not client.exists(key):
            return
    raise AssertionError(f"{key!r} did not expire")


@contextmanager
def listening(client: redis.Redis, processes: Sequence[bytes]) -> Iterator[Any]:
    """Subscribe to the channels of ``processes`` (so that grants go to them); yields a
    function draining what was published."""
    pubsub = client.pubsub()
    pubsub.subscribe(*[CHANNELS + p for p in processes])
    for _ in range(50):  # bounded: the confirmations
        message = pubsub.get_message(timeout=0.1)
        if message and message["type"] == "subscribe" and message["data"] == len(processes):
            break

    def drain() -> None:
        for _ in range(10_000):  # bounded: what the scripts published
            if pubsub.get_message(timeout=0) is None:
                return

    try:
        yield drain
    finally:
        pubsub.close()
