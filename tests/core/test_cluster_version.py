"""The cluster's version check (no older server is available here: the check is pure)."""

from __future__ import annotations

import pytest

from redlease._core.cluster import server_version, sharded_pubsub_refusal


def info(version: str) -> str:
    return f"# Server\r\nredis_version:{version}\r\nredis_mode:cluster\r\nrun_id:abc\r\n"


@pytest.mark.parametrize("version", ["7.0.0", "7.0.15", "7.2.4", "8.1.0", "10.0.0"])
def test_a_node_with_sharded_pubsub_is_accepted(version: str) -> None:
    assert sharded_pubsub_refusal(info(version), "10.0.0.1:7000") is None


@pytest.mark.parametrize("version", ["6.2.14", "6.0.0", "5.0.7", "3.2.1"])
def test_an_older_node_is_refused_naming_the_node_its_version_and_the_requirement(
    version: str,
) -> None:
    message = sharded_pubsub_refusal(info(version).encode(), "10.0.0.1:7000")
    assert message is not None
    assert "Redis >= 7.0" in message and "SPUBLISH" in message
    assert f"node 10.0.0.1:7000 runs {version}" in message


def test_valkey_reports_a_redis_version_that_passes() -> None:
    """valkey 8 says redis_version:7.2.4 (and valkey_version:8.x): accepted."""
    reply = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.8\r\n"
    assert sharded_pubsub_refusal(reply, "n") is None


@pytest.mark.parametrize("reply", ["", "# Server\r\nrun_id:abc\r\n", info("7.0-rc1"), info("")])
def test_a_version_that_cannot_be_read_is_not_refused(reply: str) -> None:
    assert server_version(reply) is None
    assert sharded_pubsub_refusal(reply, "n") is None


def test_server_version_reads_the_numbers() -> None:
    assert server_version(info("6.2.14")) == (6, 2, 14)
    assert server_version(b"redis_version:7.0.0\n") == (7, 0, 0)
