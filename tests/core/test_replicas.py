"""The WAIT / WAITAOF command and its reply (``_core/replicas.py``), without Redis."""

from __future__ import annotations

import pytest

from redlease._core.replicas import Ack, decode_ack, wait_command


def test_wait_command_never_blocks_forever() -> None:
    assert wait_command(2, 500, aof=False) == ("WAIT", 2, 500)
    assert wait_command(1, 1, aof=True) == ("WAITAOF", 1, 1, 1)
    with pytest.raises(ValueError, match="WAIT 0 blocks forever"):
        wait_command(1, 0, aof=False)


def test_acks_are_decoded_and_judged() -> None:
    assert decode_ack(2, aof=False) == Ack(2)
    assert decode_ack([1, 0], aof=True) == Ack(0, local=True)
    assert Ack(2).enough(2) and not Ack(1).enough(2)
    assert not Ack(3, local=False).enough(1)  # the master did not fsync: not enough
    assert Ack(1, local=True).enough(1)
    for bad, aof in (([1, 2], False), (b"x", False), (3, True), ([1], True)):
        with pytest.raises(ValueError, match="unexpected reply from WAIT"):
            decode_ack(bad, aof=aof)
