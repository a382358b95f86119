"""Run a chaos schedule: servers, proxies, worker processes, three fault lanes, the checker.

Everything is on 127.0.0.1 and bounded: the run stops at ``max_seconds`` whatever happened,
every process it started is stopped (SIGKILL if it will not stop), every server stopped and
every proxy closed.

Topology: lock servers (1 for ``Lock``, 5 for ``Redlock``) run with ``appendonly yes`` (so a
crashed server comes back with its data), each behind a :class:`ChaosProxy`; workers reach
them only through the proxies. The protected resource is a separate server that is never
faulted (the database the lock protects) holding one :class:`redlease.FencedStore` per name;
its ``TIME`` is the clock of the history.

After ``restart-empty`` of the one ``Lock`` server, the harness does what an operator must:
it keeps the clients out (the proxy stalls) until it has set each name's fencing counter back
above every fence issued before (read just before the restart, plus a margin), so fences keep
increasing. (Letting clients in first let the empty server hand out fences issued before, one
of them equal to the newest the store had accepted, which the store accepts again: a stale
write, seen once in a run.) Redlock needs no such step: a server that lost its counters does
not count toward a fence until the others write the fence back to it (see docs/safety.md; the
100,000-operation run before that rule found three stale writes).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import redis

from redlease._core.lock import LockKeys
from tests.topology import RedisClusterServers, RedisServer

from . import worker as worker_mod
from .history import Report, check, parse
from .proxy import ChaosProxy
from .schedule import KINDS, LANES, Planned, plan

__all__ = ["ChaosConfig", "Outcome", "run", "summary"]

SPAWN = multiprocessing.get_context("spawn")
RESTORE_MARGIN = 1000  # fences the counter is raised by after an empty restart (Lock)


@dataclass(frozen=True)
class ChaosConfig:
    """One run. ``ops``: stop once this many acquire -> write -> release cycles completed and
    every kind was injected ``min_faults`` times (or at ``max_seconds``)."""

    target: str = "lock"  # "lock", "redlock" (5 servers) or "cluster" (3 masters + 3 replicas)
    seed: int = 1
    ops: int = 2000
    min_faults: int = 20
    workers: int = 4
    names: tuple[str, ...] = ("hot-0", "hot-1", "hot-2")
    ttl: float = 0.5
    fenced: bool = True
    max_seconds: float = 120.0
    gap: float = 0.6  # seconds between two faults of one lane
    kinds: tuple[str, ...] = KINDS
    progress: Callable[[str], None] | None = None


@dataclass
class Outcome:
    """A run's report plus what the harness itself counted."""

    config: ChaosConfig
    report: Report
    ops: int
    seconds: float
    injected: Counter[str] = field(default_factory=Counter)
    complete: bool = False  # reached ops and min_faults before max_seconds
    notes: list[str] = field(default_factory=list)


