"""Fixtures of the Lua script tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

CHANNELS = b"redlease:waiters:"
"""The waiters' channel prefix the script tests pass (a process' channel: prefix + its id)."""


@pytest.fixture
def listen(client: redis.Redis) -> Iterator[Any]:
    """Subscribe to the channels of the given process ids; returns a function reading them."""
    pubsub = client.pubsub()

    def start(*processes: bytes) -> Any:
        pubsub.subscribe(*[CHANNELS + p for p in processes])
        for _ in range(50):  # bounded: the confirmations
            message = pubsub.get_message(timeout=0.1)
            if message and message["type"] == "subscribe" and message["data"] == len(processes):
                break

        def messages() -> list[bytes]:
            found = []
            for _ in range(5):  # bounded: what the scripts just published
                message = pubsub.get_message(timeout=0.05)
                if message and message["type"] == "message":
                    found.append(message["data"])
            return found

        return messages

    yield start
    pubsub.close()
