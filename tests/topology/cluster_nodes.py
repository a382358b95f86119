"""What a Redis Cluster node says of the cluster: ``CLUSTER NODES`` parsed, and hash slots."""

from __future__ import annotations

from dataclasses import dataclass

from tests.topology._common import probe

__all__ = ["SLOTS", "ClusterNodeInfo", "cluster_nodes", "key_slot", "owns"]

SLOTS = 16384
"""Number of hash slots in a Redis Cluster."""


def key_slot(key: str | bytes) -> int:
    """The cluster hash slot of ``key`` (CRC16 of the ``{hash tag}`` if present, mod 16384)."""
    from redis.crc import key_slot as crc_key_slot

    return int(crc_key_slot(key.encode() if isinstance(key, str) else key))


@dataclass(frozen=True)
class ClusterNodeInfo:
    """One line of ``CLUSTER NODES`` as seen by one node."""

    node_id: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    slots: tuple[tuple[int, int], ...]

    @property
    def is_master(self) -> bool:
        """True for a master (with or without slots)."""
        return "master" in self.flags

    @property
    def failed(self) -> bool:
        """True if the node is flagged ``fail`` (or ``fail?``) by the viewer."""
        return bool({"fail", "fail?"} & self.flags)


def cluster_nodes(port: int) -> dict[str, ClusterNodeInfo]:
    """``CLUSTER NODES`` of the node on ``port``, parsed, by node id."""
    with probe(port) as conn:
        # Two words: redis-py would otherwise parse "CLUSTER NODES" into its own dict shape.
        text = conn.execute_command("CLUSTER", "NODES")
    if isinstance(text, bytes):
        text = text.decode()
    nodes: dict[str, ClusterNodeInfo] = {}
    for line in str(text).splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address = fields[1].split("@")[0]  # ip:port@cport[,hostname]
        slots: list[tuple[int, int]] = []
        for spec in fields[8:]:
            if spec.startswith("["):  # a slot being imported/migrated: [slot->-id]
                continue
            low, _, high = spec.partition("-")
            slots.append((int(low), int(high or low)))
        nodes[fields[0]] = ClusterNodeInfo(
            node_id=fields[0],
            port=int(address.rsplit(":", 1)[1]) if ":" in address else 0,
            flags=frozenset(fields[2].replace("myself,", "").split(",")),
            master_id=None if fields[3] == "-" else fields[3],
            slots=tuple(slots),
        )
    return nodes


def owns(info: ClusterNodeInfo, slot: int) -> bool:
    """Whether ``info`` (a master) owns ``slot``."""
    return any(low <= slot <= high for low, high in info.slots)
