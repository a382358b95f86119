"""``--why``: what started each attempt round of redlease's Redlock, counted inside the
contending workers."""

from __future__ import annotations

import inspect
from typing import Any


class Trace:
    """Counters inside one redlease worker (``--why``): per acquisition, the attempt rounds by
    outcome (won, refused, split) and by what started each (the first try, a wake-up message,
    a timer), and the wake-up messages this process read, by kind (see ``_core/waiters.py``).

    It wraps the Redlock's ``_acquire``/``_try`` and the waiter table's methods in this
    process only; a few dict updates per round, so it is off unless asked for.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.why: str | None = None

    def add(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def install(self, lib: str) -> None:
        import redlease
        import redlease.asyncio
        from redlease._core.waiters import Action, WaiterTable

        trace = self
        on_message, due, plan = WaiterTable.on_message, WaiterTable.due, WaiterTable.plan
        refused, disconnect = WaiterTable.refused, WaiterTable.on_disconnect

        def traced_message(table: Any, data: bytes, now: float) -> list[Any]:
            kind = data[:1].decode("ascii", "replace")
            trace.add(f"message {kind}")
            woken = on_message(table, data, now)
            for waiter in woken:
                waiter.why = kind
            if kind == "N":
                for waiter in table.waiters():
                    if waiter.token == data[1:].partition(b" ")[0]:
                        waiter.check_why = "N window"
            return woken

        def traced_due(table: Any, now: float) -> list[Any]:
            woken = due(table, now)
            for waiter in woken:
                waiter.why = getattr(waiter, "check_why", "?") + " lapsed (hub)"
            return woken

        def traced_disconnect(table: Any) -> list[Any]:
            woken = disconnect(table)
            for waiter in woken:
                waiter.why = "disconnect"
            return woken

        def traced_refused(waiter: Any, held: bool, ms: int, now: float) -> None:
            if not held:
                waiter.check_why = "reservation"
            refused(waiter, held, ms, now)

        def traced_plan(waiter: Any, deadline: Any, now: float, fallback: float) -> Any:
            woken, check = waiter.woken, waiter.check_at
            step = plan(waiter, deadline, now, fallback)
            if step[0] is Action.ATTEMPT and trace.why is None:
                if woken:
                    trace.why = "woken: " + str(getattr(waiter, "why", "?"))
                elif check is not None and check <= now:
                    trace.why = "timer: " + getattr(waiter, "check_why", "?") + " lapsed"
                else:
                    trace.why = "timer: lease end"
            return step

        WaiterTable.on_message = traced_message  # type: ignore[method-assign]
        WaiterTable.due = traced_due  # type: ignore[method-assign]
        WaiterTable.on_disconnect = traced_disconnect  # type: ignore[method-assign]
        WaiterTable.refused = staticmethod(traced_refused)  # type: ignore[method-assign]
        WaiterTable.plan = staticmethod(traced_plan)  # type: ignore[method-assign]

        cls: Any = redlease.asyncio.Redlock if lib == "redlease-async" else redlease.Redlock
        acquire, attempt = cls._acquire, cls._try

        def outcome(join: bool, found: Any) -> None:
            holding, tally = found
            kind = "won" if holding is not None else "split" if tally.granted else "refused"
            why = trace.why or ("first try" if trace.counts.get("_fresh") else "no sleep")
            trace.counts["_fresh"] = 0
            trace.why = None
            trace.add(f"round {kind} <- {why}")
            trace.add(f"rounds {kind}")

        if inspect.iscoroutinefunction(acquire):

            async def traced_acquire(lock: Any, *args: Any) -> Any:
                trace.counts["_fresh"], trace.why = 1, None
                holding = await acquire(lock, *args)
                trace.add("acquisitions" if holding is not None else "gave up")
                return holding

            async def traced_try(lock: Any, *args: Any, join: bool, ticket: str) -> Any:
                found = await attempt(lock, *args, join=join, ticket=ticket)
                outcome(join, found)
                return found

        else:

            def traced_acquire(lock: Any, *args: Any) -> Any:  # type: ignore[misc]
                trace.counts["_fresh"], trace.why = 1, None
                holding = acquire(lock, *args)
                trace.add("acquisitions" if holding is not None else "gave up")
                return holding

            def traced_try(lock: Any, *args: Any, join: bool, ticket: str) -> Any:  # type: ignore[misc]
                found = attempt(lock, *args, join=join, ticket=ticket)
                outcome(join, found)
                return found

        cls._acquire, cls._try = traced_acquire, traced_try
        self._count_scripts(lib, cls)

    def _count_scripts(self, lib: str, cls: Any) -> None:
        """Scripts sent by this process, by name: in rounds, and behind late calls."""
        import redlease._fanout as fanout

        trace = self
        fan: Any = fanout.AsyncFanOut if lib == "redlease-async" else fanout.FanOut
        run, follow = fan.run, fan.follow

        def counted(calls: Any) -> None:
            for call in calls:
                trace.add(f"script {call[1].name}")

        if lib == "redlease-async":

            async def traced_run(calls: Any, *args: Any, **kwargs: Any) -> Any:
                counted(calls)
                return await run(calls, *args, **kwargs)

            async def traced_follow(late: Any, script: Any, *args: Any) -> Any:
                sent = await follow(late, script, *args)
                if sent:
                    trace.add(f"script {script.name} (behind a late one)")
                return sent

        else:

            def traced_run(calls: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                counted(calls)
                return run(calls, *args, **kwargs)

            def traced_follow(late: Any, script: Any, *args: Any) -> Any:  # type: ignore[misc]
                sent = follow(late, script, *args)
                if sent:
                    trace.add(f"script {script.name} (behind a late one)")
                return sent

        fan.run, fan.follow = staticmethod(traced_run), staticmethod(traced_follow)

    def reset(self) -> None:
        """Forget the warm-up's counts."""
        self.counts = {}


def why_figures(traces: list[dict[str, int]]) -> dict[str, float]:
    """The workers' counts summed, per acquisition."""
    total: dict[str, int] = {}
    for counts in traces:
        for key, value in counts.items():
            if not key.startswith("_"):
                total[key] = total.get(key, 0) + value
    acquisitions = max(1, total.get("acquisitions", 0))
    out = {key: value / acquisitions for key, value in sorted(total.items())}
    out["acquisitions"] = total.get("acquisitions", 0)
    return out
