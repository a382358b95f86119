"""``redlease top`` drawn in a real terminal (a pty), its arguments, and life without rich.

The pty test runs ``python -m redlease top`` as a process whose stdin/stdout/stderr are the
pty's slave side: rich sees a terminal and draws with cursor movements. The test reads the
master side (bounded reads, one deadline per step), strips the escape sequences and looks at
the last complete frame (each frame starts with the title ``redlease top ...``). Ctrl-C is
typed into the terminal (``\\x03``), which makes the kernel send SIGINT to the process.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis

import redlease
from redlease.cli import main
from redlease.cli.top import interval_seconds, snapshot
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)

PREFIX = "toptest"
TITLE = "redlease top  "
# CSI sequences (cursor moves, colours, erase), OSC sequences, charset selections.
ESCAPES = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
)
# The child makes the pty its controlling terminal (it is a session leader without one, and
# opening a terminal then acquires it), so that Ctrl-C typed into it becomes SIGINT. It starts
# with the keyboard's signals at their defaults, as a terminal's shell starts a job: a test run
# started in the background (`cmd &` in a script) ignores SIGINT and SIGQUIT, and an ignored
# SIGINT is inherited, and kept by Python (measured: SigIgn 0x1001007, top never ended).
CHILD = (
    "import os, runpy, signal, sys; os.close(os.open(os.ttyname(0), os.O_RDWR)); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "[signal.signal(s, signal.SIG_DFL) for s in (signal.SIGQUIT, signal.SIGHUP)]; "
    "sys.argv[0] = 'redlease'; runpy.run_module('redlease', run_name='__main__', alter_sys=True)"
)


class Terminal:
    """The master side of a pty running one process: what it drew, bounded reads."""

    def __init__(self, fd: int, proc: subprocess.Popen[bytes]) -> None:
        self.fd, self.proc, self.raw = fd, proc, b""

    def read(self, seconds: float) -> None:
        """Read whatever the process draws for up to ``seconds`` (less if it exits)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.1))
            if not ready:
                if self.proc.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the slave side is closed (the process exited)
                return
            if not chunk:
                return
            self.raw += chunk

    def wait_exit(self, limit: float) -> bool:
        """Read what it draws (a terminal keeps reading: a full pty blocks the writer) until
        the process exits, for up to ``limit`` seconds: whether it exited."""
        deadline = time.monotonic() + limit
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read(0.2)
        return self.proc.poll() is not None

    def state(self) -> str:
        """The process's terminal and signal state, from /proc (for a failure's message)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{self.proc.pid}/status") as status:
                wanted = ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
                lines = [line.strip() for line in status if line.startswith(wanted)]
        except OSError as exc:
            return f"no /proc state: {exc}"
        # stat after the name: state ppid pgrp session tty_nr tpgid ...
        pgrp, session, tty_nr, tpgid = fields[2:6]
        return f"pgrp {pgrp} session {session} tty_nr {tty_nr} tpgid {tpgid}; " + "; ".join(lines)

    @property
    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode(errors="replace"))

    def last_frame(self) -> str | None:
        """The last frame drawn in full (the one before the frame being drawn now)."""
        parts = self.text.split(TITLE)
        return parts[-2] if len(parts) >= 3 else None

    def wait_frame(self, predicate: Callable[[str], bool], limit: float = 15.0) -> str:
        """Read until a complete frame satisfies ``predicate``; fail after ``limit`` seconds."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            self.read(0.2)
            frame = self.last_frame()
            if frame is not None and predicate(frame):
                return frame
            assert self.proc.poll() is None, f"top exited early:\n{self.text[-2000:]}"
        raise AssertionError(f"no frame as expected within {limit} s; last:\n{self.last_frame()}")


