"""Smoke tests of the TLS server fixture and the ACL helper."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Callable

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.topology import ACLUser
from tests.topology.server import RedisServer, TLSFiles

NO_RETRY = Retry(NoBackoff(), 0)


def test_tls_client_with_a_client_certificate_connects(tls_server: RedisServer) -> None:
    assert tls_server.url.startswith("rediss://")
    with tls_server.client() as conn:
        assert conn.set("k", "v")
        assert conn.get("k") == b"v"


def test_tls_server_refuses_plain_tcp_and_clients_without_a_certificate(
    tls_server: RedisServer, tls_files: TLSFiles
) -> None:
    plain = redis.Redis(
        host=tls_server.host, port=tls_server.port, retry=NO_RETRY, socket_timeout=2
    )
    with pytest.raises(redis.ConnectionError):
        plain.ping()
    no_cert = redis.Redis(
        host=tls_server.host,
        port=tls_server.port,
        retry=NO_RETRY,
        socket_timeout=2,
        ssl=True,
        ssl_ca_certs=str(tls_files.ca_cert),
    )
    with pytest.raises(redis.ConnectionError):
        no_cert.ping()


def test_rediss_url_with_the_client_certificate_connects(
    tls_server: RedisServer, tls_files: TLSFiles
) -> None:
    conn = redis.Redis.from_url(
        tls_server.url,
        ssl_ca_certs=str(tls_files.ca_cert),
        ssl_certfile=str(tls_files.client_cert),
        ssl_keyfile=str(tls_files.client_key),
    )
    assert conn.ping()
    conn.close()


def test_acl_user_is_refused_commands_and_keys_outside_its_rules(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    user = make_acl_user("app", ["~app:*", "+get", "+set"])
    with server.client(**user.kwargs()) as conn:
        assert conn.set("app:1", "v")
        assert conn.get("app:1") == b"v"
        with pytest.raises(redis.exceptions.NoPermissionError):
            conn.delete("app:1")  # command outside the rules
        with pytest.raises(redis.exceptions.NoPermissionError):
            conn.get("other:1")  # key outside the rules


def test_twin_the_same_commands_pass_for_a_user_allowed_everything(
    server: RedisServer, make_acl_user: Callable[..., ACLUser]
) -> None:
    """Shows the refusals above come from the rules, not from the helper or the client."""
    user = make_acl_user("admin2", ["~*", "+@all"])
    with server.client(**user.kwargs()) as conn:
        conn.set("app:1", "v")
        assert conn.delete("app:1") == 1
        assert conn.get("other:1") is None


def test_acl_user_arguments_are_checked(server: RedisServer) -> None:
    from tests.topology import acl_user

    with server.client() as admin, pytest.raises(TypeError, match="rules"):
        acl_user(admin, "u", "+get")
    with server.client() as admin, pytest.raises(ValueError, match="username"):
        acl_user(admin, "bad name", ["+get"])


def test_generated_certificates_chain_to_the_ca_and_match_their_keys(tls_files: TLSFiles) -> None:
    """Runs even where the server has no TLS: the files the TLS fixture would use are sound."""
    context = ssl.create_default_context(cafile=str(tls_files.ca_cert))
    context.load_cert_chain(str(tls_files.client_cert), str(tls_files.client_key))
    context.load_cert_chain(str(tls_files.server_cert), str(tls_files.server_key))
    openssl = shutil.which("openssl")
    assert openssl is not None
    for cert in (tls_files.server_cert, tls_files.client_cert):
        done = subprocess.run(
            [openssl, "verify", "-CAfile", str(tls_files.ca_cert), str(cert)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
    text = subprocess.run(
        [openssl, "x509", "-in", str(tls_files.server_cert), "-noout", "-ext", "subjectAltName"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "IP Address:127.0.0.1" in text
