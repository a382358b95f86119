"""The ``redlease`` command on every topology: TLS (client certificate), Cluster, Sentinel.

``run``, ``inspect`` and ``demo`` go through :func:`redlease.cli._connection.make_client`; these
tests point them at the session's real topologies (tests/conftest.py) with the options and
with the URL forms, in-process through :func:`redlease.cli.main`. Only the URL parsing is
tested without a server (no I/O there).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

import redlease
from redlease.cli import main
from redlease.cli._connection import make_client, parse_url, redact
from tests.topology import RedisClusterServers, RedisServer, SentinelGroup, TLSFiles

pytestmark = pytest.mark.timeout(90)

RUN_OK = ["--", "python3", "-c", "import os; assert os.environ['REDLEASE_FENCE']"]


def inspected(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """``redlease ARGV... --json`` (an inspect): exit 0, the parsed JSON."""
    assert main([*argv, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


# -- URL forms (no server) ---------------------------------------------------------------------


def test_url_forms_name_their_topology() -> None:
    assert parse_url("redis://h:1/2").topology == "server"
    assert parse_url("unix:///tmp/r.sock").topology == "server"
    cluster = parse_url("rediss+cluster://u:p@h:7000?ssl_ca_certs=ca.pem")
    assert (cluster.topology, cluster.url) == ("cluster", "rediss://u:p@h:7000?ssl_ca_certs=ca.pem")
    sentinel = parse_url(
        "redis+sentinel://:pw@10.0.0.1:26379,[::1]:26380/my%20master/3?sentinel_password=s"
    )
    assert sentinel.topology == "sentinel"
    assert sentinel.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert sentinel.service == "my master"
    assert sentinel.url == "redis://:pw@127.0.0.1/3"  # the master's settings
    assert sentinel.sentinel_kwargs == (("password", "s"),)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://h:1", "unknown URL scheme"),
        ("h:1", "no scheme"),
        ("redis://h:1?ssl_ca_certs=ca.pem", "rediss://"),
        ("redis+sentinel://h/mymaster", "host:port"),
        ("redis+sentinel://h:1", "no service name"),
        ("redis+sentinel://h:1/mymaster/x", "must be a number"),
    ],
)
def test_malformed_urls_are_refused_saying_why(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_url(url)


def test_passwords_are_redacted_in_every_form() -> None:
    assert redact("redis+sentinel://u:s3cret@a:1,b:2/m") == "redis+sentinel://u:***@a:1,b:2/m"
    assert redact("rediss+cluster://:s3cret@h:7000") == "rediss+cluster://:***@h:7000"
    assert redact("redis://h:1/0") == "redis://h:1/0"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cluster", "--sentinel", "h:1", "--service", "m"], "choose one"),
        (["--sentinel", "h:1"], "go together"),
        (["--sentinel", "h:1", "--service", "m", "--url", "redis://h:2"], "without a host"),
        (["--url", "redis://h:1", "--tls-ca-cert", "ca.pem"], "--tls-ca-cert"),
        (["--sentinel", "nohost", "--service", "m"], "host:port"),
        (["--url", "unix:///s", "--cluster"], "--cluster needs"),
    ],
)
def test_topology_options_that_do_not_fit_exit_2_saying_why(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "inspect", "x"]) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and says in err


# -- TLS ---------------------------------------------------------------------------------------


def test_rediss_with_a_client_certificate_by_options_and_by_query(
    tls_server: RedisServer, tls_files: TLSFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    files = (tls_files.ca_cert, tls_files.client_cert, tls_files.client_key)
    ca, cert, key = (str(path) for path in files)
    options = ["--url", tls_server.url, "--tls-ca-cert", ca, "--tls-cert", cert, "--tls-key", key]
    assert main([*options, "run", "tls-job", *RUN_OK]) == 0
    first = inspected(capsys, *options, "inspect", "tls-job")["fence"]
    assert first > 0
    query = f"{tls_server.url}?ssl_ca_certs={ca}&ssl_certfile={cert}&ssl_keyfile={key}"
    assert main(["--url", query, "run", "tls-job", *RUN_OK]) == 0
    assert inspected(capsys, "--url", query, "inspect", "tls-job")["fence"] > first


def test_twin_rediss_without_the_client_certificate_is_refused(
    tls_server: RedisServer, tls_files: TLSFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shows the test above needs the certificate: the server refuses a client without one."""
    argv = ["--url", tls_server.url, "--tls-ca-cert", str(tls_files.ca_cert), "inspect", "x"]
    assert main(argv) == 69
    assert "cannot use Redis at rediss://" in capsys.readouterr().err


# -- Cluster -----------------------------------------------------------------------------------


