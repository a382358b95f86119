"""QueueOnce with real Celery workers on a private server (broker, backend and locks).

One worker (``--pool=solo``) serves the module; the kill test starts its own on another queue
and kills it. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

celery = pytest.importorskip("celery")

import redis  # noqa: E402

from redlease.celery import AlreadyQueued, QueueOnce, queue_once_key  # noqa: E402
from tests.topology import RedisServer  # noqa: E402

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A private server for the module (the shared one is flushed by other tests)."""
    with RedisServer() as srv:
        yield srv.url + "/0"
        # The tests' AsyncResults sit in reference cycles. Each one freed later unsubscribes
        # from the result backend, which on celery < 5.5 retries for about 20 s once the
        # server is gone (measured: 139 s of a later test's setup): free them while it runs.
        gc.collect()


@pytest.fixture(scope="module")
def tasks(url: str) -> Any:
    """tests.celery_once.app, configured for the module's server."""
    os.environ["REDLEASE_CELERY_URL"] = url
    sys.modules.pop("tests.celery_once.app", None)
    import tests.celery_once.app as module

    return module


def start_worker(url: str, queue: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "celery", "-A", "tests.celery_once.app", "worker", "--pool=solo"]
    argv += ["-Q", queue, "-l", "warning", "--without-gossip", "--without-mingle"]
    argv += ["--without-heartbeat", "-n", f"{queue}@%h"]
    env = {
        **os.environ,
        "REDLEASE_CELERY_URL": url,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def worker(url: str, tasks: Any) -> Iterator[subprocess.Popen[bytes]]:
    proc = start_worker(url, "celery")
    try:
        assert tasks.ping.delay().get(timeout=60) == "pong"
        yield proc
    finally:
        stop(proc)


def runs(url: str, tag: str) -> list[int]:
    """The fences of the recorded runs of ``tag``."""
    found = redis.Redis.from_url(url).lrange("runs", 0, -1)
    return [int(f) for t, f in (r.decode().split() for r in found) if t == tag]


def wait_for(predicate: Any, limit: float = 30.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def test_the_key_is_celery_onces() -> None:
    assert queue_once_key("tasks.add", {"b": 2, "a": 1}) == "qo_tasks.add_a-1_b-2"
    assert queue_once_key("tasks.add", {"b": 2, "a": 1}, ["b"]) == "qo_tasks.add_b-2"
    assert queue_once_key("tasks.add", {"b": 2, "a": 1}, restrict_to=["b"]) == "qo_tasks.add_b-2"
    with pytest.raises(TypeError, match="restrict_to"):
        queue_once_key("tasks.add", {"b": 2, "a": 1}, ["a"], restrict_to=["b"])
    # celery-once 3.0's own expectations (tests/unit/test_helpers.py there)
    assert queue_once_key("example", {}) == "qo_example"
    mixed = {"int": 1, "boolean": True, "str": "abc", "list": [1, "2"]}
    assert queue_once_key("e", mixed) == "qo_e_boolean-True_int-1_list-[1, '2']_str-abc"
    assert queue_once_key("e", {"a": {"é": "c"}}) == "qo_e_a-{'é': 'c'}"


def test_dict_arguments_in_any_order_are_one_key() -> None:
    """Dicts are sorted at every depth, as celery-once does; the twin: their plain ``str``
    (the key before) tells the two orders apart."""
    one = {"d": {"b": 2, "a": {"y": 1, "x": [{"q": 1, "p": 2}]}}}
    two = {"d": {"a": {"x": [{"p": 2, "q": 1}], "y": 1}, "b": 2}}
    assert queue_once_key("t", one) == queue_once_key("t", two)
    # checked against celery-once 3.0.1's queue_once_key on the same arguments
    expected = r"""qo_t_d-{'a': '{\'x\': ["{\'p\': 2, \'q\': 1}"], \'y\': 1}', 'b': 2}"""
    assert queue_once_key("t", one) == expected
    assert str(one["d"]) != str(two["d"])  # the twin: unsorted, two keys
    assert queue_once_key("t", {"d": {1: "a"}}) != queue_once_key("t", {"d": {"1": "a"}})


def test_dict_arguments_in_any_order_are_one_task(url: str, tasks: Any) -> None:
    tasks.slow.apply_async(args=({"a": 1, "b": 2}, 0), queue="nobody")
    with pytest.raises(AlreadyQueued):
        tasks.slow.apply_async(args=({"b": 2, "a": 1}, 0), queue="nobody")


def test_bad_options_name_themselves(url: str, tasks: Any) -> None:
    with pytest.raises(ValueError, match=r"^timeout "):
        tasks.slow.apply_async(args=("bad", 0), once={"timeout": 0})
    with pytest.raises(TypeError, match=r"^timeout "):
        tasks.slow.apply_async(args=("bad", 0), once={"timeout": "1h"})
    with pytest.raises(ValueError, match=r"^keys must name arguments"):
        tasks.typo.apply_async(args=("bad",))
    # A default argument given or not is one call: one key.
    assert tasks.slow.get_key(("x",), {"seconds": 1}) == tasks.slow.get_key(("x", 1))
    assert tasks.slow.get_key(("x", 1)) == "qo_tests.celery_once.app.slow_seconds-1_tag-x"


def test_enqueued_twice_runs_once_and_again_after_it_ended(
    url: str, tasks: Any, worker: Any
) -> None:
    first = tasks.slow.apply_async(args=("twice", 1.0))
    with pytest.raises(AlreadyQueued) as info:
        tasks.slow.apply_async(args=("twice", 1.0))
    assert 0 < info.value.countdown <= 60 and "Expires in" in info.value.message
    graceful = tasks.slow.apply_async(args=("twice", 1.0), once={"graceful": True})
    assert graceful.status == "REJECTED" and graceful.get() is None  # celery-once's answer
    assert first.get(timeout=30) == "twice"
    again = tasks.slow.apply_async(args=("twice", 1.0))  # it ended: queued again
    assert again.get(timeout=30) == "twice"
    assert wait_for(lambda: len(runs(url, "twice")) == 2)
    fences = runs(url, "twice")
    assert fences[0] < fences[1]  # each run has the fence of its lock


def test_another_key_is_another_task(url: str, tasks: Any, worker: Any) -> None:
    a = tasks.slow.apply_async(args=("key-a", 0.2))
    b = tasks.slow.apply_async(args=("key-b", 0.2))
    assert [a.get(timeout=30), b.get(timeout=30)] == ["key-a", "key-b"]


def test_a_failed_task_frees_its_key(url: str, tasks: Any, worker: Any) -> None:
    for _ in range(2):
        result = tasks.failing.apply_async(args=("failing",))
        with pytest.raises(RuntimeError):
            result.get(timeout=30)
    assert len(runs(url, "failing")) == 2


def test_the_lock_lasts_timeout_while_queued(url: str, tasks: Any) -> None:
    # Queued where no worker listens: the lease taken at enqueue lasts `timeout` (2 s).
    tasks.slow.apply_async(args=("queued", 0), queue="nobody", once={"timeout": 2})
    with pytest.raises(AlreadyQueued):
        tasks.slow.apply_async(args=("queued", 0), queue="nobody")
    started = time.monotonic()

    def enqueued() -> bool:
        try:
            tasks.slow.apply_async(args=("queued", 0), queue="nobody")
        except AlreadyQueued:
            return False
        return True

    assert wait_for(enqueued, limit=15)
    assert time.monotonic() - started >= 1.0


def test_unlock_before_run_frees_the_key_when_it_starts(url: str, tasks: Any, worker: Any) -> None:
    first = tasks.early.apply_async(args=("early", 1.5))
    assert wait_for(lambda: runs(url, "early"))  # started: its key is free already
    second = tasks.early.apply_async(args=("early", 0))
    first.get(timeout=30)
    second.get(timeout=30)
    assert len(runs(url, "early")) == 2


@pytest.mark.parametrize("killed", [True, False])
def test_a_killed_worker_frees_the_task_within_the_short_lease(
    url: str, tasks: Any, killed: bool
) -> None:
    """kill -9 of the worker mid-task: the task can be queued again within its running lease
    (1 s), not its ``timeout`` (3600 s). The twin: a live worker keeps renewing it."""
    tag = f"kill-{killed}"
    proc = start_worker(url, f"kill{int(killed)}")
    try:
        tasks.hold.apply_async(args=(tag, 60), queue=f"kill{int(killed)}")
        assert wait_for(lambda: runs(url, tag), limit=60)
        if killed:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        stopped = time.monotonic()

        def enqueued() -> bool:
            try:
                tasks.hold.apply_async(args=(tag, 0), queue="nobody")
            except AlreadyQueued:
                return False
            return True

        if killed:
            assert wait_for(enqueued, limit=20)
            assert time.monotonic() - stopped < 1.0 + 5  # the short lease, generous slack
        else:
            time.sleep(3.0)  # three running leases
            assert not enqueued()
    finally:
        stop(proc)


def test_a_client_may_be_given_and_eager_tasks_hold_the_lock(url: str) -> None:
    """``settings["client"]`` instead of a URL; ``task_always_eager`` runs the task at once,
    in this process, still holding the lock it took at apply_async."""
    client = redis.Redis.from_url(url)
    app = celery.Celery("eager", set_as_current=False)
    app.conf.ONCE = {"settings": {"client": client}}
    app.conf.task_always_eager = True
    seen: list[Any] = []

    @app.task(bind=True, base=QueueOnce, shared=False)
    def job(self: Any, n: int) -> int:
        seen.append((self.request.redlease_fence, job.once_client is client))
        with pytest.raises(AlreadyQueued):  # its own key is held while it runs
            job.apply_async(args=(n,))
        return n

    assert job.apply_async(args=(7,)).get() == 7
    assert job.apply_async(args=(7,)).get() == 7  # released when it ended
    assert [given for _, given in seen] == [True, True]
    assert 0 < seen[0][0] < seen[1][0]  # each run its own, newer fence
    client.close()


def test_the_fence_is_none_without_a_lock(url: str, tasks: Any, worker: Any) -> None:
    """A direct call, ``apply()`` and ``send_task`` (which skips apply_async and its dedupe)
    run with no lock: ``redlease_fence`` is ``None``. The twin: through apply_async, a fence."""
    assert tasks.fence_of() is None
    assert tasks.fence_of.apply().get() is None
    sent = tasks.app.send_task("tests.celery_once.app.fence_of")
    assert sent.get(timeout=30) is None
    assert isinstance(tasks.fence_of.apply_async().get(timeout=30), int)


@pytest.mark.parametrize("expiring", [True, False], ids=["expiring", "twin-kept"])
def test_no_key_is_kept_past_its_timeout(
    url: str, tasks: Any, worker: Any, monkeypatch: pytest.MonkeyPatch, expiring: bool
) -> None:
    """Every key a run leaves has an expiry (at most ``timeout``: 60 s here). The twin,
    without the expiry of the lock's fence counter: that key is kept for good."""
    if not expiring:
        monkeypatch.setattr(QueueOnce, "_expire_counter", lambda *args: None)
    tag = f"expiry-{expiring}"
    assert tasks.slow.apply_async(args=(tag, 0)).get(timeout=30) == tag
    client = redis.Redis.from_url(url)
    left = {key: client.pttl(key) for key in client.scan_iter(f"redlease:{{*tag-{tag}}}:*")}
    assert left, "the run left no key at all"
    kept = [key for key, ms in left.items() if not 0 < ms <= 60_000]
    if expiring:
        assert kept == []
    else:
        assert kept == [
            f"redlease:{{qo_tests.celery_once.app.slow_seconds-0_tag-{tag}}}:fence".encode()
        ]


@pytest.mark.parametrize("keep", [True, False], ids=["keep_on_retry", "twin-freed"])
def test_keep_on_retry_holds_the_key_through_the_countdown(
    url: str, tasks: Any, worker: Any, keep: bool
) -> None:
    """A task retrying with a countdown: with ``keep_on_retry`` its key stays held until the
    retry ran, so a duplicate is refused; the twin (celery-once's behaviour) frees it during
    the countdown, and a duplicate (a second retry chain) is queued."""
    task, tag = (tasks.retried, "kept") if keep else (tasks.retried_free, "freed")
    first = task.apply_async(args=(tag,))
    assert wait_for(lambda: first.state == "RETRY")
    duplicate = None
    with contextlib.suppress(AlreadyQueued):
        duplicate = task.apply_async(args=(tag,))
    assert (duplicate is None) == keep
    first.get(timeout=30)
    if duplicate is not None:
        duplicate.get(timeout=30)
    fences = runs(url, tag)
    assert len(fences) == (2 if keep else 4)
    if keep:
        assert fences[0] == fences[1]  # one lock, handed from the attempt to its retry


def test_return_existing_answers_a_duplicate_with_the_queued_copys_result(
    url: str, tasks: Any, worker: Any
) -> None:
    first = tasks.shared.apply_async(args=("existing", 1.0))
    duplicate = tasks.shared.apply_async(args=("existing", 1.0))
    assert duplicate.id == first.id  # the copy queued or running, not a new one
    assert duplicate.get(timeout=30) == f"existing by {first.id}"
    assert wait_for(lambda: len(runs(url, "existing")) == 1)
    again = tasks.shared.apply_async(args=("existing", 0.1))  # it ended: a new copy
    assert again.id != first.id and again.get(timeout=30) == f"existing by {again.id}"
    assert len(runs(url, "existing")) == 2
    keys = redis.Redis.from_url(url).keys("*existing*celery-task")
    assert keys == []  # forgotten with the key


def test_twin_without_return_existing_a_duplicate_is_refused(url: str, tasks: Any) -> None:
    """The check above can fail: the same call on a task without the option is refused."""
    first = tasks.slow.apply_async(args=("not-existing", 0.1), queue="nobody")
    with pytest.raises(AlreadyQueued):
        tasks.slow.apply_async(args=("not-existing", 0.1), queue="nobody")
    assert first.id
    redis.Redis.from_url(url).delete(*redis.Redis.from_url(url).keys("*not-existing*"))
