"""Rebuild a cache without a stampede: one process recomputes, the others wait and reuse it.

Eight workers find the cache empty at the same moment. Each takes the lock, checks the cache
again (another may have filled it while it waited), and only recomputes when still empty:
the expensive rebuild runs once. Run it::

    python examples/cache_rebuild.py [--url redis://127.0.0.1:6379]

(with no --url an embedded server is started). The twin, ``locked=False``, shows every worker
recomputing. :func:`scenario_cached` does the same with ``redlease.cached``, which writes the
recipe for you (and adds fenced writes, ``stale=`` and ``invalidate``).
"""

from __future__ import annotations

import argparse
import threading
import time

import redis

import redlease


def scenario(
    client: redis.Redis, *, workers: int = 8, locked: bool = True, name: str = "page"
) -> int:
    """Run ``workers`` threads reading the cached value; return how many times it was rebuilt."""
    key = f"cache:{name}"
    client.delete(key)
    lock = redlease.Lock(client, f"rebuild:{name}", ttl=10, timeout=30)
    rebuilds = []
    start = threading.Barrier(workers)

    def rebuild() -> bytes:
        rebuilds.append(1)
        time.sleep(0.1)  # the expensive query
        value = b"rendered"
        client.set(key, value, ex=60)
        return value

    def read() -> bytes:
        start.wait()
        cached = client.get(key)
        if cached is not None:
            return cached
        if not locked:
            return rebuild()
        with lock:
            cached = client.get(key)  # filled while we waited?
            return cached if cached is not None else rebuild()

    threads = [threading.Thread(target=read) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return len(rebuilds)


def scenario_cached(client: redis.Redis, *, workers: int = 8) -> int:
    """The same workers calling a ``redlease.cached`` function; return the rebuild count."""
    rebuilds = []
    start = threading.Barrier(workers)

    @redlease.cached(client, ttl=60, name="page")  # defined inside a function: named
    def page(name: str) -> str:
        rebuilds.append(1)
        time.sleep(0.1)  # the expensive query
        return "rendered"

    page.invalidate("home")

    def read() -> None:
        start.wait()
        assert page("home") == "rendered"

    threads = [threading.Thread(target=read) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return len(rebuilds)


def main(argv: list[str] | None = None) -> int:
    """Run the scenario with and without the lock and print the rebuild counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="Redis URL (default: start an embedded server)")
    args = parser.parse_args(argv)
    if args.url:
        client = redis.Redis.from_url(args.url)
        counts = [scenario(client, locked=flag) for flag in (True, False)]
        counts.append(scenario_cached(client))
        redlease.close(client)
        client.close()
    else:
        from redlease.server import RedisServer

        with RedisServer() as server:
            client = server.client()
            counts = [scenario(client, locked=flag) for flag in (True, False)]
            counts.append(scenario_cached(client))
            redlease.close(client)
            client.close()
    print(f"rebuilds with the lock: {counts[0]}; without: {counts[1]}; cached: {counts[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
