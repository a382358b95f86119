"""The least a Redis ACL user needs to run redlease: its keys, its channels, its commands.

``acl_rules()`` returns the rules for ``ACL SETUSER <user> on ><password> <rules...>``::

    ACL SETUSER app on >secret ~redlease:{* ~redlease:ratelimit:* resetchannels
        &redlease:waiters:* ...

or, in an ``aclfile``, the same words after ``user app on >secret``. Nothing else is needed:
Redis checks the commands a Lua script calls against the user's rules too, so the list holds
every command in redlease's scripts (``src/redlease/lua``) besides the few the clients send
themselves (``EVALSHA``; ``EVAL`` when the server lost its script cache; ``SUBSCRIBE`` to wait;
``INFO`` by which Redlock tells its servers apart). With ``cluster=True``, the sharded
pub/sub and ``CLUSTER`` subcommands the Cluster adapter uses; with ``replicas=True``, ``WAIT``
and ``WAITAOF`` for ``wait_replicas``.

**Prefixes and tenants.** The key patterns are exact: every key of a primitive under prefix
``P`` is ``P:{<name>}:...`` (a rate limiter's ``P:ratelimit:...``), and the rules grant
``~P:{*`` and ``~P:ratelimit:*``, not ``~P:*``. So the user of prefix ``app`` is not given
the keys of prefix ``app:billing`` (``app:billing:{...}``), as ``~app:*`` would. The one
overlap left: a prefix ``P:ratelimit`` (or one starting with it) is inside ``P``'s rate
limiter pattern, so never give another tenant such a prefix. Glob characters in a prefix
(``*``, ``?``, brackets, backslashes) are escaped. The waiters' channels are shared by every
prefix.
"""

from __future__ import annotations

from ._core import validate

__all__ = ["acl_rules"]

SCRIPT_COMMANDS = (
    "decr",
    "del",
    "exists",
    "get",
    "hdel",
    "hget",
    "hgetall",
    "hincrby",
    "hmget",
    "hset",
    "incr",
    "incrby",
    "pexpire",
    "pttl",
    "publish",
    "set",
    "time",
    "type",
    "zadd",
    "zcard",
    "zrange",
    "zrangebylex",
    "zrangebyscore",
    "zrem",
    "zscore",
)
"""Every command redlease's Lua scripts call (tests/test_acl.py checks this against them)."""

CLIENT_COMMANDS = ("evalsha", "eval", "subscribe", "unsubscribe", "info", "ping")
"""What redlease's connections send themselves. (redis-py also greets a server with ``CLIENT
SETINFO``, which it does without if refused: allow ``+client|setinfo`` on Redis >= 7.2 to keep
the library name in ``CLIENT LIST``.)"""

CLUSTER_COMMANDS = ("spublish", "ssubscribe", "sunsubscribe", "cluster|myid", "cluster|slots")
REPLICA_COMMANDS = ("wait", "waitaof")


def acl_rules(
    prefix: str = "redlease", *, cluster: bool = False, replicas: bool = False
) -> list[str]:
    """The ACL rules that let a user run every redlease primitive under ``prefix``.

    :param prefix: the key prefix your primitives use (their ``prefix=``, default
        ``"redlease"``): the user may touch ``<prefix>:{*`` and ``<prefix>:ratelimit:*`` keys
        only, which no other prefix's keys match but those of a prefix
        ``<prefix>:ratelimit...`` (see above). The waiters' channels are always
        ``redlease:waiters:*``.
    :param cluster: also what a Redis Cluster needs (sharded pub/sub, ``CLUSTER`` lookups).
    :param replicas: also ``WAIT`` / ``WAITAOF``, for locks with ``wait_replicas``.
    """
    validate.prefix(prefix)
    commands = [*SCRIPT_COMMANDS, *CLIENT_COMMANDS]
    if cluster:
        commands += CLUSTER_COMMANDS
    if replicas:
        commands += REPLICA_COMMANDS
    start = _glob_escape(prefix)
    keys = [f"~{start}:{{*", f"~{start}:ratelimit:*"]
    # resetchannels: a Redis 6.2 user starts with every channel (acl-pubsub-default), and
    # refuses a channel pattern added to that; from 7.0 it is the default.
    return [*keys, "resetchannels", "&redlease:waiters:*", *(f"+{c}" for c in commands)]


def _glob_escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
