"""The layers stay small enough to read: no hand-written file above about 500 lines, and the
I/O layer at most 1.5x the pure core (docs/design.md, "Layers")."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "redlease"
LIMIT = 500
# Hand-written: everything but the generated sync half (scripts/unasync.py writes it).
TREES = ("src", "tests", "benchmarks", "scripts", "examples")
# The I/O layer: everything in _async/ that is not a primitive's shell, and the modules
# beside it that only the shell uses. What is left in _async/ is one shell per primitive.
SHELLS = {
    "breakglass", "cache", "election", "fencing", "inventory", "latch", "lock",
    "once", "ratelimit", "redispy", "redlock", "rwlock", "semaphore", "shared",
}  # fmt: skip
BESIDE = ("_fanout", "_compat", "_synchronization")


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def python_files(directory: Path) -> list[Path]:
    if directory.is_dir():
        return sorted(directory.rglob("*.py"))
    return [directory] if directory.exists() else []


def hand_written() -> list[Path]:
    found = []
    for tree in TREES:
        for path in python_files(ROOT / tree):
            if "_sync" not in path.relative_to(ROOT).parts:
                found.append(path)
    return found


def too_long(paths: list[Path], limit: int = LIMIT) -> list[str]:
    return [f"{p.relative_to(ROOT)}: {lines(p)}" for p in paths if lines(p) > limit]


def io_layer() -> list[Path]:
    shell = [p for p in python_files(PACKAGE / "_async") if p.stem not in SHELLS]
    beside = []
    for name in BESIDE:
        module = PACKAGE / f"{name}.py"
        beside += [module] if module.exists() else python_files(PACKAGE / name)
    return shell + beside


def test_no_hand_written_file_is_above_500_lines() -> None:
    assert too_long(hand_written()) == []


def test_twin_a_long_file_is_found(tmp_path: Path) -> None:
    global ROOT
    long = tmp_path / "src" / "long.py"
    long.parent.mkdir()
    long.write_text("x = 1\n" * (LIMIT + 1))
    generated = tmp_path / "src" / "_sync" / "long.py"
    generated.parent.mkdir()
    generated.write_text("x = 1\n" * (LIMIT + 1))
    saved, ROOT = ROOT, tmp_path
    try:
        assert too_long(hand_written()) == [f"src/long.py: {LIMIT + 1}"]
    finally:
        ROOT = saved


def test_the_io_layer_is_at_most_one_and_a_half_times_the_core() -> None:
    io = sum(lines(p) for p in io_layer())
    core = sum(lines(p) for p in python_files(PACKAGE / "_core"))
    assert io <= 1.5 * core, f"I/O layer {io} lines, _core {core}: {io / core:.2f}x"


def test_every_shell_named_is_a_module() -> None:
    """A shell renamed or removed must leave SHELLS too, or the I/O layer would shrink by
    a file that no longer counts."""
    assert sorted(s for s in SHELLS if not (PACKAGE / "_async" / f"{s}.py").exists()) == []