class _Run:
    def __init__(self, config: ChaosConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.resource = RedisServer()
        count = {"lock": 1, "redlock": 5, "cluster": 0}[config.target]
        self.servers = [
            RedisServer(appendonly=True, appendfsync="no", config={"hz": "50"})
            for _ in range(count)
        ]
        # The cluster target: the test fixtures' cluster, reached directly (no proxies: the
        # client learns every node's real address from CLUSTER SLOTS, so a proxy in front of
        # the start-up nodes would be bypassed). Hence only the process and server lanes.
        self.cluster: RedisClusterServers | None = None
        if config.target == "cluster":
            self.cluster = RedisClusterServers(masters=3, replicas_per_master=1)
        self.proxies: list[ChaosProxy] = []
        self.state = SPAWN.Array("i", config.workers, lock=False)
        # Lock-free shared memory: a worker stopped or killed while holding a lock would hang
        # everyone on it (see worker.run). One counter per slot, summed here.
        self.ops = SPAWN.Array("q", config.workers, lock=False)
        self.stop_workers = SPAWN.Value("b", 0, lock=False)
        self.stop_faults = threading.Event()
        self.procs: list[Any] = [None] * config.workers
        self.generation = [0] * config.workers
        self.procs_lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self._local = threading.local()  # per lane: server time the current fault started
        self.fault_lines: list[str] = []
        self.notes: list[str] = []
        self.rng = random.Random(config.seed)

    # -- set-up and tear-down ---------------------------------------------------------------
    def start(self) -> None:
        self.resource.start()
        if self.cluster is not None:
            self.cluster.start()
        for srv in self.servers:
            srv.start()
            self.proxies.append(ChaosProxy(srv.port))
        for slot in range(self.config.workers):
            self._spawn(slot)

    def close(self) -> None:
        self.stop_faults.set()
        self.stop_workers.value = 1
        for srv in self.servers:
            with contextlib.suppress(Exception):
                if srv.paused:
                    srv.resume()
        with self.procs_lock:
            procs = [p for p in self.procs if p is not None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 10
        for proc in procs:
            proc.join(max(0.1, deadline - time.monotonic()))
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for proxy in self.proxies:
            proxy.close()
        for srv in [*self.servers, self.resource]:
            with contextlib.suppress(Exception):
                srv.stop()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                for srv in self.cluster.nodes:
                    if srv.paused:
                        srv.resume()
            self.cluster.close()

    def _spawn(self, slot: int) -> None:
        gen = self.generation[slot]
        self.generation[slot] += 1
        name = f"w{slot}.{gen}"
        cfg = worker_mod.WorkerConfig(
            worker=name,
            slot=slot,
            lock_urls=tuple(p.url for p in self.proxies),
            cluster_ports=tuple(n.port for n in self.cluster.nodes) if self.cluster else (),
            resource_url=self.resource.url,
            names=self.config.names,
            ttl=self.config.ttl,
            fenced=self.config.fenced,
            history=str(self.workdir / f"{name}.jsonl"),
            seed=self.config.seed * 1000 + slot * 100 + gen,
        )
        self.state[slot] = worker_mod.IDLE
        proc = SPAWN.Process(
            target=worker_mod.run,
            args=(cfg, self.state, self.ops, self.stop_workers),
            name=name,
            daemon=True,
        )
        proc.start()
        with self.procs_lock:
            self.procs[slot] = proc

    # -- faults -----------------------------------------------------------------------------
    def _now(self, client: redis.Redis) -> int:
        seconds, micros = client.time()
        return int(seconds) * 1_000_000 + int(micros)

    def _lane(self, lane: str) -> None:
        clock = self.resource.client()
        kinds = set(self.config.kinds)
        try:
            for planned in plan(self.config.seed, lane, self.config.ttl):
                if self.stop_faults.wait(self.config.gap):
                    return
                if planned.kind not in kinds:
                    continue
                self._local.start = self._now(clock)  # a holder fault moves it to the signal
                target = self._apply(planned)
                if target is None:
                    continue
                start, end = self._local.start, self._now(clock)
                self.injected[planned.kind] += 1
                self.fault_lines.append(
                    f'{{"ev":"fault","kind":"{planned.kind}","start":{start},"end":{end},'
                    f'"target":"{target}"}}'
                )
        except Exception as exc:  # a lane that dies must not hang the run: note it
            self.notes.append(f"{lane} lane stopped: {type(exc).__name__}: {exc}")
        finally:
            clock.close()

    def _apply(self, f: Planned) -> str | None:
        """Inject one fault; its target's description, or None if it could not be placed."""
        if f.kind in ("pause", "kill"):
            return self._hit_holder(f)
        if self.cluster is not None:
            return self._cluster_fault(f)
        index = int(f.pick * len(self.servers))
        srv, proxy = self.servers[index], self.proxies[index]
        target = f"server {index}"
        if f.kind == "stop":
            srv.kill()  # a crash: the append-only file is kept
            self._sleep(f.length)
            srv.start()
        elif f.kind == "restart-empty":
            self._restart_empty(srv, proxy)
        elif f.kind == "hang":
            srv.pause()
            self._sleep(f.length)
            srv.resume()
        elif f.kind == "latency":
            proxy.latency(f.amount)
            self._sleep(f.length)
            proxy.latency(0)
        elif f.kind == "stall":
            proxy.stall()
            self._sleep(f.length)
            proxy.resume()
        elif f.kind == "drop":
            proxy.drop()
        else:  # pragma: no cover
            raise ValueError(f"unknown fault {f.kind!r}")
        return target

    def _cluster_fault(self, f: Planned) -> str | None:
        """``stop``: SIGKILL the master of a slot, wait for its replica to take over, wait
        ``length``, bring the old master back (as a replica); ``hang``: SIGSTOP a master for
        ``length``. Other kinds have no cluster form here (None: not injected)."""
        assert self.cluster is not None
        masters = self.cluster.masters
        srv = masters[int(f.pick * len(masters))]
        target = f"node {srv.port}"
        if f.kind == "stop":
            self.cluster.kill_master_of(self._key_on(srv))
            self._sleep(f.length)
            self.cluster.heal()
        elif f.kind == "hang":
            srv.pause()
            self._sleep(f.length)
            srv.resume()
            self.cluster.wait_healthy()
        else:
            return None
        return target

    def _key_on(self, srv: RedisServer) -> str:
        """A key whose slot ``srv`` owns (one of the run's lock keys if possible)."""
        assert self.cluster is not None
        for name in self.config.names:
            key = LockKeys.build("redlease", name.encode()).lock
            if self.cluster.master_of(key) is srv:
                return key.decode()
        for i in range(10_000):
            if self.cluster.master_of(f"{{k{i}}}") is srv:
                return f"{{k{i}}}"
        raise RuntimeError(f"no key found on {srv!r}")

    def _sleep(self, seconds: float) -> None:
        self.stop_faults.wait(seconds)

    def _hit_holder(self, f: Planned) -> str | None:
        slot = self._find_holder(f.pick)
        if slot is None:
            return None
        with self.procs_lock:
            proc = self.procs[slot]
        if proc is None or proc.pid is None:
            return None
        with self.resource.client() as clock:
            self._local.start = self._now(clock)  # the fault starts now, not the search
        if f.kind == "pause":
            os.kill(proc.pid, signal.SIGSTOP)
            self._sleep(f.length)
            os.kill(proc.pid, signal.SIGCONT)
        else:
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(5)
            if not self.stop_faults.is_set():
                self._spawn(slot)
        return proc.name  # type: ignore[no-any-return]

    def _find_holder(self, pick: float) -> int | None:
        """A worker that holds a lock and has not written yet (polled for up to 2 s)."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not self.stop_faults.is_set():
            working = [i for i in range(self.config.workers) if self.state[i] == 1]
            if working:
                return working[int(pick * len(working))]
            time.sleep(0.001)
        return None

    def _restart_empty(self, srv: RedisServer, proxy: ChaosProxy) -> None:
        restore = self.config.target == "lock"  # (cluster: no restart-empty, see _apply)
        keys = [LockKeys.build("redlease", n.encode()).fence for n in self.config.names]
        before: list[Any] = []
        if restore:
            with srv.client(socket_timeout=2) as c:
                before = c.mget(keys)
            # The operator keeps clients out until the counters are restored: otherwise the
            # empty server hands out fences that were issued before (the very ones the store
            # last accepted, which it accepts again: a fence equal to the newest is allowed).
            proxy.stall()
        try:
            srv.restart(empty=True)
            if restore:  # the operator's step: fences must keep increasing
                with srv.client(socket_timeout=2) as c:
                    for key, value in zip(keys, before, strict=True):
                        c.set(key, int(value or 0) + RESTORE_MARGIN)
        finally:
            if restore:
                proxy.resume()

    # -- the run ----------------------------------------------------------------------------
    def go(self) -> Outcome:
        cfg = self.config
        started = time.monotonic()
        lanes = [
            threading.Thread(target=self._lane, args=(lane,), name=f"lane-{lane}", daemon=True)
            for lane, kinds in LANES.items()
            if set(kinds) & set(cfg.kinds)
        ]
        for t in lanes:
            t.start()
        complete = False
        last = started
        while time.monotonic() - started < cfg.max_seconds:
            done_ops = sum(self.ops) >= cfg.ops
            done_faults = all(self.injected[k] >= cfg.min_faults for k in cfg.kinds)
            if done_ops and done_faults:
                complete = True
                break
            if cfg.progress and time.monotonic() - last >= 5:
                last = time.monotonic()
                faults = sum(self.injected.values())
                cfg.progress(f"{last - started:6.0f}s  ops {sum(self.ops):>7}  faults {faults:>5}")
            time.sleep(0.05)
        self.stop_faults.set()
        for t in lanes:
            t.join(30)
        seconds = time.monotonic() - started
        self.close()
        (self.workdir / "faults.jsonl").write_text("".join(f"{x}\n" for x in self.fault_lines))
        lines: list[str] = []
        for path in sorted(self.workdir.glob("*.jsonl")):
            lines.extend(path.read_text().splitlines())
        report = check(parse(lines))
        if not complete:
            self.notes.append(f"stopped at max_seconds={cfg.max_seconds:g}")
        return Outcome(cfg, report, sum(self.ops), seconds, self.injected, complete, self.notes)


def run(config: ChaosConfig, workdir: str | Path | None = None) -> Outcome:
    """Run one schedule; the history files go to ``workdir`` (a temporary one if None)."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="redlease-chaos-"))
        path = Path(workdir)
        path.mkdir(parents=True, exist_ok=True)
        chaos = _Run(config, path)
        try:
            chaos.start()
            return chaos.go()
        finally:
            chaos.close()


def summary(outcome: Outcome) -> str:
    """A plain-text table of one run."""
    cfg, rep = outcome.config, outcome.report
    target = {
        "lock": "Lock (1 server)",
        "redlock": "Redlock (5 servers)",
        "cluster": "Lock on Redis Cluster (3 masters + 3 replicas)",
    }[cfg.target]
    check_kind = "fenced store" if cfg.fenced else "UNFENCED twin"
    rows = [
        ("target", f"{target}, {check_kind}, ttl {cfg.ttl:g} s"),
        ("seed / workers / names", f"{cfg.seed} / {cfg.workers} / {len(cfg.names)}"),
        ("wall time", f"{outcome.seconds:.1f} s ({'complete' if outcome.complete else 'cut'})"),
        ("acquire -> write -> release cycles", f"{outcome.ops}"),
        (
            "writes: attempted / accepted / refused",
            f"{rep.writes} / {rep.accepted} / {rep.refused}",
        ),
        (
            "holds: total / lost at release / open (killed)",
            f"{rep.holds} / {rep.lost} / {rep.open_holds}",
        ),
        ("faults injected", ", ".join(f"{k} {outcome.injected[k]}" for k in cfg.kinds)),
        (
            "OVERLAPPING HOLDS: pairs / holds cut short",
            f"{len(rep.overlaps)} / {len({(o.first.worker, o.first.hold) for o in rep.overlaps})}",
        ),
        ("  near faults", _counts(rep.overlap_causes)),
        ("STALE WRITES ACCEPTED", f"{len(rep.stale)}"),
        ("refused writes, near faults", _counts(rep.refused_causes)),
        ("errors", _counts(rep.errors)),
    ]
    width = max(len(k) for k, _ in rows)
    text = [f"{k:<{width}}  {v}" for k, v in rows]
    text.extend(f"note: {n}" for n in outcome.notes)
    for st in rep.stale[:3]:
        w = st.write
        text.append(
            f"  stale: {w.worker} hold {w.hold} wrote {w.name} with fence {w.fence} at version "
            f"{w.version}, after fence {st.mark} of {st.mark_hold[0]} hold {st.mark_hold[1]}"
        )
    return "\n".join(text)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common()) or "-"


def with_overrides(config: ChaosConfig, **changes: Any) -> ChaosConfig:
    """``config`` with some fields changed."""
    return replace(config, **changes)
