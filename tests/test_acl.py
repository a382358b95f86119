"""A user with only ``redlease.acl_rules()`` runs every primitive; one without the waiters'
channels is told clearly, not left hanging."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from importlib import resources

import pytest
import redis

import redlease
import redlease.compat
from redlease.acl import CLUSTER_COMMANDS, SCRIPT_COMMANDS, acl_rules
from tests.topology import ACLUser, RedisServer

pytestmark = pytest.mark.timeout(60)


def test_the_rules_name_every_command_the_scripts_call() -> None:
    called = set()
    for script in resources.files("redlease").joinpath("lua").iterdir():
        if script.name.endswith(".lua"):
            called |= {
                c.lower() for c in re.findall(r"redis\.p?call\('([A-Z]+)'", script.read_text())
            }
    called |= {"publish", "spublish"}  # common_lib.lua's tell(): redis.call(command, ...)
    assert called <= set(SCRIPT_COMMANDS) | set(CLUSTER_COMMANDS), called - set(SCRIPT_COMMANDS)


def test_the_rules_keep_the_user_to_its_prefix_and_the_waiters_channels() -> None:
    rules = acl_rules("shop")
    assert rules[:4] == ["~shop:{*", "~shop:ratelimit:*", "resetchannels", "&redlease:waiters:*"]
    assert acl_rules("a*b")[0] == "~a\\*b:{*"  # glob characters are matched literally
    assert "+spublish" not in rules and "+spublish" in acl_rules(cluster=True)
    assert "+wait" in acl_rules(replicas=True)
    with pytest.raises(ValueError, match="prefix"):
        acl_rules("bad prefix")


def contend(client: redis.Redis, name: str) -> list[int]:
    """Two threads take turns on one lock (the second waits: pub/sub, a grant): the fences,
    in the order the critical sections ran."""
    fences: list[int] = []
    errors: list[BaseException] = []
    lock = redlease.Lock(client, name, ttl=5, timeout=5)

    def run() -> None:
        try:
            for _ in range(3):
                with lock as held:
                    fences.append(held.fence)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]
    return fences


def test_a_user_with_only_these_rules_runs_every_primitive(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    user = make_acl_user("redlease-app", acl_rules())
    client = server.client(**user.kwargs())
    try:
        fences = contend(client, "acl:lock")
        assert len(fences) == 6 and fences == sorted(set(fences))  # each larger
        rlock = redlease.RLock(client, "acl:rlock")
        with rlock, rlock:
            assert rlock.inspect().held
        stock = redlease.Inventory(client, "acl:sku")
        stock.restock(5)
        stock.confirm(stock.reserve(user="u1", order_id="o1").order_id)
        assert redlease.RateLimiter(client, "acl:api", limit=2).hit("k").allowed
        with redlease.Semaphore(client, "acl:sem", 2):
            pass
        latch = redlease.CountDownLatch(client, "acl:latch")
        assert latch.try_set_count(1) and latch.count_down() == 0 and latch.wait(1)
        rw = redlease.ReadWriteLock(client, "acl:rw")
        with rw.read:
            pass
        with rw.write as held:
            redlease.FencedStore(client, "acl:record").write(held.fence, "v")
        election = redlease.Election(client, "acl:election")
        assert election.campaign("me", timeout=2)
        election.resign()
    finally:
        redlease.close(client)
        client.close()


def test_the_rules_cover_once_cached_compat_and_the_break_glass(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    """Every other primitive and the break-glass release, with every key they write: a key
    outside ``~redlease:{*`` / ``~redlease:ratelimit:*`` is a NOPERM, failing the test."""
    user = make_acl_user("redlease-all", acl_rules())
    client = server.client(**user.kwargs())
    try:
        once = redlease.Once(client, "acl2:once", every=3600)
        with once as run:
            assert run is not None and run.fence > 0
        assert once.try_start() is None and once.last() is not None
        calls: list[int] = []

        @redlease.cached(client, ttl=60, name="acl2:double")
        def double(x: int) -> int:
            calls.append(x)
            return 2 * x

        assert [double(4), double(4)] == [8, 8] and calls == [4]
        assert double.invalidate(4)
        limiter = redlease.RateLimiter(client, "acl2:api", rate="2/second;100/minute")
        assert [limiter.hit("k").allowed for _ in range(3)] == [True, True, False]
        with client.lock("acl2:compat", timeout=5, lock_class=redlease.compat.Lock) as lock:
            assert lock.owned() and lock.fence
        with redlease.Lock(client, "acl2:lock2", ttl=5) as held:
            redlease.FencedStore(client, "acl2:store").write(held.fence, "v")
        assert redlease.FencedStore(client, "acl2:store").read().value == b"v"
        stock = redlease.Inventory(client, "acl2:sku")
        stock.restock(2)
        stock.cancel(stock.reserve(user="u1", order_id="o1").order_id)
        assert stock.snapshot().available == 2
        latch = redlease.CountDownLatch(client, "acl2:latch")
        assert latch.try_set_count(1) and latch.inspect().count == 1
        # Held, then evicted by the break-glass release of each kind.
        assert redlease.Lock(client, "acl2:evict", ttl=5, renew=False).acquire()
        assert redlease.Semaphore(client, "acl2:evict", 3, ttl=5, renew=False).acquire()
        assert redlease.ReadWriteLock(client, "acl2:evict", ttl=5, renew=False).write.acquire()
        assert redlease.Election(client, "acl2:evict", ttl=5, renew=False).campaign("x", timeout=2)
        for kind in (redlease.Lock, redlease.Semaphore, redlease.ReadWriteLock, redlease.Election):
            assert len(kind.force_release(client, "acl2:evict").removed) == 1, kind
    finally:
        redlease.close(client)
        client.close()


def test_twin_a_key_outside_the_layout_is_refused(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    """The twin: the same user cannot touch a key outside the common layout, such as Once's
    key before it moved into it (``redlease:once:{<name>}:run``): a primitive still writing
    there would fail the test above."""
    user = make_acl_user("redlease-layout", acl_rules())
    client = server.client(**user.kwargs())
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.hset("redlease:once:{acl:once}:run", "state", "running")
        client.hset("redlease:{acl:once}:once:run", "state", "done")  # the layout: granted
    finally:
        client.close()


def tenant_can_use(client: redis.Redis, prefix: str) -> bool:
    """Whether ``client``'s user may take a lock, hit a rate limiter and write a fenced store
    under ``prefix`` (False: refused by the ACL)."""
    try:
        with redlease.Lock(client, "acl:job", prefix=prefix, ttl=5) as held:
            redlease.FencedStore(client, "acl:job", prefix=prefix).write(held.fence, "v")
        redlease.RateLimiter(client, "acl:api", limit=2, prefix=prefix).hit("k")
    except redlease.Unavailable as exc:
        assert "permission" in str(exc).lower() or "noperm" in str(exc).lower(), exc
        return False
    return True


def test_a_tenants_rules_do_not_cover_a_longer_tenant_prefix(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    """``acl_rules("app")`` grants ``app:{*`` and ``app:ratelimit:*``: the prefix
    ``app:billing`` (keys ``app:billing:{...}``) is another tenant's, refused."""
    user = make_acl_user("tenant-app", acl_rules("app"))
    client = server.client(**user.kwargs())
    try:
        assert tenant_can_use(client, "app")
        assert not tenant_can_use(client, "app:billing")
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.get("app:billing:{acl:job}:fence")
    finally:
        redlease.close(client)
        client.close()


def test_twin_a_plain_prefix_pattern_covers_the_other_tenant(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    """The twin: the rules before (``~app:*``) let the ``app`` user into ``app:billing``."""
    rules = ["~app:*", *acl_rules("app")[2:]]
    user = make_acl_user("tenant-app-wide", rules)
    client = server.client(**user.kwargs())
    try:
        assert tenant_can_use(client, "app") and tenant_can_use(client, "app:billing")
    finally:
        redlease.close(client)
        client.close()


def test_twin_a_user_without_the_waiters_channels_is_told_clearly(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    """The twin: without ``&redlease:waiters:*``, a lock that must wait cannot subscribe; it
    raises LockUnavailable naming the refusal (the rules above are what made the wait work)."""
    rules = [r for r in acl_rules() if not r.startswith("&")]
    user = make_acl_user("redlease-deaf", rules)
    client = server.client(**user.kwargs())
    holder = redlease.Lock(client, "acl:deaf", ttl=5)
    try:
        assert holder.acquire()  # no waiting: no channel needed
        # (timeout 10 s: the refusal comes at once, but under load a 2 s wait ran out first
        # and the acquire returned False instead of raising it)
        waiter = redlease.Lock(client, "acl:deaf", ttl=5, timeout=10)
        errors: list[BaseException] = []

        def wait() -> None:
            try:
                waiter.acquire()
            except BaseException as exc:  # checked below
                errors.append(exc)

        thread = threading.Thread(target=wait)
        thread.start()
        thread.join(30)
        assert len(errors) == 1 and isinstance(errors[0], redlease.LockUnavailable)
        said = str(errors[0]).lower()  # the refusal, or (its reply late under load) SUBSCRIBE
        assert "permission" in said or "noperm" in said or "subscribe" in said
        holder.release()
    finally:
        redlease.close(client)
        client.close()
