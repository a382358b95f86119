"""Cap concurrency to N across processes: a redlease Semaphore around a scarce resource.

Eight workers each call a "backend" that tolerates at most ``permits`` callers at once; every
call runs holding one of the semaphore's permits, so the peak never exceeds it. Run it::

    python examples/cap_concurrency.py [--url redis://127.0.0.1:6379] [--permits 3]

(with no --url an embedded server is started). The twin, ``capped=False``, shows the peak the
backend sees without the semaphore.
"""

from __future__ import annotations

import argparse
import threading
import time

import redis

import redlease


def scenario(
    client: redis.Redis,
    *,
    permits: int = 3,
    workers: int = 8,
    capped: bool = True,
    name: str = "backend",
) -> int:
    """Run ``workers`` threads calling the backend once each; return the peak concurrency."""
    semaphore = redlease.Semaphore(client, name, permits, ttl=10, timeout=30)
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}
    start = threading.Barrier(workers)

    def call_backend() -> None:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)  # the scarce work
        with lock:
            state["now"] -= 1

    def worker() -> None:
        start.wait()
        if capped:
            with semaphore:
                call_backend()
        else:
            call_backend()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return state["peak"]


def main(argv: list[str] | None = None) -> int:
    """Run the scenario capped and uncapped and print both peaks."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="Redis URL (default: start an embedded server)")
    parser.add_argument("--permits", type=int, default=3, help="callers allowed at once")
    args = parser.parse_args(argv)
    if args.url:
        client = redis.Redis.from_url(args.url)
        peaks = [scenario(client, permits=args.permits, capped=c) for c in (True, False)]
        client.close()
    else:
        from redlease.server import RedisServer

        with RedisServer() as server:
            client = server.client()
            peaks = [scenario(client, permits=args.permits, capped=c) for c in (True, False)]
            client.close()
    print(f"peak with the semaphore: {peaks[0]} (permits {args.permits}); without: {peaks[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
