"""The baseline: the selection run once, unmutated, under coverage, with the probe plugin.

It must be green (a red baseline would make every mutant look killed). It says, per test, the lines it
ran in the measured modules, how long it took, and whether it started a Python subprocess.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from coverage import CoverageData

from mutation_tool import processes, workspace


class BaselineError(Exception):
    """The unmutated selection does not pass (or does not finish)."""


@dataclass
class Baseline:
    """What the unmutated run of one selection found."""

    tests: tuple[str, ...]  # test files
    durations: dict[str, float] = field(default_factory=dict)  # node id -> seconds
    subprocess_tests: frozenset[str] = frozenset()
    users: dict[str, frozenset[str]] = field(default_factory=dict)  # shared fixture key -> node ids using it
    lines: dict[str, dict[int, frozenset[str]]] = field(default_factory=dict)  # module -> line -> contexts
    seconds: float = 0.0

    @property
    def startup(self) -> float:
        """The seconds of the run that no test took: starting Python and pytest, collecting."""
        return max(0.0, self.seconds - sum(self.durations.values()))

    def covering(self, module: str, first: int, last: int) -> set[str] | None:
        """The tests that ran any of lines ``first`` to ``last`` of ``module``; None for the whole selection.

        A line a shared fixture ran counts for every test that uses the fixture. A line run outside any
        test (plugin loading, collection: a test module that builds its cases at import) may change what
        any test sees, so it gets the whole selection, as does a context the probe cannot place.
        """
        by_line = self.lines.get(module, {})
        found: set[str] = set()
        for line in range(first, last + 1):
            for context in by_line.get(line, frozenset()):
                if context in self.durations:
                    found.add(context)
                elif context in self.users:
                    found |= self.users[context]
                else:
                    return None
        return found


def run_baseline(
    tree: Path, plugins: Path, *, scratch: Path, modules: list[str], tests: tuple[str, ...], timeout: float
) -> Baseline:
    """Run ``tests`` in ``tree`` with coverage of ``modules``; raise BaselineError unless all pass."""
    scratch.mkdir(parents=True, exist_ok=True)
    data_file = scratch / "coverage.db"
    rc_file = scratch / "coveragerc"
    include = "\n".join(f"    {tree / module}" for module in modules)
    rc_file.write_text(f"[run]\ndata_file = {data_file}\ninclude =\n{include}\nbranch = False\n")
    probe_out = scratch / "probe.json"
    log = scratch / "baseline.log"
    command = [
        sys.executable,
        "-m",
        "coverage",
        "run",
        f"--rcfile={rc_file}",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "_mutation_probe",
        *tests,
    ]
    env = workspace.environment(tree, plugins, MUTATION_PROBE_OUT=str(probe_out))
    finished = processes.run(command, tree, env, timeout, log)
    if finished.returncode is None:
        raise BaselineError(f"the baseline ran past {timeout:.0f} s and was stopped; its output: {log}")
    probe = json.loads(probe_out.read_text()) if probe_out.exists() else None
    if probe is None:
        raise BaselineError(f"pytest ended ({finished.returncode}) before running the tests:\n{_tail(log)}")
    failed = [node for node, entry in probe["tests"].items() if entry["failed"]] + probe["collection_errors"]
    if failed or finished.returncode != 0:
        names = "\n".join(f"  {node}" for node in failed) or _tail(log)
        raise BaselineError(f"{len(failed)} unmutated test(s) fail, fix them first:\n{names}")
    baseline = Baseline(
        tests=tests,
        durations={node: entry["duration"] for node, entry in probe["tests"].items()},
        subprocess_tests=frozenset(node for node, entry in probe["tests"].items() if entry["subprocess"]),
        users=_users(probe["tests"]),
        seconds=finished.seconds,
    )
    data = CoverageData(basename=str(data_file))
    data.read()
    for module in modules:
        measured = str(tree / module)
        if measured not in data.measured_files():
            continue
        by_line = data.contexts_by_lineno(measured)
        baseline.lines[module] = {line: frozenset(contexts) for line, contexts in by_line.items()}
    return baseline


def _users(tests: dict[str, dict[str, object]]) -> dict[str, frozenset[str]]:
    users: dict[str, set[str]] = {}
    for node, entry in tests.items():
        for key in entry.get("fixtures") or []:  # type: ignore[attr-defined]
            users.setdefault(key, set()).add(node)
    return {key: frozenset(nodes) for key, nodes in users.items()}


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
