"""How the lock scripts tell a waiter: PUBLISH on one server, SPUBLISH when the channel prefix
carries the lock's hash tag (a Cluster; ``lua/common_lib.lua`` ``tell()``)."""

from __future__ import annotations

import pytest
import redis

from redlease._core.lock import ACQUIRE_RESERVING, RELEASE, LockKeys
from tests.support import needs_server

KEYS = LockKeys.build("redlease", b"told")


def _calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0))


@pytest.mark.parametrize(
    ("channels", "command", "other"),
    [
        (b"redlease:waiters:", "publish", "spublish"),  # one server: any version has PUBLISH
        pytest.param(  # a Cluster: in the lock's slot
            b"redlease:waiters:{told}:",
            "spublish",
            "publish",
            marks=needs_server((7, 0), "SPUBLISH"),
        ),
    ],
)
def test_a_release_tells_the_queue_head_with_the_right_command(
    client: redis.Redis, channels: bytes, command: str, other: str
) -> None:
    lock_keys = [KEYS.lock, KEYS.fence, KEYS.queue, KEYS.handoff]
    acquire = [10_000, 1, 50, channels, b"", b"1"]
    assert client.eval(ACQUIRE_RESERVING.source, 4, *lock_keys, b"p1.a", *acquire)[0] == 1
    assert client.eval(ACQUIRE_RESERVING.source, 4, *lock_keys, b"p2.b", *acquire)[0] == 0
    listener = client.pubsub()
    if command == "spublish":
        listener.ssubscribe(channels + b"p2")
    else:
        listener.subscribe(channels + b"p2")
    before, before_other = _calls(client, command), _calls(client, other)
    assert client.eval(RELEASE.source, 4, *lock_keys, b"p1.a", 50, channels) == 1
    assert _calls(client, command) == before + 1  # one message, to the head's process only
    assert _calls(client, other) == before_other
    messages = []
    for _ in range(20):  # bounded: the subscription's confirmation, then our message
        message = listener.get_message(timeout=0.1)
        if message is not None and message["type"] in ("message", "smessage"):
            messages.append(message["data"])
            break
    assert messages == [b"Hp2.b 50"]
    listener.close()
