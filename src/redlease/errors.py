"""The exception hierarchy of redlease.

Every error this library raises on purpose derives from :class:`RedleaseError`::

    RedleaseError
    ├── Unavailable              Redis failed or could not be reached (any primitive): the
    │                            cause is chained; each ``*Unavailable`` below is one
    ├── LockError
    │   ├── NotAcquired          the lock could not be had within the timeout (``with``)
    │   ├── LockNotOwned         this handle does not hold the lock (release twice, ...)
    │   │   └── LockLost         it held the lock, and the lease ran out or was taken
    │   ├── AlreadyAdopted       adopt(): the token was adopted already, and that adopter holds it
    │   ├── ForeignData          a key of the lock holds data redlease did not write
    │   └── LockUnavailable      Redis failed or could not be reached: the cause is chained
    │       └── QuorumUnavailable    fewer than a majority of Redlock's servers answered
    ├── InventoryError
    │   ├── SoldOut              fewer units available than requested (``available``, ``requested``)
    │   ├── LimitExceeded        the user's per-user limit would be passed (``limit``, ``already``)
    │   ├── OrderNotFound        no order has this id (confirm, cancel)
    │   ├── OrderClosed          the order is past the transition (confirm expired, cancel sold)
    │   ├── OrderConflict        the order id is taken by a different purchase (user or qty)
    │   └── InventoryUnavailable Redis failed or could not be reached: the cause is chained
    ├── RateLimitError
    │   ├── RateLimitExceeded    acquire() could not pass within its timeout (``retry_after``)
    │   └── RateLimitUnavailable Redis failed or could not be reached: the cause is chained
    ├── SemaphoreError
    │   ├── NoPermit             no permit came free within the timeout (``with``)
    │   ├── PermitNotHeld        the caller holds no permit through this handle
    │   │   └── PermitLost       it held one, and the lease ran out first
    │   └── SemaphoreUnavailable Redis failed or could not be reached: the cause is chained
    ├── LatchError
    │   └── LatchUnavailable     Redis failed or could not be reached: the cause is chained
    ├── ElectionError
    │   ├── NotLeader            resign() without leading through this handle
    │   │   └── LeadershipLost   it led, and the lease ran out first
    │   └── ElectionUnavailable  Redis failed or could not be reached: the cause is chained
    ├── FencingError
    │   ├── StaleFence           a write's fence is below the highest the resource accepted
    │   └── FencedStoreUnavailable  Redis failed or could not be reached: the cause is chained
    ├── AlreadyQueued            a job or task with the same key is queued or running already
    │                            (QueueOnce, redlease.rq / redlease.arq enqueue_once)
    ├── OnceError
    │   ├── RunLost              a Once's run lost its lease before finish() / fail()
    │   └── OnceUnavailable      Redis failed or could not be reached: the cause is chained
    └── (later primitives add their own branches)

    (ReadWriteLock raises the LockError family, plus LockUpgradeError, a LockError: the
    write lock asked for by a holder of only the read lock.)

Bad arguments are not ``RedleaseError``: they raise ``ValueError`` / ``TypeError`` at once,
before anything is sent to Redis, with a message that names the argument.

The bases (``RedleaseError``, ``Unavailable``, ``LockError``, ``InventoryError``,
``RateLimitError``) are for catching; only the concrete errors are raised, so a handler can
always tell which one happened.

An outage is never reported as contention: ``acquire()`` returns ``False`` only when the lock
is held by someone else; when Redis cannot answer it raises :class:`LockUnavailable` with the
redis-py exception as ``__cause__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._core.inventory import Reservation

__all__ = [
    "AlreadyAdopted",
    "AlreadyQueued",
    "ElectionError",
    "ElectionUnavailable",
    "FencedStoreUnavailable",
    "FencingError",
    "ForeignData",
    "InventoryError",
    "InventoryUnavailable",
    "LatchError",
    "LatchUnavailable",
    "LeadershipLost",
    "LimitExceeded",
    "LockError",
    "LockLost",
    "LockNotOwned",
    "LockUnavailable",
    "LockUpgradeError",
    "NoPermit",
    "NotAcquired",
    "NotLeader",
    "OnceError",
    "OnceUnavailable",
    "OrderClosed",
    "OrderConflict",
    "OrderNotFound",
    "PermitLost",
    "PermitNotHeld",
    "QuorumUnavailable",
    "RateLimitError",
    "RateLimitExceeded",
    "RateLimitUnavailable",
    "RedleaseError",
    "RunLost",
    "SemaphoreError",
    "SemaphoreUnavailable",
    "SoldOut",
    "StaleFence",
    "Unavailable",
]


class RedleaseError(Exception):
    """Base class of every error redlease raises on purpose.

    ``name`` is the primitive's name (``None`` where there is none), so a handler can log
    which lock or resource failed without parsing the message.
    """

    def __init__(self, message: str, *, name: str | bytes | None = None) -> None:
        if type(self) in _BASES:
            raise TypeError(f"{type(self).__name__} is a base class: raise one of its subclasses")
        super().__init__(message)
        self.name = name


class AlreadyQueued(RedleaseError):
    """A job or task with the same key is queued (or running) already: ``QueueOnce``,
    ``redlease.rq.enqueue_once``, ``redlease.arq.enqueue_once``. ``countdown`` (also
    ``remaining``): seconds its lock has left; ``message``: celery-once's text (its exception
    has the same attributes)."""

    def __init__(self, countdown: float, *, name: str | bytes | None = None) -> None:
        self.message = f"Expires in {countdown:g} seconds"
        self.countdown = self.remaining = countdown
        super().__init__(self.message, name=name)


class Unavailable(RedleaseError):
    """Redis failed, or could not be reached: the operation's outcome is not known to be done.

    The common base of :class:`LockUnavailable`, :class:`InventoryUnavailable` and
    :class:`RateLimitUnavailable` (and of every later primitive's), for code that handles an
    outage the same way whatever the primitive. The client library's exception is chained as
    ``__cause__``.
    """


class LockError(RedleaseError):
    """Base class of the errors of :class:`~redlease.Lock` and its relatives."""


class NotAcquired(LockError):
    """The lock was held by someone else for the whole timeout.

    Raised by ``with lock:``; ``lock.acquire()`` returns ``False`` instead.
    """


class LockNotOwned(LockError):
    """This handle does not hold the lock: released twice, or never acquired."""


class LockLost(LockNotOwned):
    """This handle held the lock, but its lease ran out (or was taken) before the call.

    Whatever the critical section wrote after that moment may have raced another holder;
    fencing tokens (``lock.fence``) let the storage reject those writes.
    """


class AlreadyAdopted(LockError):
    """``Lock.adopt(client, token)``: the token was adopted already, and that adopter still
    holds the lease (``remaining``: seconds left on its lease). A token is adopted once.

    Nothing was changed. The adopter's lease is short and renewed while it runs: when it
    releases the lock, or dies and its lease runs out, the lock is free again (adopting the
    spent token then raises :class:`LockLost`; take the lock afresh instead).
    """

    def __init__(self, message: str, *, name: str | bytes | None = None, remaining: float) -> None:
        super().__init__(message, name=name)
        self.remaining = remaining


class ForeignData(LockError):
    """A key of the lock holds data redlease did not write (another program uses the name).

    ``key`` is that key. Nothing was changed; choose another ``name`` or ``prefix``.
    """

    def __init__(self, message: str, *, name: str | bytes | None = None, key: bytes) -> None:
        super().__init__(message, name=name)
        self.key = key


class LockUnavailable(LockError, Unavailable):
    """Redis failed, or could not be reached, during a lock operation.

    The redis-py exception is chained as ``__cause__``. Nothing is left half-done in Redis:
    each operation is one atomic script, applied entirely or not at all. When an acquire may
    have been applied although its reply was lost, redlease tries once to release it; if Redis
    cannot be reached for that either, the lease runs out within ``ttl``.
    """


class QuorumUnavailable(LockUnavailable):
    """Fewer than a majority of a Redlock's servers answered: the lock cannot be decided.

    The message says how many answered and why the others did not; ``errors`` maps each
    failed server's index to its redis-py exception. Plain contention is not this: it makes
    ``acquire()`` return ``False``.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | bytes | None = None,
        errors: dict[int, BaseException] | None = None,
    ) -> None:
        super().__init__(message, name=name)
        self.errors = dict(errors or {})


