"""The asyncio shell, written by hand. ``_sync/`` is generated from it by scripts/unasync.py."""
