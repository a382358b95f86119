"""The chaos suite: workers, a seeded fault schedule, a proxy, and a history checker.

``python -m tests.chaos --seed N --ops 100000 [--target lock|redlock]`` runs a long schedule;
``tests/chaos/test_chaos.py`` runs a short one in CI. See docs/faults.md for the results.
"""
