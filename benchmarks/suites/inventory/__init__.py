"""``benchmarks/inventory.py``: reservations per second, atomic vs lock vs WATCH.

- ``strategies``: one reservation of each strategy, and the keys they use;
- ``buyers``: the buyer processes and the crew the parent drives them with;
- ``main``: the rounds, the figures, the report and the run.
"""