class ReplicasUnavailable(LockUnavailable):
    """Fewer replicas than ``wait_replicas`` acknowledged the acquisition within
    ``wait_timeout`` (``WAIT``, or ``WAITAOF`` with ``wait_aof=True``): the lock was released
    again and not taken.

    ``acknowledged`` is how many replicas did, ``wanted`` how many were asked for; with
    ``wait_aof``, ``fsynced_locally`` says whether the master itself wrote it to its AOF.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | bytes | None = None,
        acknowledged: int = 0,
        wanted: int = 0,
        fsynced_locally: bool | None = None,
    ) -> None:
        super().__init__(message, name=name)
        self.acknowledged = acknowledged
        self.wanted = wanted
        self.fsynced_locally = fsynced_locally


# -- inventory ------------------------------------------------------------------------------
class InventoryError(RedleaseError):
    """Base class of the errors of :class:`~redlease.Inventory` (``name`` is the inventory's)."""


class SoldOut(InventoryError):
    """Fewer units are available than were requested; nothing was taken.

    Expired holds were returned to stock first: ``available`` is what anyone could take now.
    """

    def __init__(
        self, message: str, *, name: str | bytes | None = None, available: int, requested: int
    ) -> None:
        super().__init__(message, name=name)
        self.available = available
        self.requested = requested


class LimitExceeded(InventoryError):
    """The user would pass ``per_user_limit``; nothing was taken.

    ``already`` counts the units of the user's live holds and sold orders.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | bytes | None = None,
        limit: int,
        already: int,
        requested: int,
    ) -> None:
        super().__init__(message, name=name)
        self.limit = limit
        self.already = already
        self.requested = requested


class OrderNotFound(InventoryError):
    """No order has this id (``confirm`` or ``cancel`` of an id never reserved)."""

    def __init__(self, message: str, *, name: str | bytes | None = None, order_id: str) -> None:
        super().__init__(message, name=name)
        self.order_id = order_id


class _OrderStateError(InventoryError):
    """An error about an existing order: carries its current :class:`Reservation`."""

    def __init__(
        self, message: str, *, name: str | bytes | None = None, reservation: Reservation
    ) -> None:
        super().__init__(message, name=name)
        self.reservation = reservation
        self.order_id = reservation.order_id
        self.state = reservation.state


class OrderClosed(_OrderStateError):
    """The order is past the requested transition: ``confirm`` of an expired or cancelled
    order, ``cancel`` of a sold one. ``state`` (and ``reservation``) say where it is now."""


class OrderConflict(_OrderStateError):
    """``reserve`` was called with the id of an order for another user or quantity.

    An order id names one purchase forever; a retry must repeat the same user and qty.
    ``reservation`` is the existing order.
    """


class InventoryUnavailable(InventoryError, Unavailable):
    """Redis failed, or could not be reached, during an inventory operation.

    The redis-py exception is chained as ``__cause__``. Each operation is one script, applied
    entirely or not at all; when the reply was lost, retrying ``reserve`` with the same
    ``order_id`` (or ``confirm`` / ``cancel``) is safe and tells which happened.
    """


# -- rate limiter ---------------------------------------------------------------------------
class RateLimitError(RedleaseError):
    """Base class of the errors of :class:`~redlease.RateLimiter`."""


class RateLimitExceeded(RateLimitError):
    """``acquire()`` could not pass within its ``timeout``: nothing was taken or reserved.

    Raised at once, as soon as the wait is known to be longer than what is left of the
    timeout (``timeout=0``: when a hit would be refused). ``retry_after`` is the seconds the
    wait would have needed then; ``timeout`` the caller's.
    """

    def __init__(
        self,
        message: str,
        *,
        name: str | bytes | None = None,
        retry_after: float,
        timeout: float | None,
    ) -> None:
        super().__init__(message, name=name)
        self.retry_after = retry_after
        self.timeout = timeout


class RateLimitUnavailable(RateLimitError, Unavailable):
    """Redis failed, or could not be reached: the limiter cannot say whether to allow.

    The redis-py exception is chained as ``__cause__``. Whether to fail open (allow) or
    closed (refuse) is the caller's decision: catch this and choose.
    """


# -- the coordination family ----------------------------------------------------------------
class LockUpgradeError(LockError):
    """The write lock of a ReadWriteLock was asked for by a holder of only its read lock.

    Waiting would deadlock (the writer waits for every reader, itself included): release the
    read lock first, or take the write lock first (its holder may also read).
    """


class SemaphoreError(RedleaseError):
    """Base class of the errors of :class:`~redlease.Semaphore`."""


class NoPermit(SemaphoreError):
    """No permit came free within the timeout (``with semaphore:``; ``acquire()`` returns
    ``False`` instead)."""


class PermitNotHeld(SemaphoreError):
    """The caller holds no permit through this handle (released twice, or never acquired)."""


class PermitLost(PermitNotHeld):
    """The caller held a permit, but its lease ran out before the release (a pause longer
    than the ttl): another holder may have had it meanwhile."""


class SemaphoreUnavailable(SemaphoreError, Unavailable):
    """Redis failed, or could not be reached, during a semaphore operation (cause chained).

    Each operation is one atomic script; a permit whose grant was not seen is given back, or
    runs out within the ttl.
    """


class LatchError(RedleaseError):
    """Base class of the errors of :class:`~redlease.CountDownLatch`."""


class LatchUnavailable(LatchError, Unavailable):
    """Redis failed, or could not be reached, during a latch operation (cause chained)."""


class ElectionError(RedleaseError):
    """Base class of the errors of :class:`~redlease.Election`."""


class NotLeader(ElectionError):
    """This handle does not lead (``resign()`` without a won campaign, or twice)."""


class LeadershipLost(NotLeader):
    """This handle led, but its lease ran out first: a later leader may have acted since.

    Pass the term (a fencing token) to your storage to reject the stale leader's writes.
    """


class ElectionUnavailable(ElectionError, Unavailable):
    """Redis failed, or could not be reached, during an election operation (cause chained)."""


# -- fencing --------------------------------------------------------------------------------
class FencingError(RedleaseError):
    """Base class of the errors of :class:`~redlease.FencedStore` (``name``: the resource's)."""


class StaleFence(FencingError):
    """The write's fence is below the highest fence the resource has accepted: refused.

    The writer's lock was lost (its lease ran out during a pause, or it was cut off) and a
    newer holder has written since. Nothing was changed. ``fence`` is the fence given,
    ``highest`` the highest accepted so far. Do not retry with the same fence: acquire the
    lock again and redo the work from a fresh read.
    """

    def __init__(
        self, message: str, *, name: str | bytes | None = None, fence: int, highest: int
    ) -> None:
        super().__init__(message, name=name)
        self.fence = fence
        self.highest = highest


class FencedStoreUnavailable(FencingError, Unavailable):
    """Redis failed, or could not be reached, during a fenced read or write.

    The redis-py exception is chained as ``__cause__``. A write is one script, applied
    entirely or not at all; when its reply was lost, :meth:`~redlease.FencedStore.read`
    tells which (its ``version``), and repeating the write with the same fence is accepted
    as long as no newer holder has written.
    """


# -- once -----------------------------------------------------------------------------------
class OnceError(RedleaseError):
    """Base class of the errors of :class:`~redlease.Once`."""


class RunLost(OnceError):
    """The run's lease ran out (or another run started) before ``finish()`` / ``fail()``:
    its outcome was not recorded, and another host may have started a run meanwhile."""


class OnceUnavailable(OnceError, Unavailable):
    """Redis failed, or could not be reached, during a Once operation (cause chained)."""


_BASES = frozenset(
    {
        RedleaseError,
        Unavailable,
        LockError,
        InventoryError,
        RateLimitError,
        _OrderStateError,
        SemaphoreError,
        LatchError,
        ElectionError,
        FencingError,
        OnceError,
    }
)
"""Classes that are only caught, never raised."""
