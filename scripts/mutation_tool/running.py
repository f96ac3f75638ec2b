"""Running one mutant: its tests chosen from the baseline, its source written in place in a worker's copy."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from mutation_tool import processes, workspace
from mutation_tool.baseline import Baseline
from mutation_tool.mutants import Mutant

KILLED, TIMEOUT, SURVIVED, EQUIVALENT = "killed", "timeout", "survived", "equivalent"
NO_TEST = "no test reaches it"


@dataclass(frozen=True)
class Result:
    """What became of one mutant."""

    mutant: Mutant
    status: str
    seconds: float = 0.0
    tests: int = 0
    note: str = ""


@dataclass(frozen=True)
class Worker:
    """A copy of the project that runs one mutant at a time."""

    tree: Path
    scratch: Path
    plugins: Path


def choose_tests(mutant: Mutant, baseline: Baseline) -> list[str]:
    """The tests that can tell ``mutant`` from the original, fastest first.

    A line that runs when the module is imported (module level, class bodies, decorators, default
    values) gets the whole selection: coverage credits an import to whichever test imported first, not to
    the tests that rely on what it defined; so does a line run outside any test (at collection). Any other
    line gets the tests that ran it (a shared fixture's lines: every test using the fixture), and every test
    that starts a Python subprocess (coverage does not see into the child).
    """
    covering = None if mutant.import_time else baseline.covering(mutant.module, mutant.first_line, mutant.last_line)
    chosen = set(baseline.durations) if covering is None else covering | baseline.subprocess_tests
    return sorted(chosen, key=lambda node: (baseline.durations.get(node, 0.0), node))


def run_mutant(
    worker: Worker,
    mutant: Mutant,
    *,
    original: bytes,
    tests: list[str],
    baseline: Baseline,
    known: Path,
    factor: float,
    timeout_min: float,
) -> Result:
    """Write ``mutant`` into the worker's copy, run ``tests`` against it, restore the original."""
    if not tests:
        return Result(mutant, SURVIVED, note=NO_TEST)
    selected = worker.scratch / "select.txt"
    selected.write_text("\n".join(tests) + "\n")
    files = list(dict.fromkeys(node.split("::")[0] for node in tests))
    # the run pays pytest's start-up and collection too, as the baseline did
    timeout = max(timeout_min, factor * (baseline.startup + sum(baseline.durations.get(node, 0.0) for node in tests)))
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "_mutation_select", *files]
    env = workspace.environment(worker.tree, worker.plugins, MUTATION_SELECT=str(selected), MUTATION_KNOWN=str(known))
    path = worker.tree / mutant.module
    try:
        path.write_bytes(mutant.apply(original))
        workspace.drop_bytecode(worker.tree, mutant.module)
        finished = processes.run(command, worker.tree, env, timeout, worker.scratch / "mutant.log")
    finally:
        path.write_bytes(original)
        workspace.drop_bytecode(worker.tree, mutant.module)
    if finished.returncode is None:
        return Result(mutant, TIMEOUT, finished.seconds, len(tests), f"ran past {timeout:.0f} s")
    if finished.returncode == 0:
        return Result(mutant, SURVIVED, finished.seconds, len(tests))
    if finished.returncode == 5:
        return Result(mutant, SURVIVED, finished.seconds, len(tests), "pytest collected no test")
    # 1: a test failed; 2: interrupted (a collection error: the mutant broke an import); 3 and 4 (pytest's
    # internal and usage errors) follow from a mutant too (it broke the kvlog plugin), but say so in case not
    note = f"pytest exit {finished.returncode}" if finished.returncode not in (1, 2) else ""
    return Result(mutant, KILLED, finished.seconds, len(tests), note)
