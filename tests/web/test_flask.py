"""redlease.flask and redlease.wsgi on real apps: Flask's test client, and a real WSGI server
(waitress, in a process of its own) on loopback; Redis hung (SIGSTOP) for the outage checks."""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

flask = pytest.importorskip("flask")
pytest.importorskip("waitress")

import redlease.flask  # noqa: E402
import redlease.wsgi  # noqa: E402
from tests.topology import RedisServer  # noqa: E402
from tests.web.conftest import Decisions  # noqa: E402

pytestmark = pytest.mark.timeout(90)

FAST = 0.5
"""A request that asks no Redis takes milliseconds; one that waits a 1 s timeout, seconds."""
FIELDS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy")


def make_app(client: Any, **options: Any) -> tuple[Any, redlease.flask.RateLimit]:
    app = flask.Flask(__name__)
    limits = redlease.flask.RateLimit(app, client, **options)

    @app.get("/")
    def index() -> str:
        return "hello"

    @app.get("/search")
    @limits.limit("2/minute")
    def search() -> str:
        return "found"

    @app.get("/health")
    @limits.exempt
    def health() -> str:
        return "ok"

    @app.get("/async")
    @limits.limit("1/minute", name="async-view")
    async def slow() -> str:
        return "async"

    return app, limits


def test_the_app_limit_refuses_with_429_and_the_fields(client: redis.Redis) -> None:
    app, _ = make_app(client, rate="3/minute", on_unavailable="deny")
    web = app.test_client()
    answers = [web.get("/") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["RateLimit-Remaining"] for a in answers] == ["2", "1", "0", "0"]
    refused = answers[3]
    assert all(field in refused.headers for field in FIELDS)
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["RateLimit-Policy"] == "3;w=60"
    assert refused.get_data(as_text=True) == "Too Many Requests"
    assert web.get("/health").status_code == 200  # exempt from the app's limit
    assert "RateLimit-Limit" not in web.get("/health").headers


