"""The I/O-free core of redlease.

Everything a reviewer must check sits here and in ``redlease/lua``: key layout
(:mod:`.keys`), script contracts (:mod:`.scripts`), argument checks (:mod:`.validate`) and the
decisions of a lock's life (:mod:`.lease`, :mod:`.waiters`). Nothing here imports redis, sleeps
or reads a clock on its own: callers pass ``now`` in. The sync and asyncio shells in
``redlease._async`` / ``redlease._sync`` only move bytes between these and Redis.
"""