def test_cluster_run_and_inspect_by_option_and_by_url(
    cluster: RedisClusterServers,
    cluster_client: redis.cluster.RedisCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    node = cluster.masters[0].url
    names = ["job-a", "job-b", "job-c", "job-d"]  # several slots, on several masters
    assert len({cluster.master_of(f"{{{name}}}").port for name in names}) > 1
    first = {}
    for name in names:
        assert main(["--url", node, "--cluster", "run", name, *RUN_OK]) == 0
        shown = inspected(capsys, "--url", node.replace("redis", "redis+cluster"), "inspect", name)
        assert shown["held"] is False and shown["fence"] > 0
        first[name] = shown["fence"]
    with redlease.Lock(cluster_client, "job-a", ttl=20.0):
        shown = inspected(capsys, "--cluster", "--url", node, "inspect", "job-a")
        assert shown["held"] is True and shown["fence"] > first["job-a"]
        assert main(["--cluster", "--url", node, "run", "job-a", "-n", *RUN_OK]) == 75


def test_cluster_inspect_all_lists_the_locks_of_every_master(
    cluster: RedisClusterServers,
    cluster_client: redis.cluster.RedisCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``inspect --all`` (SCAN) gets a RedisCluster from make_client: every master scanned."""
    names = ["all-a", "all-b", "all-c", "all-d"]
    assert len({cluster.master_of("{" + name + "}").port for name in names}) > 1
    locks = [redlease.Lock(cluster_client, name, ttl=20.0) for name in names]
    for lock in locks:
        assert lock.acquire(blocking=False)
    try:
        argv = ["--cluster", "--url", cluster.masters[0].url, "inspect", "--all", "--json"]
        assert main(argv) == 0
        rows = json.loads(capsys.readouterr().out)
    finally:
        for lock in locks:
            lock.release()
    assert {row["name"] for row in rows} == set(names)


def test_twin_a_cluster_node_as_one_server_cannot_see_every_lock(
    cluster: RedisClusterServers, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --cluster, a node refuses the keys of slots it does not own: the option is
    what makes the test above work."""
    name = "job-elsewhere"
    elsewhere = next(m for m in cluster.masters if m.port != cluster.master_of(f"{{{name}}}").port)
    assert main(["--url", elsewhere.url, "inspect", name]) == 69
    assert "MOVED" in capsys.readouterr().err


def test_cluster_unreachable_exits_69_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", "redis+cluster://:s3cret@127.0.0.1:1", "inspect", "x"]) == 69
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s3cret" not in err and "127.0.0.1:1" in err


def test_make_client_gives_a_cluster_client(cluster: RedisClusterServers) -> None:
    client = make_client(f"redis+cluster://127.0.0.1:{cluster.masters[0].port}")
    try:
        assert isinstance(client, redis.cluster.RedisCluster)
        assert len(client.get_primaries()) == 3
    finally:
        client.close()


def test_demo_flash_sale_on_the_cluster(
    cluster: RedisClusterServers, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's buyer processes get the topology with the URL (asyncio RedisCluster); the
    counter demo (sync Lock in processes) runs through the sentinels below."""
    argv = ["--cluster", "--url", cluster.masters[0].url, "demo", "--json"]
    sale = ["--strategies", "watch,lock,atomic", "--stock", "3", "--buyers", "6"]
    assert main([*argv, *sale, "--processes", "2", "--concurrency", "4", "--gap", "0"]) == 0
    rows = {row["strategy"]: row for row in json.loads(capsys.readouterr().out)["strategies"]}
    for name in ("watch", "lock", "atomic"):
        assert (rows[name]["sold"], rows[name]["oversold"]) == (3, 0), rows[name]


# -- Sentinel ----------------------------------------------------------------------------------


def sentinel_options(group: SentinelGroup) -> list[str]:
    options = []
    for host, port in group.sentinel_addresses:
        options += ["--sentinel", f"{host}:{port}"]
    return [*options, "--service", group.service]


def test_sentinel_run_and_inspect_by_options_and_by_url(
    sentinel_group: SentinelGroup, capsys: pytest.CaptureFixture[str]
) -> None:
    options = sentinel_options(sentinel_group)
    assert main([*options, "run", "s-job", *RUN_OK]) == 0
    first = inspected(capsys, *options, "inspect", "s-job")["fence"]
    assert first > 0
    hosts = ",".join(f"{h}:{p}" for h, p in sentinel_group.sentinel_addresses)
    url = f"redis+sentinel://{hosts}/{sentinel_group.service}/0"
    assert main(["--url", url, "run", "s-job", *RUN_OK]) == 0
    second = inspected(capsys, "--url", url, "inspect", "s-job")["fence"]
    assert second > first
    with sentinel_group.master.client() as conn:  # it was the master the sentinels named
        assert conn.get("redlease:{s-job}:fence") == str(second).encode()


def test_twin_a_sentinel_service_nobody_knows_exits_69(
    sentinel_group: SentinelGroup, capsys: pytest.CaptureFixture[str]
) -> None:
    """The service name is what finds the master: an unknown one finds none."""
    options = [*sentinel_options(sentinel_group)[:-1], "no-such-master"]
    assert main([*options, "inspect", "s-job"]) == 69
    err = capsys.readouterr().err
    assert "no-such-master" in err and err.count("\n") == 1 and "<redis" not in err


def test_sentinel_url_with_the_masters_password_from_url_option(
    sentinel_group: SentinelGroup, capsys: pytest.CaptureFixture[str]
) -> None:
    """--url without a host gives the master's settings (here a database number)."""
    options = sentinel_options(sentinel_group)
    assert main([*options, "--url", "redis:///5", "run", "s-db", *RUN_OK]) == 0
    with sentinel_group.master.client(db=5) as conn:
        assert int(conn.get("redlease:{s-db}:fence") or 0) > 0


def test_demo_counter_through_the_sentinels(
    sentinel_group: SentinelGroup, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [*sentinel_options(sentinel_group), "demo", "--counter", "--workers", "2"]
    assert main([*argv, "--increments", "10"]) == 0
    locked = next(line.split() for line in capsys.readouterr().out.splitlines() if "Lock" in line)
    assert locked[1:4] == ["20", "20", "0"]