def test_a_views_own_limit_is_the_tighter_and_its_fields_win(client: redis.Redis) -> None:
    app, _ = make_app(client, rate="100/minute", on_unavailable="deny")
    web = app.test_client()
    answers = [web.get("/search") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert answers[0].headers["RateLimit-Policy"] == "2;w=60"  # the view's, not the app's
    assert web.get("/async").status_code == 200 and web.get("/async").status_code == 429
    assert web.get("/").headers["RateLimit-Policy"] == "100;w=60"


def test_shadow_mode_refuses_nothing_and_counts_what_it_would(
    client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="redlease")
    app, _ = make_app(client, rate="1/minute", on_unavailable="deny", mode="shadow")
    web = app.test_client()
    answers = [web.get("/") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert "RateLimit-Limit" not in answers[2].headers
    shadowed = [r for r in caplog.records if getattr(r, "redlease_event", "") == "ratelimit_shadow"]
    assert len(shadowed) == 2


def test_bad_options_fail_when_the_app_is_set_up(client: redis.Redis) -> None:
    with pytest.raises(ValueError, match="on_unavailable"):
        redlease.flask.RateLimit(flask.Flask(__name__), client, rate="1/s", on_unavailable="x")
    with pytest.raises(TypeError, match="client"):
        redlease.flask.RateLimit(flask.Flask(__name__), rate="1/s", on_unavailable="allow")
    limits = redlease.flask.RateLimit(None, client, on_unavailable="allow")
    with pytest.raises(ValueError):
        limits.limit("ten per second")
    with pytest.raises(TypeError, match="unexpected options"):
        limits.limit("1/second", colour="blue")
    with pytest.raises(TypeError, match=r"^key must be a function of the request, got str"):
        limits.limit("1/second", key="X-API-Key")


def test_bad_wsgi_options_fail_when_the_middleware_is_made(client: redis.Redis) -> None:
    app = flask.Flask(__name__).wsgi_app
    make = functools.partial(redlease.wsgi.RateLimitMiddleware, app, rate="1/second")
    with pytest.raises(ValueError, match="on_unavailable"):
        make(client, on_unavailable="x")
    with pytest.raises(TypeError, match=r"^client must be a redis-py client"):
        make(None, on_unavailable="allow")
    with pytest.raises(TypeError, match=r"^key must be a function of the environ, got str"):
        make(client, on_unavailable="allow", key="REMOTE_ADDR")
    with pytest.raises(ValueError, match=r"^backoff must be >= 0"):
        make(client, on_unavailable="allow", backoff=-1)


@pytest.mark.parametrize(("choice", "status"), [("allow", 200), ("deny", 503)])
def test_a_hung_redis_costs_one_timeout_then_answers_at_once(
    make_server: Any, decisions: Decisions, choice: str, status: int
) -> None:
    answers = hung(make_server, choice, backoff=30.0)
    assert [s for s, _ in answers] == [status] * 4
    first, *rest = (seconds for _, seconds in answers)
    assert first >= 0.9  # the failure itself: one socket timeout
    assert all(seconds < FAST for seconds in rest), rest  # then no Redis until the back-off
    assert decisions.calls.count(("http", choice)) == 4


def test_twin_without_the_backoff_each_request_waits_for_redis(make_server: Any) -> None:
    answers = hung(make_server, "allow", backoff=0)
    assert all(seconds >= 0.9 for _, seconds in answers)  # the check above catches it


def hung(make_server: Any, choice: str, *, backoff: float) -> list[tuple[int, float]]:
    """Four timed requests to ``/`` with Redis paused after the client connected."""
    srv: RedisServer = make_server()
    conn = redis.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    app, _ = make_app(conn, rate="100/minute", on_unavailable=choice, backoff=backoff)
    web = app.test_client()
    conn.ping()  # connected: a hang, not a refusal
    srv.pause()
    try:
        answers = []
        for _ in range(4 if backoff else 2):
            started = time.monotonic()
            answers.append((web.get("/").status_code, time.monotonic() - started))
        return answers
    finally:
        srv.resume()
        conn.close()


# -- a real WSGI server ------------------------------------------------------------------------

SERVED = """
import sys, redis, waitress, flask, redlease.flask, redlease.wsgi
port, redis_port, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
client = redis.Redis(port=redis_port, socket_timeout=0.5, socket_connect_timeout=0.5)
app = flask.Flask("served")

@app.get("/")
def index():
    return "hello"

if kind == "flask":
    redlease.flask.RateLimit(app, client, rate="2/minute", on_unavailable="deny")
    served = app
else:
    served = redlease.wsgi.RateLimitMiddleware(
        app.wsgi_app, client, rate="2/minute", on_unavailable="deny",
        key=redlease.wsgi.header("X-API-Key"),
    )
waitress.serve(served, host="127.0.0.1", port=port, threads=2, _quiet=True)
"""


@pytest.fixture(params=["flask", "wsgi"])
def served(request: Any, server: RedisServer, tmp_path: Path) -> Iterator[str]:
    """The app under waitress in a process of its own: its base URL."""
    redis.Redis(host=server.host, port=server.port).flushall()
    script = tmp_path / "served.py"
    script.write_text(textwrap.dedent(SERVED))
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), str(server.port), request.param]
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_serving(base)
        yield base
    finally:
        process.terminate()
        process.wait(10)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_serving(base: str) -> None:
    for _ in range(100):  # bounded: 10 s
        try:
            urllib.request.urlopen(base + "/health-probe", timeout=1)
        except urllib.error.HTTPError:
            return  # it answers (404, or a 429 already)
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{base} never answered")


def get(url: str, **headers: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}
    except urllib.error.HTTPError as refused:  # (field names are case-blind: waitress's
        return refused.code, {k.lower(): v for k, v in refused.headers.items()}  # casing)


def test_under_a_real_wsgi_server_the_third_request_gets_429(served: str) -> None:
    answers = [get(served + "/", **{"X-API-Key": "k1"}) for _ in range(3)]
    # (the probe counted too for the Flask app, keyed by address: it may be refused earlier)
    assert answers[-1][0] == 429
    assert "retry-after" in answers[-1][1] and "ratelimit-policy" in answers[-1][1]
    allowed = [headers for status, headers in answers if status == 200]
    assert allowed and all("ratelimit-remaining" in headers for headers in allowed)
