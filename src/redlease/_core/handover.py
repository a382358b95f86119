"""The token that hands a held lease from one handle (or process) to another.

``lock.detach()`` returns it; ``Lock.adopt(client, token)`` takes the lease over. It is a plain
JSON-safe string: ``redlease1.`` and the base64url (unpadded) JSON of what the adopter needs to
rebuild the lock and its holding. Whoever has it can release the lock: it is a capability.

A token is adopted once (``lua/adopt.lua``): the adopter's fresh token replaces the detached
one in Redis, so a second adopter of the same token (a redelivered message) is refused while
the first holds the lease. The fence is read from the server, never from the token: the
``fence`` a token carries is informational only.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from ..errors import AlreadyAdopted, LockError, LockLost
from . import keys
from .lock import LockKeys
from .scripts import load

__all__ = [
    "ADOPT",
    "ADOPTED",
    "ALREADY_ADOPTED",
    "PREFIX",
    "SPENT",
    "Adoption",
    "Handover",
    "adopt_args",
    "adopt_keys",
    "decode",
    "decode_adopt",
    "encode",
    "refusal",
]

PREFIX = "redlease1."
"""The version prefix of a hand-over token (a later format gets another)."""

_KINDS = {"lock": "Lock or RLock", "redlock": "Redlock"}

ADOPT = load("adopt", prelude=("common_lib",))
ADOPTED, ALREADY_ADOPTED, SPENT = 1, 2, 3
"""adopt.lua's statuses: adopted / an adopter of the token still holds it / the token was
adopted and that adopter released or lost it (0: not held with the token)."""


@dataclass(frozen=True)
class Handover:
    """A detached lease: which lock, its lease token and fence, and the lock's options."""

    kind: str  # "lock" (Lock and RLock share one lease format)
    prefix: str
    name: str | bytes
    token: bytes
    fence: int
    ttl_ms: int
    fair: bool = True
    handoff_ms: int = 250


def encode(handover: Handover) -> str:
    """The token for ``handover`` (a str safe in JSON, URLs and message headers)."""
    name = handover.name
    fields: dict[str, Any] = {
        "kind": handover.kind,
        "prefix": handover.prefix,
        "token": handover.token.decode("ascii"),
        "fence": handover.fence,
        "ttl_ms": handover.ttl_ms,
        "fair": handover.fair,
        "handoff_ms": handover.handoff_ms,
    }
    if isinstance(name, bytes):
        fields["name_b64"] = base64.b64encode(name).decode("ascii")
    else:
        fields["name"] = name
    body = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()
    return PREFIX + base64.urlsafe_b64encode(body).rstrip(b"=").decode("ascii")


def decode(token: object, kind: str) -> Handover:
    """The hand-over in ``token``; TypeError / ValueError naming ``token`` if it is not one,
    or if it is the lease of another kind of lock than ``kind``."""
    if not isinstance(token, str):
        raise TypeError(f"token must be a str from detach(), got {type(token).__name__}")
    if not token.startswith(PREFIX):
        raise ValueError(f"token is not a redlease hand-over token (no {PREFIX!r} prefix)")
    data = token[len(PREFIX) :]
    try:
        fields = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)))
        found = _fields(fields)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"token is malformed (not what detach() returns): {exc}") from None
    if found.kind != kind:
        raise ValueError(
            f"token holds a {_KINDS.get(found.kind, found.kind)}'s lease, not a "
            f"{_KINDS.get(kind, kind)}'s: adopt it with that kind of lock"
        )
    return found


def _fields(fields: Any) -> Handover:
    if not isinstance(fields, dict):
        raise ValueError("not a JSON object")
    name: str | bytes
    if "name_b64" in fields:
        name = base64.b64decode(_typed(fields, "name_b64", str), validate=True)
    else:
        name = _typed(fields, "name", str)
    fence, ttl_ms, handoff_ms = (_typed(fields, k, int) for k in ("fence", "ttl_ms", "handoff_ms"))
    if fence < 0 or ttl_ms <= 0 or handoff_ms <= 0:
        raise ValueError("fence, ttl_ms or handoff_ms out of range")
    return Handover(
        kind=_typed(fields, "kind", str),
        prefix=_typed(fields, "prefix", str),
        name=name,
        token=_typed(fields, "token", str).encode("ascii"),
        fence=fence,
        ttl_ms=ttl_ms,
        fair=_typed(fields, "fair", bool),
        handoff_ms=handoff_ms,
    )


def _typed(fields: dict[str, Any], key: str, kind: type) -> Any:
    value = fields[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{key} is not a {kind.__name__}")
    return value


def adopt_keys(lock: LockKeys, prefix: str, name: bytes) -> list[bytes]:
    """adopt.lua's KEYS: the lock, its fence counter, and ``<prefix>:{<name>}:adopted`` (the
    record of the last token an adoption spent, in the lock's slot)."""
    return [lock.lock, lock.fence, *keys.tagged(prefix, name, "adopted")]


def adopt_args(*, detached: bytes, token: bytes, ttl_ms: int) -> list[Any]:
    """adopt.lua's ARGV: swap the ``detached`` token for the adopter's ``token``, on a lease
    of ``ttl_ms``."""
    return [detached, token, ttl_ms]


@dataclass(frozen=True)
class Adoption:
    """adopt.lua's reply: ``status`` (:data:`ADOPTED`, :data:`ALREADY_ADOPTED`, :data:`SPENT`
    or 0) and ``value`` (the server's fence when adopted, the adopter's ms left when already
    adopted)."""

    status: int
    value: int


def decode_adopt(raw: Any) -> Adoption:
    """Decode ``{status, value}`` from adopt.lua, refusing anything else."""
    try:
        status, value = int(raw[0]), int(raw[1])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from adopt.lua: {raw!r}") from exc
    if status not in (0, ADOPTED, ALREADY_ADOPTED, SPENT):
        raise ValueError(f"unexpected status from adopt.lua: {raw!r}")
    return Adoption(status, value)


def refusal(reply: Adoption, name: str | bytes) -> LockError:
    """The error of an adoption that adopt.lua refused (``reply``) for lock ``name``."""
    if reply.status == ALREADY_ADOPTED:
        left = max(reply.value, 0) / 1000
        return AlreadyAdopted(
            f"lock {name!r} could not be adopted: its token was already adopted, and that "
            f"adopter holds the lease ({left:g} s left on it); a token is adopted once",
            name=name,
            remaining=left,
        )
    if reply.status == SPENT:
        why = "its token was adopted before, and that adopter released the lock or lost it"
    else:
        why = "its lease ran out or it was taken"
    return LockLost(f"lock {name!r} could not be adopted: {why}", name=name)
