"""The shared harness of the benchmarks: each script in ``benchmarks/`` describes what it
measures, and takes everything else from here.

- ``config``: command-line options every script has (``--url``, ``--quick``, ``--json``, ...);
- ``servers``: private servers started and stopped, and what is read from them (INFO);
- ``spawn``: child processes with a shared start instant, bounded waits and reaping;
- ``cpu``: CPU time of this process, of another process or thread, and of a server;
- ``locks``: one acquire+release as a timed operation, the raw floor, the waiting warm-up;
- ``timing``: interleaved latency rounds on a private loop, and their percentiles;
- ``contention``: the figures of a contended run (hand-off, waits, spread, exclusion);
- ``report``: tables, verdicts, section headers and the JSON file;
- ``run``: progress lines, the run's bookkeeping and its clean-up.

The scripts are run as ``python benchmarks/<name>.py``, so ``benchmarks/`` is on ``sys.path``
(in their spawned children too) and they import this package as ``harness``.
"""
