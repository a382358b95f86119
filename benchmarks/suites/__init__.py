"""The larger benchmarks, one package each, split by section: ``benchmarks/<name>.py`` is
the command, these are what it runs. The shared plumbing is in ``benchmarks/harness``."""