@contextmanager
def top_in_a_pty(url: str, *args: str) -> Iterator[Terminal]:
    """``redlease --url URL top ARGS`` in a 160x40 pty; killed at the end if still running."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    env["PYTHONIOENCODING"] = "utf-8"  # box drawing characters, whatever the locale
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM_PROGRAM", "REDLEASE_URL"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "--url", url, "--prefix", PREFIX, "top", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    try:
        yield Terminal(master, proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        os.close(master)


def row(frame: str, name: str) -> list[str] | None:
    """The cells of the table row whose NAME is ``name`` in ``frame``, or None."""
    for line in frame.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) >= 7 and cells[1] == name:
            return cells[1:7]
    return None


def test_top_draws_held_lock_and_permit_then_drops_them_and_exits_on_ctrl_c(
    server: RedisServer, client: redis.Redis
) -> None:
    pytest.importorskip("rich")
    with top_in_a_pty(server.url, "--interval", "0.2") as term:
        term.wait_frame(lambda frame: "0 in use" in frame)  # drawn, nothing held yet
        lock = redlease.Lock(client, "orders:42", prefix=PREFIX, ttl=30)
        sem = redlease.Semaphore(client, "pool", 2, prefix=PREFIX, ttl=30)
        assert lock.acquire(timeout=5) and sem.acquire(timeout=5)
        lock_fence, sem_fence = lock.fence, sem.fence
        who = lock.inspect().held_by
        assert who is not None
        try:
            frame = term.wait_frame(lambda f: row(f, "orders:42") is not None and "pool" in f)
        finally:
            lock.release()
            sem.release()
        _, kind, held_by, lease, fence, waiters = row(frame, "orders:42") or [""] * 6
        holder = f"{who.host}:{who.pid} {who.thread}"  # who holds it
        assert (kind, held_by, fence, waiters) == ("lock", holder, str(lock_fence), "0")
        assert re.fullmatch(r"\d+\.\d s", lease) and 0 < float(lease[:-2]) <= 30
        expected = ["pool", "semaphore", "1/2 permits", lease_of(frame), str(sem_fence), "0"]
        assert row(frame, "pool") == expected
        frame = term.wait_frame(lambda f: "0 in use" in f)  # released: gone from the view
        assert row(frame, "orders:42") is None and row(frame, "pool") is None
        os.write(term.fd, b"\x03")  # Ctrl-C, typed
        assert term.wait_exit(10), f"Ctrl-C did not end it: {term.state()}"
        term.read(0.5)
    assert term.proc.returncode == 0, term.text[-2000:]
    assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text


def lease_of(frame: str) -> str:
    """The LEASE LEFT cell of the ``pool`` row (checked for shape, not value)."""
    cells = row(frame, "pool") or ["", "", "", ""]
    assert re.fullmatch(r"\d+\.\d s", cells[3]), cells
    return cells[3]


def test_top_without_rich_names_the_extra_and_exits_with_the_usage_code(
    server: RedisServer,
) -> None:
    hide_rich = (
        "import sys; sys.modules['rich'] = None; from redlease.cli import main; "
        f"sys.exit(main(['--url', {server.url!r}, 'top']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide_rich], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    message = "redlease: error: redlease top needs rich: pip install 'redlease[top]'"
    assert done.stderr.strip() == message
    assert done.stdout == ""


def test_top_once_prints_one_table_and_exits(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("rich")
    top = ["--url", server.url, "--prefix", PREFIX, "top", "--once"]
    with redlease.Lock(client, "nightly", prefix=PREFIX, ttl=30):
        assert main(top) == 0
    out = capsys.readouterr().out
    assert "nightly" in out and "1 in use of 1 names scanned" in out
    assert main(top) == 0
    assert "nightly" not in capsys.readouterr().out  # released: only its fence is left
    assert main([*top, "--idle"]) == 0
    assert "nightly" in capsys.readouterr().out


def test_top_cannot_reach_redis_exits_69(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("rich")
    assert main(["--url", "redis://127.0.0.1:1", "top"]) == 69
    assert "cannot use Redis at redis://127.0.0.1:1" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "3601", "soon", ""])
def test_interval_is_refused_with_a_message_naming_it(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--url", "redis://127.0.0.1:1", "top", "--interval", text]) == 2
    err = capsys.readouterr().err
    assert "argument --interval:" in err and repr(text) in err


@pytest.mark.parametrize("text", ["0.05", "1", "2.5", "3600"])
def test_interval_accepts_positive_seconds(text: str) -> None:
    assert interval_seconds(text) == float(text)


@pytest.mark.parametrize("option", ["--rows", "--limit"])
def test_bounds_are_whole_counts_of_at_least_one(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", option, "0"]) == 2
    assert f"argument {option}: {option} must be >= 1, got 0" in capsys.readouterr().err


def test_snapshot_filters_by_glob_and_shows_the_family(client: redis.Redis) -> None:
    """The rows ``top`` draws, without drawing: every kind, the glob, idle names hidden."""
    lock = redlease.Lock(client, "job:1", prefix=PREFIX, ttl=30)
    rw = redlease.ReadWriteLock(client, "cfg", prefix=PREFIX, ttl=30)
    latch = redlease.CountDownLatch(client, "gate", prefix=PREFIX)
    election = redlease.Election(client, "vote", prefix=PREFIX, ttl=30)
    stock = redlease.Inventory(client, "sku", prefix=PREFIX)
    assert latch.try_set_count(2)
    stock.restock(5)
    with lock as held, rw.write:
        fence = held.fence
        who = lock.inspect().held_by
        assert who is not None
        assert election.campaign("node-a", timeout=5)
        term = election.term
        try:
            rows, scanned = snapshot(client, PREFIX)
            only_jobs, _ = snapshot(client, PREFIX, match="job:*")
        finally:
            election.resign()
    cells = {r.name: r.cells()[1:] for r in rows}
    assert scanned == 5 and set(cells) == {"job:1", "cfg", "gate", "vote", "sku"}
    assert cells["job:1"][:2] == ("lock", f"{who.host}:{who.pid} {who.thread}")
    assert cells["job:1"][3] == str(fence)
    assert cells["cfg"][1] == "writer" and cells["gate"][1] == "count 2"
    assert cells["vote"][:2] == ("election", f"node-a (term {term})")
    assert cells["sku"][:2] == ("inventory", "5 free, 0 held, 0 sold of 5")
    assert [r.name for r in only_jobs] == ["job:1"]
    rows, _ = snapshot(client, PREFIX)  # all released: the latch and the stock remain
    assert [r.name for r in rows] == ["gate", "sku"]
    idle, _ = snapshot(client, PREFIX, idle=True)
    assert [r.name for r in idle] == ["cfg", "gate", "job:1", "sku", "vote"]
    assert len(snapshot(client, PREFIX, idle=True, limit=2)[0]) == 2


def test_snapshot_shows_keys_redlease_did_not_write_instead_of_failing(client: redis.Redis) -> None:
    client.hset(f"{PREFIX}:{{orders:1}}:lock", "not", "ours")  # a hash where a string belongs
    client.set(f"{PREFIX}:{{}}:lock", "x")  # an empty name: no primitive can have it
    rows, _ = snapshot(client, PREFIX)
    assert [(r.name, r.held_by) for r in rows] == [
        ("", "not a valid name"),
        ("orders:1", "foreign data"),
    ]


def test_snapshot_counts_a_lock_waiter(client: redis.Redis) -> None:
    lock = redlease.Lock(client, "busy", prefix=PREFIX, ttl=30)
    waiter = redlease.Lock(client, "busy", prefix=PREFIX, ttl=30)
    got: list[bool] = []

    def wait_then_release() -> None:  # a lock belongs to the thread that acquired it
        got.append(waiter.acquire(timeout=10))
        if got[-1]:
            waiter.release()

    assert lock.acquire(timeout=5)
    thread = threading.Thread(target=wait_then_release)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while lock.inspect().waiters == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        rows, _ = snapshot(client, PREFIX)
        who = lock.inspect().held_by
    finally:
        lock.release()
        thread.join(timeout=15)
    assert got == [True] and who is not None
    holder = f"{who.host}:{who.pid} {who.thread}"
    assert [(r.name, r.held_by, r.waiters) for r in rows] == [("busy", holder, "1")]
