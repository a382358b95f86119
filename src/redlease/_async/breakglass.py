"""Break-glass release: remove a holding an operator cannot wait for (``_core/breakglass.py``).

The primitives' ``force_release`` class methods call these: one script, one round trip, then
a WARNING log record (``redlease_event`` ``force_released``) naming the evicted holders.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from .. import _observe
from .._core import breakglass, validate
from .._core.breakglass import FORCE_RELEASE, SHARED_FORCE_RELEASE, ForceReleased
from .._core.lock import LockKeys
from .._core.shared import SharedKeys
from ..errors import LockUnavailable, Unavailable
from .flavor import check_client
from .runtime import runtime_for

__all__ = ["force_release_lock", "force_release_shared"]


async def force_release_lock(
    client: Any, name: str | bytes, *, prefix: str, token: Any, handoff: float
) -> ForceReleased:
    """Remove the holder of lock ``name`` (only if it holds ``token``, when given), move its
    fence on, and grant the lock to the first waiter (who claims it within ``handoff`` s)."""
    check_client(client)
    keys = LockKeys.build(validate.prefix(prefix), validate.name(name))
    window, wanted = validate.window_ms(handoff, "handoff"), breakglass.token(token)
    runtime = runtime_for(client)
    args = breakglass.lock_args(
        window_ms=window, channels=runtime.channels(keys.lock), token=wanted
    )
    try:
        raw = await runtime.backend.run(FORCE_RELEASE, keys.in_order(), args, None)
    except RedisError as exc:
        raise LockUnavailable(
            f"could not force-release lock {name!r}: Redis failed: {exc}", name=name
        ) from exc
    return _logged(breakglass.decode(raw, name, shared=False), "lock")


async def force_release_shared(
    client: Any,
    name: str | bytes,
    keys: SharedKeys,
    *,
    primitive: str,
    capacity: int,
    stored: bool,
    token: Any,
    handoff: float,
    unavailable: type[Unavailable],
) -> ForceReleased:
    """Remove the holders of the shared resource at ``keys`` (only the one with ``token``,
    when given), move its fence on, and reserve the freed units for the waiters that fit."""
    check_client(client)
    wanted = breakglass.token(token)
    window = validate.window_ms(handoff, "handoff")
    runtime = runtime_for(client)
    args = [wanted, window, runtime.channels(keys.holders), capacity, int(stored)]
    try:
        raw = await runtime.backend.run(SHARED_FORCE_RELEASE, keys.in_order(), args, None)
    except RedisError as exc:
        raise unavailable(
            f"could not force-release {primitive} {name!r}: Redis failed: {exc}", name=name
        ) from exc
    return _logged(breakglass.decode(raw, name, shared=True), primitive)


def _logged(result: ForceReleased, primitive: str) -> ForceReleased:
    if result.removed:
        name = result.name if isinstance(result.name, str) else result.name.decode("replace")
        tokens = [h.token for h in result.removed]
        _observe.force_released(primitive, name, tokens, result.fence)
    return result
