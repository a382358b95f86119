"""The hand-over token (``_core/handover.py``): a JSON-safe str, refused unless well formed."""

from __future__ import annotations

import base64
import json

import pytest

from redlease._core import handover
from redlease._core.handover import Handover


def _token(fields: object) -> str:
    body = json.dumps(fields).encode()
    return handover.PREFIX + base64.urlsafe_b64encode(body).rstrip(b"=").decode()


GOOD = {
    "kind": "lock",
    "prefix": "app",
    "name": "orders:42",
    "token": "abc.def",
    "fence": 7,
    "ttl_ms": 5000,
    "fair": False,
    "handoff_ms": 250,
}


@pytest.mark.parametrize("name", ["orders:42", "ünïcode", b"\xff\x00raw"])
def test_a_token_round_trips(name: str | bytes) -> None:
    sent = Handover("lock", "app", name, b"0a1b2c.3d4e", 12, 30_000, fair=False, handoff_ms=100)
    token = handover.encode(sent)
    assert isinstance(token, str) and token.isascii() and json.loads(json.dumps(token)) == token
    assert handover.decode(token, "lock") == sent


def test_the_well_formed_fields_decode() -> None:
    assert handover.decode(_token(GOOD), "lock").fence == 7


@pytest.mark.parametrize(
    "change",
    [
        {"fence": "7"},
        {"fence": True},
        {"fence": -1},
        {"ttl_ms": 0},
        {"fair": 1},
        {"token": "ünï"},
        {"name": None},
        {"handoff_ms": 1.5},
    ],
)
def test_a_field_of_the_wrong_kind_is_malformed(change: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="token is malformed"):
        handover.decode(_token({**GOOD, **change}), "lock")


@pytest.mark.parametrize("missing", sorted(GOOD))
def test_a_missing_field_is_malformed(missing: str) -> None:
    fields = {k: v for k, v in GOOD.items() if k != missing}
    with pytest.raises(ValueError, match="token is malformed"):
        handover.decode(_token(fields), "lock")


def test_not_json_and_not_an_object_are_malformed() -> None:
    for token in (handover.PREFIX + "bm90IGpzb24", _token([1, 2])):
        with pytest.raises(ValueError, match="token is malformed"):
            handover.decode(token, "lock")


def test_another_kind_of_lease_is_named() -> None:
    with pytest.raises(ValueError, match="token holds a Redlock's lease, not a Lock or RLock's"):
        handover.decode(_token({**GOOD, "kind": "redlock"}), "lock")
