"""Fencing a SQL row with a redlease lock: the check lives in the UPDATE itself.

    python examples/fenced_sqlite.py                   # starts its own embedded server
    python examples/fenced_sqlite.py --url redis://127.0.0.1:6379

The pattern (docs/fencing.md has the PostgreSQL form):

* the protected row has a ``fence`` column (0 for a new row);
* every write under the lock is ``UPDATE ... SET ..., fence = :fence WHERE id = :id AND
  fence <= :fence``, so it applies only if no newer holder has written;
* the writer checks ``rowcount``: 0 means its lock was lost and a newer holder wrote first.
  Nothing was changed; it must not retry with the same fence.

The scenario played twice, with the check and without (the twin): holder A reads the invoice,
then pauses (a GC pause, SIGSTOP, a VM migration) until its lease runs out; holder B takes the
lock, adds 10 and writes; A resumes and writes what it computed before the pause.
With the fence, A's write matches no row and B's update stands. Without it, A silently
overwrites B's work: the lost update a lock alone cannot prevent.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import time
from dataclasses import dataclass

import redis

import redlease

SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    id    INTEGER PRIMARY KEY,
    total INTEGER NOT NULL,
    fence INTEGER NOT NULL DEFAULT 0   -- the highest fence that wrote this row
)
"""


def fenced_update(db: sqlite3.Connection, invoice: int, total: int, fence: int) -> bool:
    """Write ``total`` if ``fence`` is at least the row's; False if a newer holder wrote."""
    cursor = db.execute(
        "UPDATE invoices SET total = :total, fence = :fence WHERE id = :id AND fence <= :fence",
        {"total": total, "fence": fence, "id": invoice},
    )
    db.commit()
    return cursor.rowcount == 1


def fenced_upsert(db: sqlite3.Connection, invoice: int, total: int, fence: int) -> bool:
    """Insert the row, or update it if ``fence`` is at least the row's (SQLite >= 3.24)."""
    cursor = db.execute(
        "INSERT INTO invoices (id, total, fence) VALUES (:id, :total, :fence) "
        "ON CONFLICT (id) DO UPDATE SET total = excluded.total, fence = excluded.fence "
        "WHERE invoices.fence <= excluded.fence",
        {"total": total, "fence": fence, "id": invoice},
    )
    db.commit()
    return cursor.rowcount == 1


def unfenced_update(db: sqlite3.Connection, invoice: int, total: int, fence: int) -> bool:
    """The twin: the same write without the fence condition (what most code does)."""
    cursor = db.execute(
        "UPDATE invoices SET total = :total WHERE id = :id", {"total": total, "id": invoice}
    )
    db.commit()
    return cursor.rowcount == 1


def total_of(db: sqlite3.Connection, invoice: int) -> int:
    """The invoice's total now."""
    row = db.execute("SELECT total FROM invoices WHERE id = ?", (invoice,)).fetchone()
    return int(row[0])


@dataclass(frozen=True)
class Outcome:
    """What one run of the scenario did."""

    fenced: bool
    stale_write_applied: bool  # A's late write changed the row
    fresh_write_applied: bool
    final_total: int  # 110 when B's update stands, 105 when A's stale write overwrote it


def scenario(client: redis.Redis, *, fenced: bool, name: str = "invoice:42") -> Outcome:
    """Play the paused-holder scenario on a fresh in-memory database."""
    write = fenced_update if fenced else unfenced_update
    db = sqlite3.connect(":memory:")
    try:
        db.execute(SCHEMA)
        assert fenced_upsert(db, 42, 100, 0)

        holder_a = redlease.Lock(client, name, ttl=0.2, renew=False)  # a pause stops renewals
        holder_a.acquire()
        fence_a = holder_a.fence
        assert fence_a is not None
        planned_by_a = total_of(db, 42) + 5  # A reads 100, plans 105, then pauses...
        while client.exists(f"redlease:{{{name}}}:lock"):  # ...until its lease runs out
            time.sleep(0.02)

        with redlease.Lock(client, name, ttl=5.0, timeout=5.0) as holder_b:
            assert holder_b.fence is not None
            fresh = write(db, 42, total_of(db, 42) + 10, holder_b.fence)  # B: 100 -> 110

        stale = write(db, 42, planned_by_a, fence_a)  # A resumes and writes 105
        with contextlib.suppress(redlease.LockLost):
            holder_a.release()  # A learns it lost the lock only now, after its write
        return Outcome(fenced, stale, fresh, total_of(db, 42))
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    """Run the scenario with and without the fence check and print what happened."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="Redis URL (default: start an embedded server)")
    args = parser.parse_args(argv)
    if args.url:
        client = redis.Redis.from_url(args.url)
        outcomes = [scenario(client, fenced=True), scenario(client, fenced=False)]
    else:
        from redlease.server import RedisServer

        with RedisServer() as server:
            client = server.client()
            outcomes = [scenario(client, fenced=True), scenario(client, fenced=False)]
            client.close()
    for o in outcomes:
        label = "with fence check   " if o.fenced else "without (the twin) "
        verdict = "stale write refused" if not o.stale_write_applied else "STALE WRITE APPLIED"
        print(f"{label}: final total {o.final_total} (expected 110) - {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
