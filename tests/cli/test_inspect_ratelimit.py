"""``redlease inspect NAME --kind ratelimit``: a subject's state under each limit, real server."""

from __future__ import annotations

import json

import pytest
import redis

import redlease
from redlease.cli import main
from tests.topology import RedisServer


@pytest.mark.parametrize("algorithm", ["fixed", "sliding", "gcra", "token_bucket"])
def test_inspect_shows_each_limit_and_takes_nothing(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str], algorithm: str
) -> None:
    limiter = redlease.RateLimiter(client, "api", rate="2/minute;10/hour", algorithm=algorithm)
    limiter.hit("user:1")
    limiter.hit("user:1")
    args = ["--url", server.url, "inspect", "api", "--kind", "ratelimit", "--subject", "user:1"]
    args += ["--rate", "2/minute;10/hour", "--algorithm", algorithm]
    assert main([*args, "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert (state["kind"], state["subject"], state["allowed"]) == ("ratelimit", "user:1", False)
    minute, hour = state["limits"]
    assert (minute["rate"], minute["remaining"], minute["allowed"]) == ("2/1 minute", 0, False)
    assert minute["retry_after"] > 0
    assert (hour["limit"], hour["remaining"], hour["allowed"]) == (10, 8, True)
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "refused" in text and "0 of 2 left" in text and "8 of 10 left" in text
    assert limiter.peek("user:1").limits[1].remaining == 8  # inspecting took nothing


def test_inspect_ratelimit_needs_its_options(
    server: RedisServer, client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--url", server.url, "inspect", "api", "--kind", "ratelimit"]
    assert main([*base, "--rate", "1/second"]) == 2
    assert "--subject and --rate" in capsys.readouterr().err
    assert main([*base, "--subject", "s", "--rate", "1/fortnight"]) == 2
    assert "rate must be limits" in capsys.readouterr().err
    assert main([*base, "--subject", "s", "--rate", "1/second", "--algorithm", "leaky"]) == 2
    assert "algorithm must be one of" in capsys.readouterr().err
